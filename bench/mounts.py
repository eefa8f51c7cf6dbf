"""Mounts run by child processes: refmount and fsspec.fuse (through ``Target``), the pyfuse3
floor (``bench/fuse_floor.py``) and the C floor (``bench/fuse_floor.c``, built here)."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.common import BENCH, MIB
from bench.processes import proc_status, stop_process
from refmount.ops import kernel_tuning
from tests.support.mounting import is_mounted, unmount

FLOOR_SCRIPT = BENCH / "fuse_floor.py"
C_FLOOR_SOURCE = BENCH / "fuse_floor.c"
FUSEPY_DEBIAN = Path("/usr/lib/python3/dist-packages/fusepy.py")
"""Debian's python3-fusepy installs fusepy as ``fusepy``; fsspec imports it as ``fuse``."""

FSSPEC_FUSE_CHILD = """
import json, sys
import fsspec, fsspec.fuse
config = json.loads(sys.argv[1])
fs = fsspec.filesystem("reference", fo=config["refs"], remote_protocol=config["protocol"],
                       remote_options=config["options"])
fsspec.fuse.run(fs, config["root"], config["mountpoint"], foreground=True, threads=True)
"""


@dataclass
class Mount:
    """A mount run by a child process (refmount, fsspec.fuse or a floor)."""

    process: subprocess.Popen[bytes]
    path: Path
    ready_seconds: float
    log: Path

    def rss(self) -> dict[str, float]:
        """VmRSS and VmHWM of the daemon in MiB."""
        return proc_status(self.process.pid)


@contextlib.contextmanager
def mount_child(
    command: list[str], mountpoint: Path, env: dict[str, str] | None = None
) -> Iterator[Mount]:
    """Run a foreground mount command; yield once the mount answers; always unmount."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    log_path = mountpoint.parent / f"{mountpoint.name}.log"
    with open(log_path, "wb") as log_file:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    try:
        deadline = time.monotonic() + 120
        while not is_mounted(mountpoint):
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"exited with {process.returncode}: {tail}")
            if time.monotonic() > deadline:
                raise RuntimeError("did not mount within 120 s")
            time.sleep(0.002)
        os.listdir(mountpoint)  # answered by the daemon
        yield Mount(process, mountpoint, time.perf_counter() - started, log_path)
    finally:
        unmount(mountpoint)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stop_process(process, signal.SIGKILL)
        with contextlib.suppress(OSError):
            mountpoint.rmdir()


_numbers = itertools.count(1)


def fresh_mountpoint(workdir: Path, name: str) -> Path:
    """A mountpoint path under ``workdir/mnt`` that no mount of this run has used."""
    return workdir / "mnt" / f"{name}-{next(_numbers)}"


def unmount_all(workdir: Path) -> None:
    """Unmount whatever is still mounted under ``workdir/mnt`` (after a failure)."""
    mounts = workdir / "mnt"
    for mountpoint in mounts.glob("*") if mounts.exists() else []:
        unmount(mountpoint)


def tune(mountpoint: Path, tuned: bool | None) -> None:
    """Apply ``-o tune_kernel``'s sysfs values to the mount (None: when running as root)."""
    if tuned or (tuned is None and os.geteuid() == 0):
        kernel_tuning.tune_connection(os.stat(mountpoint).st_dev, kernel_tuning.KernelTuning())


@contextlib.contextmanager
def floor_mount(
    workdir: Path, source: Path, tuned: bool | None = None, listed: int = 0
) -> Iterator[Mount]:
    """Mount the pyfuse3 floor serving ``source``'s 1 MiB chunks as ``big/<i>`` (and ``listed``
    4 KiB files as ``many/<i>``); with ``tuned``, apply the kernel tuning ``-o tune_kernel``
    applies (None: as refmount does by default, when the bench runs as root)."""
    mountpoint = fresh_mountpoint(workdir, "floor")
    command = [sys.executable, str(FLOOR_SCRIPT), str(source), str(MIB), str(mountpoint)]
    command += [str(listed)] if listed else []
    with mount_child(command, mountpoint) as mount:
        tune(mountpoint, tuned)
        yield mount


def build_c_floor(workdir: Path) -> Path:
    """Compile ``bench/fuse_floor.c`` against libfuse3 (Debian's ``libfuse3-dev``) into
    ``workdir``; raise ``RuntimeError`` saying why it cannot be built."""
    binary = workdir / "fuse_floor"
    if binary.exists():
        return binary
    try:
        flags = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "fuse3"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        subprocess.run(
            ["cc", "-O2", "-o", str(binary), str(C_FLOOR_SOURCE), *flags],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        raise RuntimeError(f"cannot build the C floor (needs cc, libfuse3-dev): {detail}") from None
    return binary


@contextlib.contextmanager
def c_floor_mount(
    workdir: Path, source: Path, threads: str, tuned: bool | None = None
) -> Iterator[Mount]:
    """Mount the C floor (``single``: one thread, as pyfuse3 answers; ``multi``: libfuse's
    pool) serving ``source``'s 1 MiB chunks as ``big/<i>``; with ``tuned``, the kernel
    tuning refmount applies as root (None: when the bench runs as root, as refmount does)."""
    binary = build_c_floor(workdir)
    mountpoint = fresh_mountpoint(workdir, f"cfloor-{threads}")
    command = [str(binary), str(source), str(MIB), str(mountpoint), threads]
    with mount_child(command, mountpoint) as mount:
        tune(mountpoint, tuned)
        yield mount


def fusepy_shim(workdir: Path) -> str | None:
    """A directory that makes ``import fuse`` find fusepy; None when there is none."""
    if importlib.util.find_spec("fuse") is not None:
        return ""
    if not FUSEPY_DEBIAN.exists():
        return None
    shim = workdir / "fusepy-shim"
    shim.mkdir(exist_ok=True)
    link = shim / "fuse.py"
    if not link.exists():
        link.symlink_to(FUSEPY_DEBIAN)
    return str(shim)
