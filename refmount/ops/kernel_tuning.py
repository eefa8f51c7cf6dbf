"""Kernel-side tuning of a FUSE connection through sysfs (and the fusectl mount it needs)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from pathlib import Path

SYSFS = Path("/sys")

DEFAULT_READ_AHEAD_KB = 16384
"""The readahead asked for by ``tune_kernel``: the kernel then sends 1 MiB READs, many at once."""


@dataclass(frozen=True, slots=True)
class KernelTuning:
    """The values written as root (by default, or ``-o tune_kernel``): the BDI readahead and
    the background request limits.

    ``congestion_threshold`` should stay below ``max_background`` (the kernel stops issuing
    readahead once that many background requests are queued); ¾ of it is the kernel's ratio.
    ``asked`` is True when the command line asked for it (``--tune-kernel``,
    ``--tune-read-ahead``): only then is missing root or a missing knob worth a warning.
    """

    read_ahead_kb: int = DEFAULT_READ_AHEAD_KB
    max_background: int = 64
    congestion_threshold: int = 48
    asked: bool = False


@dataclass(frozen=True, slots=True)
class Knob:
    """One sysfs value of a FUSE connection, before and after tuning."""

    name: str
    path: Path
    before: int
    after: int


class TuningError(Exception):
    """A knob could not be read or written; the message says which and why."""


def knob_paths(device: int, sysfs: Path = SYSFS) -> dict[str, Path]:
    """Return the sysfs files of the FUSE connection whose mount has device number ``device``.

    The control directory is named by the connection's device number (the minor, as FUSE
    mounts have major 0) and the backing device by ``major:minor``.
    """
    major, minor = os.major(device), os.minor(device)
    connection = sysfs / "fs" / "fuse" / "connections" / str(os.makedev(major, minor))
    return {
        "read_ahead_kb": sysfs / "class" / "bdi" / f"{major}:{minor}" / "read_ahead_kb",
        "max_background": connection / "max_background",
        "congestion_threshold": connection / "congestion_threshold",
    }


FUSECTL_HINT = "is the fusectl filesystem mounted? mount -t fusectl none /sys/fs/fuse/connections"


def ensure_fusectl(sysfs: Path = SYSFS) -> bool:
    """Mount the fusectl filesystem on ``sysfs/fs/fuse/connections`` if it is missing.

    Returns True when it was mounted here. The directory exists once the fuse module is
    loaded; it is left alone when it is already a mount point or holds anything (a fake
    tree, or fusectl already there). Containers and machines without systemd lack it.
    Needs root; raises ``TuningError`` when the mount fails.
    """
    connections = sysfs / "fs" / "fuse" / "connections"
    if not connections.is_dir() or os.path.ismount(connections) or any(connections.iterdir()):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    target = os.fsencode(connections)
    if libc.mount(b"fusectl", target, b"fusectl", ctypes.c_ulong(0), None) != 0:
        code = ctypes.get_errno()
        if code == 16:  # EBUSY: mounted meanwhile by another mount's daemon
            return False
        raise TuningError(f"cannot mount fusectl on {connections}: {os.strerror(code)}")
    return True


def _read(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except FileNotFoundError:
        hint = ""
        connections = path.parent.parent
        if connections.name == "connections" and not any(connections.glob("*")):
            hint = f" ({FUSECTL_HINT})"
        raise TuningError(f"{path} does not exist{hint}") from None
    except (OSError, ValueError) as error:
        raise TuningError(f"cannot read {path}: {error}") from None


def _write(path: Path, value: int) -> None:
    try:
        path.write_text(f"{value}\n")
    except PermissionError:
        raise TuningError(f"cannot write {path}: permission denied (root only)") from None
    except OSError as error:
        raise TuningError(f"cannot write {path}: {error.strerror or error}") from None


def tune_connection(device: int, tuning: KernelTuning, sysfs: Path = SYSFS) -> list[Knob]:
    """Set the knobs of the FUSE connection of ``device``; return them before and after.

    Every file is read first, so a missing one changes nothing. ``max_background`` is written
    before ``congestion_threshold``, which should not exceed it. Raises ``TuningError``.
    """
    paths = knob_paths(device, sysfs)
    wanted = {
        "max_background": tuning.max_background,
        "congestion_threshold": tuning.congestion_threshold,
        "read_ahead_kb": tuning.read_ahead_kb,
    }
    before = {name: _read(paths[name]) for name in wanted}
    for name, value in wanted.items():
        if before[name] != value:
            _write(paths[name], value)
    return [Knob(name, paths[name], before[name], _read(paths[name])) for name in wanted]


def describe(knobs: list[Knob]) -> str:
    """Return ``name before → after`` for each knob, comma-separated, for the log."""
    return ", ".join(f"{knob.name} {knob.before} → {knob.after}" for knob in knobs)
