"""``-o tune_kernel`` on a real mount: the connection's sysfs knobs after mounting."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from refmount.kernel import knob_paths
from tests.integration.datasets import json_v0
from tests.integration.mounting import Mount, mounted, requires_fuse

pytestmark = [
    pytest.mark.fuse,
    requires_fuse,
    pytest.mark.skipif(os.geteuid() != 0, reason="kernel tuning needs root"),
]


def wait_for_log(mount: Mount, *texts: str, timeout: float = 10.0) -> str:
    """Return the mount's log once it holds one of ``texts``."""
    deadline = time.monotonic() + timeout
    while not any(text in (log := mount.log_text()) for text in texts):
        assert time.monotonic() < deadline, log
        time.sleep(0.02)
    return log


def knobs_of(mount: Mount) -> dict[str, int]:
    """Return the knobs of the mount's connection; skip when sysfs lacks them.

    Without the knobs (no fusectl filesystem, or an older kernel) a tuned mount must still
    work, with one warning.
    """
    paths = knob_paths(os.stat(mount.path).st_dev)
    missing = [str(path) for path in paths.values() if not path.exists()]
    if missing:
        if "tune" in " ".join(mount.process.args):  # type: ignore[arg-type]
            log = wait_for_log(mount, "cannot tune the kernel")
            assert log.count("cannot tune the kernel") == 1
            assert (mount.path / "text").exists()
        pytest.skip(f"no {', '.join(missing)} here (fusectl not mounted?)")
    return {name: int(path.read_text()) for name, path in paths.items()}


@pytest.mark.parametrize(
    ("options", "read_ahead_kb"),
    [(("-o", "tune_kernel"), 16384), (("-o", "tune_read_ahead=4M"), 4096)],
)
def test_tune_kernel_sets_the_connection_knobs(
    tmp_path: Path, options: tuple[str, ...], read_ahead_kb: int
) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt", *options) as mount:
        wait_for_log(mount, "kernel tuning for", "cannot tune the kernel")
        knobs = knobs_of(mount)
        log = mount.log_text()
        assert knobs == {
            "read_ahead_kb": read_ahead_kb,
            "max_background": 64,
            "congestion_threshold": 48,
        }
        assert f"read_ahead_kb 128 → {read_ahead_kb}" in log
        assert (mount.path / "text").read_bytes() == dataset.expected["text"]


def test_without_the_option_the_kernel_defaults_stay(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        wait_for_log(mount, "mounted on")
        assert knobs_of(mount)["max_background"] == 12
        assert "kernel tuning" not in mount.log_text()
