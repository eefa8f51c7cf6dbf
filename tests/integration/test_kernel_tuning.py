"""Kernel tuning on a real mount (by default as root, ``-o tune_kernel``, ``-o
no_tune_kernel``): the connection's sysfs knobs after mounting, fusectl mounted if missing."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from refmount.ops.kernel_tuning import knob_paths
from tests.support.datasets import json_v0
from tests.support.mounting import Mount, mounted, requires_fuse

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
        if "no_tune" not in " ".join(mount.process.args):  # type: ignore[arg-type]
            log = wait_for_log(mount, "cannot tune the kernel")
            assert log.count("cannot tune the kernel") == 1
            assert (mount.path / "text").exists()
        pytest.skip(f"no {', '.join(missing)} here (fusectl not mounted?)")
    return {name: int(path.read_text()) for name, path in paths.items()}


CONNECTIONS = Path("/sys/fs/fuse/connections")


@pytest.fixture(autouse=True, scope="module")
def fusectl_as_found() -> Iterator[None]:
    """Leave the fusectl mount as the tests found it (the daemons mount it when missing)."""
    was_mounted = os.path.ismount(CONNECTIONS)
    yield
    if not was_mounted and os.path.ismount(CONNECTIONS):
        subprocess.run(["umount", str(CONNECTIONS)], check=False)
    if was_mounted and not os.path.ismount(CONNECTIONS):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", str(CONNECTIONS)], check=False)


def test_the_default_tuning_mounts_fusectl_where_it_is_missing(tmp_path: Path) -> None:
    if os.path.ismount(CONNECTIONS):  # earlier mounts tuned the kernel: take it away again
        unmounted = subprocess.run(["umount", str(CONNECTIONS)], capture_output=True, text=True)
        if unmounted.returncode != 0:
            pytest.skip(f"fusectl is mounted here and cannot be unmounted: {unmounted.stderr}")
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        log = wait_for_log(mount, "kernel tuning for", "cannot tune the kernel")
        assert os.path.ismount(CONNECTIONS), log
        assert "mounted fusectl on /sys/fs/fuse/connections" in log
        assert knobs_of(mount)["max_background"] == 64


@pytest.mark.parametrize(
    ("options", "read_ahead_kb"),
    [((), 16384), (("-o", "tune_kernel"), 16384), (("-o", "tune_read_ahead=4M"), 4096)],
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


@pytest.mark.parametrize("option", [("-o", "no_tune_kernel"), ("--no-tune-kernel",)])
def test_with_no_tune_kernel_the_kernel_defaults_stay(
    tmp_path: Path, option: tuple[str, ...]
) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt", *option) as mount:
        wait_for_log(mount, "mounted on")
        assert knobs_of(mount)["max_background"] == 12
        assert "kernel tuning" not in mount.log_text()
