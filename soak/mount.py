"""The mount: the real ``refmount`` command in the foreground in a child process, waited for
until it answers, always unmounted and reaped afterwards (by its PID only)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from soak.arguments import Settings
from tests.support.mounting import is_mounted

MOUNT_TIMEOUT = 60.0
EXIT_TIMEOUT = 30.0
"""How long the daemon may take to exit after the unmount before it gets SIGTERM."""
TERM_TIMEOUT = 10.0
"""How long it may take to exit after SIGTERM before it gets SIGKILL."""


def refmount_command(
    settings: Settings, options: list[str], refs: Path, mountpoint: Path
) -> list[str]:
    """``refmount -f`` with the soak's cache, timeout, retries and fetcher, and ``options``."""
    return [
        sys.executable,
        "-m",
        "refmount",
        "-f",
        "--log-level",
        "info",
        "--cache-size",
        settings.cache_size,
        "--timeout",
        settings.timeout,
        "--retries",
        str(settings.retries),
        "--fetcher",
        settings.fetcher,
        *options,
        str(refs),
        str(mountpoint),
    ]


@contextlib.contextmanager
def mounted(command: list[str], mountpoint: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``refmount -f`` until it answers; always unmount and reap it (by its PID only).

    Raise RuntimeError when it exits or does not mount within ``MOUNT_TIMEOUT``.
    """
    mountpoint.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(mountpoint):
            if process.poll() is not None:
                raise RuntimeError(f"refmount exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"refmount did not mount within {MOUNT_TIMEOUT:g} s")
            time.sleep(0.02)
        os.stat(mountpoint)
        yield process
    finally:
        unmount(mountpoint)
        reap(process)


def unmount(mountpoint: Path) -> None:
    """Unmount, lazily when the mount is busy."""
    if is_mounted(mountpoint):
        result = subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
        if result.returncode != 0:
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)


def reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the daemon to exit; SIGTERM it, then SIGKILL it, if it does not."""
    try:
        process.wait(timeout=EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=TERM_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
