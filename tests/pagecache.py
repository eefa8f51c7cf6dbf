"""Helpers for tests that depend on the page cache: synced files, dropped pages, nowait reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from refmount.store.local_files import NOWAIT


def write_synced(path: Path, data: bytes) -> str:
    """Write ``data`` to ``path`` and flush it to disk, so its pages can be dropped."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return str(path)


def skip_unless_nowait(directory: Path) -> None:
    """Skip the test unless ``directory``'s filesystem answers ``RWF_NOWAIT`` reads."""
    if not NOWAIT:
        pytest.skip("this system has no RWF_NOWAIT")
    fd = os.open(write_synced(directory / ".nowait-probe", b"x"), os.O_RDONLY)
    try:
        os.preadv(fd, [bytearray(1)], 0, NOWAIT)
    except BlockingIOError:
        pass
    except OSError as error:
        pytest.skip(f"this filesystem refuses RWF_NOWAIT reads: {error}")
    finally:
        os.close(fd)


def drop_from_page_cache(path: str) -> None:
    """Ask the kernel to drop the clean cached pages of ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
