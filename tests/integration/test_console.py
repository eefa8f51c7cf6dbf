"""Where a daemon in the background logs when the machine has neither syslog nor the journal."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from refmount.ops.logs import JOURNAL_SOCKET_VARIABLE, SYSLOG_SOCKET_VARIABLE, escape_mountpoint
from tests.support.mounting import (
    is_mounted,
    read_errno,
    refmount_command,
    requires_fuse,
    unmount,
)

pytestmark = [pytest.mark.fuse, requires_fuse]

NOTICE = "refmount: no syslog or journal socket; logging to "


def test_without_syslog_a_failed_read_is_logged_in_the_printed_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.nc"
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"version": 1, "refs": {"ok": "hi", "lost": [str(missing), 0, 8]}}))
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    env = dict(os.environ)
    env[SYSLOG_SOCKET_VARIABLE] = str(tmp_path / "no-dev-log")
    env[JOURNAL_SOCKET_VARIABLE] = str(tmp_path / "no-journal")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    expected_directory = (
        Path("/var/log/refmount") if os.geteuid() == 0 else tmp_path / "state" / "refmount"
    )
    expected = expected_directory / f"{escape_mountpoint(str(mountpoint))}.log"
    try:
        result = subprocess.run(
            refmount_command(str(refs), str(mountpoint)),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr.splitlines()[-1] == f"{NOTICE}{expected}"
        assert (mountpoint / "ok").read_bytes() == b"hi"
        assert read_errno(mountpoint / "lost") == errno.EIO
        deadline = time.monotonic() + 15
        while "lost" not in expected.read_text():
            assert time.monotonic() < deadline, expected.read_text()
            time.sleep(0.05)
        line = next(line for line in expected.read_text().splitlines() if "lost" in line)
        assert "ERROR" in line
        assert str(missing) in line
    finally:
        unmount(mountpoint)
        for old in expected_directory.glob(f"{expected.name}*"):
            old.unlink()
    deadline = time.monotonic() + 15
    while is_mounted(mountpoint):
        assert time.monotonic() < deadline, f"{mountpoint} is still mounted"
        time.sleep(0.05)
