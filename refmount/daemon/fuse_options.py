"""The options handed to libfuse: refmount's defaults with the user's, and each checked by
libfuse's own parser before anything is mounted."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import tempfile
from collections.abc import Iterable

from refmount.config import MountConfig

log = logging.getLogger("refmount.daemon")
"""One logger for the daemon's lines, whichever module says them (``refmount.daemon:``)."""


DEFAULT_FUSE_OPTIONS = ("fsname=refmount", "subtype=refmount", "ro", "default_permissions")

OVERRIDDEN_FUSE_OPTIONS = frozenset({"rw"})
"""Options that contradict a default and are dropped: the mount is always read-only."""


def fuse_options(config: MountConfig) -> set[str]:
    """Return the FUSE mount options: refmount's defaults plus the user's."""
    options = set(DEFAULT_FUSE_OPTIONS)
    options.update(config.fuse_options)
    return options - OVERRIDDEN_FUSE_OPTIONS


class _FuseArgs(ctypes.Structure):
    """libfuse's ``struct fuse_args``."""

    _fields_ = (
        ("argc", ctypes.c_int),
        ("argv", ctypes.POINTER(ctypes.c_char_p)),
        ("allocated", ctypes.c_int),
    )


def fuse_options_problem(options: Iterable[str]) -> str | None:
    """Return what libfuse says against ``options``, or None when it accepts them.

    Asked the way ``pyfuse3.init`` will ask it (``fuse_session_new`` with one ``-o`` per
    option, ASCII only), without mounting: so an unknown or malformed FUSE option stops the
    command before the set is read. None too when libfuse cannot be loaded here.
    """
    encoded: list[bytes] = []
    for option in sorted(options):
        if not option.isascii():
            return f"not ASCII: {option}"
        encoded.append(option.encode("ascii"))
    name = ctypes.util.find_library("fuse3")
    if name is None:
        return None
    library = ctypes.CDLL(name)
    library.fuse_session_new.restype = ctypes.c_void_p
    library.fuse_session_new.argtypes = (
        ctypes.POINTER(_FuseArgs),
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
    )
    library.fuse_session_destroy.argtypes = (ctypes.c_void_p,)
    library.fuse_opt_free_args.argtypes = (ctypes.POINTER(_FuseArgs),)
    words = [b"refmount", *(word for option in encoded for word in (b"-o", option))]
    argv = (ctypes.c_char_p * (len(words) + 1))(*words, None)
    args = _FuseArgs(len(words), argv, 0)
    no_operations = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_void_p))
    with tempfile.TemporaryFile() as said:  # libfuse complains on stderr: keep its words
        saved = os.dup(2)
        try:
            os.dup2(said.fileno(), 2)
            session = library.fuse_session_new(
                ctypes.byref(args), no_operations, len(no_operations), None
            )
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        said.seek(0)
        complaint = said.read(4096).decode(errors="replace")
    library.fuse_opt_free_args(ctypes.byref(args))
    if session:
        library.fuse_session_destroy(session)
        return None
    lines = [line.strip() for line in complaint.splitlines() if line.startswith("fuse:")]
    return "; ".join(line.removeprefix("fuse: ") for line in lines) or "libfuse refuses them"
