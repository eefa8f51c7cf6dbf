"""Helpers that run the real ``refmount`` command in a child process and mount for real."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

MOUNT_TIMEOUT = 30.0

ENGINE_OPTIONS: tuple[str, ...] = ()
"""Options every ``mounted`` command gets first; the ``each_fetcher`` fixture sets
``--fetcher`` here, so a module's tests run once per fetch engine."""


def fuse_unavailable() -> str | None:
    """Return why real mounts cannot run here, or None when they can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian package fuse3)"
    return None


_reason = fuse_unavailable()
requires_fuse = pytest.mark.skipif(_reason is not None, reason=_reason or "")


@dataclass
class Mount:
    """A running ``refmount -f`` child and where it is mounted."""

    path: Path
    process: subprocess.Popen[bytes]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def refmount_command(*args: str, program: Sequence[str] | None = None) -> list[str]:
    """Return the command line that runs refmount: from this environment, or ``program``
    (another installation's ``refmount``)."""
    return [*(program or (sys.executable, "-m", "refmount")), *args]


def read_errno(path: Path) -> int | None:
    """Read ``path`` whole; return the errno it fails with, or None when it reads."""
    try:
        path.read_bytes()
    except OSError as error:
        return error.errno
    return None


def is_mounted(path: Path) -> bool:
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == str(path) for line in mounts)


def unmount(path: Path) -> None:
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", str(path)], check=False, capture_output=True)


@contextmanager
def mounted(
    refs: str | Path, mountpoint: Path, *options: str, program: Sequence[str] | None = None
) -> Iterator[Mount]:
    """Mount ``refs`` on ``mountpoint`` in the foreground; always unmount and reap the child.

    ``program`` runs another installation's ``refmount`` instead of this environment's."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    log = mountpoint.parent / f"{mountpoint.name}.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            refmount_command(
                "-f",
                "--log-level",
                "debug",
                *ENGINE_OPTIONS,
                *options,
                str(refs),
                str(mountpoint),
                program=program,
            ),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    mount = Mount(mountpoint, process, log)
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(mountpoint):
            if process.poll() is not None:
                code = process.returncode
                raise AssertionError(f"refmount exited with {code}:\n{mount.log_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"refmount did not mount in time:\n{mount.log_text()}")
            time.sleep(0.02)
        yield mount
    finally:
        unmount(mountpoint)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
            raise
