"""Where a mount may go: what is mounted on a path already (``/proc/self/mountinfo``), and
the checks that refuse a FUSE mountpoint or, without ``-o nonempty``, a directory with
entries."""

from __future__ import annotations

import errno
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from refmount.errors import MountError

log = logging.getLogger("refmount.daemon")
"""One logger for the daemon's lines, whichever module says them (``refmount.daemon:``)."""


MOUNTINFO = Path("/proc/self/mountinfo")
"""The kernel's list of the mounts this process sees, one per line, in mount order."""

NONEMPTY_OPTION = "nonempty"
"""``-o nonempty``: mount over a directory that has entries (libfuse 3 no longer knows it)."""


@dataclass(frozen=True, slots=True)
class MountEntry:
    """One line of ``/proc/self/mountinfo``: where, what type and from what."""

    mountpoint: str
    fstype: str
    source: str

    @property
    def is_fuse(self) -> bool:
        """Return True for a FUSE filesystem (``fuse``, ``fuseblk``, ``fuse.NAME``)."""
        return self.fstype in ("fuse", "fuseblk") or self.fstype.startswith("fuse.")


def _unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (``\\040`` for a space, and tab, newline, backslash)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def mounts_on(path: Path, mountinfo: Path = MOUNTINFO) -> list[MountEntry]:
    """Return the mounts whose mountpoint is ``path`` (resolved), oldest first."""
    wanted = os.path.realpath(path)
    found: list[MountEntry] = []
    try:
        text = mountinfo.read_text(errors="replace")
    except OSError:  # no /proc: nothing to learn, the kernel still refuses what it must
        return found
    for line in text.splitlines():
        fields = line.split(" ")
        if " - " not in line or len(fields) < 5:
            continue
        tail = line.split(" - ", 1)[1].split(" ")
        if _unescape(fields[4]) == wanted and len(tail) >= 2:
            found.append(MountEntry(wanted, _unescape(tail[0]), _unescape(tail[1])))
    return found


def check_mountpoint(mountpoint: Path, nonempty: bool = False, mountinfo: Path = MOUNTINFO) -> None:
    """Raise ``MountError`` with advice if ``mountpoint`` cannot be mounted on.

    Refused: a missing path or not a directory; a stale FUSE mount; a directory on which a
    FUSE filesystem is mounted already (a second mount would stack on it); and, unless
    ``nonempty``, a directory with entries, which the mount would hide. Other mounts there
    are fine: an automount point (autofs, always empty) or a bind mount.
    """
    try:
        os.statvfs(mountpoint)  # unlike stat, never answered from the kernel's caches
    except FileNotFoundError:
        raise MountError(f"mountpoint {mountpoint} does not exist") from None
    except OSError as error:
        if error.errno == errno.ENOTCONN:
            raise MountError(
                f"mountpoint {mountpoint} is a stale FUSE mount (Transport endpoint is not "
                f"connected): its daemon died without unmounting. Clear it with "
                f"'fusermount3 -u {mountpoint}' (or 'umount -l {mountpoint}' as root), "
                f"or mount with -o auto_unmount to have this done automatically."
            ) from None
        raise MountError(f"mountpoint {mountpoint}: {error.strerror}") from None
    if not os.path.isdir(mountpoint):
        raise MountError(f"mountpoint {mountpoint} is not a directory")
    mounts = mounts_on(mountpoint, mountinfo)
    fuse = [entry for entry in mounts if entry.is_fuse]
    if fuse:
        raise MountError(
            f"mountpoint {mountpoint} already has a FUSE filesystem mounted on it "
            f"({fuse[-1].fstype} from {fuse[-1].source}); unmount it first with "
            f"'fusermount3 -u {mountpoint}'"
        )
    automount = bool(mounts) and mounts[-1].fstype == "autofs"
    if not nonempty and not automount and _has_entries(mountpoint):
        raise MountError(
            f"mountpoint {mountpoint} is not empty: the mount would hide its files; "
            f"give -o {NONEMPTY_OPTION} to mount over them anyway"
        )


def _has_entries(directory: Path) -> bool:
    try:
        with os.scandir(directory) as entries:
            return next(entries, None) is not None
    except OSError as error:
        raise MountError(f"mountpoint {directory}: {error.strerror}") from None
