"""refmount.mount() for real: the daemon in a child process, path and in-memory sets,
failures carrying the command's line, and no mount left behind by a killed caller."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import refmount
from refmount.errors import BadInputError, RefmountError, StartError
from tests.support import datasets
from tests.support.icechunk_repos import build_repository, open_store, requires_icechunk, store_get
from tests.support.mounting import (
    is_mounted,
    read_errno,
    refmount_command,
    requires_fuse,
    unmount,
)

pytestmark = [pytest.mark.fuse, requires_fuse]

DEADLINE = 60.0
"""Generous: proves that an unmount happens, not how fast."""


def refmount_mounts() -> list[str]:
    """Return the mountpoints of this process's mount table whose type is refmount's."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        if line.split(" - ", 1)[1].startswith("fuse.refmount "):
            found.append(fields[4])
    return found


def test_a_path_mounts_in_a_child_and_unmounts_with_the_block(tmp_path: Path) -> None:
    dataset = datasets.json_v1(tmp_path)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    with refmount.mount(dataset.refs, mountpoint, cache_size="64M", retries=1) as mount:
        assert mount.path == mountpoint
        assert is_mounted(mountpoint)
        assert mount.pid != os.getpid()
        for key, expected in dataset.expected.items():
            assert (mountpoint / key).read_bytes() == expected, key
        stats = mount.stats()
        assert stats["reads"] >= 1
        assert stats["source"] == str(dataset.refs)
        shown = subprocess.run(
            refmount_command("stats", "--json", str(mountpoint)), capture_output=True, check=True
        )
        assert json.loads(shown.stdout).keys() == stats.keys()
    assert not is_mounted(mountpoint)
    assert not mount.mounted
    mount.unmount()  # again: nothing happens
    assert mountpoint.is_dir()  # the caller's directory is kept


def test_a_dict_with_base_and_a_private_mountpoint(tmp_path: Path) -> None:
    dataset = datasets.json_v0(tmp_path)
    refs = json.loads(dataset.refs.read_text())  # relative targets: "data.bin"
    os.utime(dataset.refs, (0, 0))
    before = time.time()
    mount = refmount.mount(refs, base=str(tmp_path))
    try:
        assert mount.path.parent == Path(tempfile.gettempdir())
        assert mount.path.name.startswith("refmount-")
        for key, expected in dataset.expected.items():
            path = mount.path / key
            assert path.read_bytes() == expected, key
            assert before - 1 <= path.stat().st_mtime <= time.time()  # the time of the mount
    finally:
        mount.unmount()
    assert not mount.path.exists()


def test_a_dict_with_relative_targets_and_no_base_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "data.bin"
    target.write_bytes(b"0123456789")
    with pytest.raises(BadInputError) as caught:
        refmount.mount({"x": ["data.bin", 0, 4]})
    assert str(caught.value) == (
        "<stdin>: key 'x': relative target path 'data.bin', and the set has no directory "
        "to resolve it against (give --base, or base= from Python)"
    )
    assert caught.value.status == 2


def test_a_malformed_file_raises_the_line_the_command_prints(tmp_path: Path) -> None:
    refs = tmp_path / "bad.json"
    refs.write_text(json.dumps({"version": 1, "refs": {"a": ["x", -1, 3]}}))
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    command = subprocess.run(
        refmount_command(str(refs), str(mountpoint)), capture_output=True, text=True
    )
    assert command.returncode == 2
    line = command.stderr.strip().splitlines()[-1]
    with pytest.raises(BadInputError) as caught:
        refmount.mount(refs, mountpoint)
    assert isinstance(caught.value, RefmountError)
    assert f"refmount: error: {caught.value}" == line
    assert not is_mounted(mountpoint)


def test_an_unusable_mountpoint_is_a_start_error(tmp_path: Path) -> None:
    dataset = datasets.json_v0(tmp_path)
    with pytest.raises(StartError, match="does not exist") as caught:
        refmount.mount(dataset.refs, tmp_path / "missing")
    assert not isinstance(caught.value, BadInputError)
    assert caught.value.status == 1


def test_a_killed_caller_leaves_no_mount(tmp_path: Path) -> None:
    dataset = datasets.json_v0(tmp_path)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    script = textwrap.dedent(
        f"""
        import sys, time, refmount
        mount = refmount.mount({str(dataset.refs)!r}, {str(mountpoint)!r})
        print(mount.pid, flush=True)
        time.sleep(600)
        """
    )
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert caller.stdout is not None
        daemon = int(caller.stdout.readline())
        assert str(mountpoint) in refmount_mounts()
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        deadline = time.monotonic() + DEADLINE
        while str(mountpoint) in refmount_mounts() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert str(mountpoint) not in refmount_mounts()
        while _alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(daemon)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
        if caller.stdout is not None:
            caller.stdout.close()
        unmount(mountpoint)


def test_a_caller_that_exits_normally_leaves_no_mount(tmp_path: Path) -> None:
    dataset = datasets.json_v0(tmp_path)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    script = f"import refmount; refmount.mount({str(dataset.refs)!r}, {str(mountpoint)!r})"
    try:
        subprocess.run([sys.executable, "-c", script], check=True, timeout=DEADLINE)
        assert str(mountpoint) not in refmount_mounts()  # atexit waited for the unmount
    finally:
        unmount(mountpoint)


def _alive(pid: int) -> bool:
    """Return True while ``pid`` runs (a zombie counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


@requires_icechunk
def test_a_repository_mounts_at_the_version_and_containers_asked_for(tmp_path: Path) -> None:
    import errno

    import zarr

    built = build_repository(tmp_path / "built")
    store = open_store(built, built.first, (built.container,))
    with refmount.mount(
        built.path, tag="v1", authorize_container=[built.container], xattr=True
    ) as mount:
        assert os.getxattr(mount.path, "user.refmount.snapshot") == built.first.encode()
        assert (mount.path / "small/c/0").read_bytes() == store_get(store, "small/c/0")
        values = zarr.open_array(str(mount.path / "virtual/v"), mode="r")[...]
        np.testing.assert_array_equal(values, built.arrays[built.first]["virtual/v"])
        assert read_errno(mount.path / "virtual/w/c/0") == errno.EACCES
    with pytest.raises(BadInputError) as caught:
        refmount.mount(built.path, branch="nope")
    assert str(caught.value).startswith(f"{built.path}: cannot open branch nope")
    with pytest.raises(BadInputError, match="give at most one of --branch, --tag"):
        refmount.mount(built.path, branch="dev", snapshot=built.first)
