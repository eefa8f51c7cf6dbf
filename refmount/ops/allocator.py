"""The C allocator's settings: freed heap handed back after loading, reused while serving,
and handed back again whenever the resident set outgrows its bound."""

from __future__ import annotations

import ctypes
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
"""glibc's ``mallopt`` parameter: free memory at the top of a heap above this goes back."""
M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter: blocks at least this large get their own mapping."""

SERVING_MMAP_THRESHOLD = 32 * 1024 * 1024
"""While serving, blocks below this come from the heap: glibc's largest allowed value."""
SERVING_TRIM_THRESHOLD = 64 * 1024 * 1024
"""While serving, up to this much free memory stays at the top of each heap for reuse."""


def trim() -> None:
    """Ask the C library to return freed heap pages to the system (glibc only; else nothing).

    Loading a big reference set frees hundreds of megabytes of small objects; without this,
    much of it stays in the process's resident set.
    """
    malloc_trim = _libc_function("malloc_trim")
    if malloc_trim is None:
        return
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    malloc_trim(0)


def reuse_freed_blocks() -> bool:
    """Keep freed fetch-sized blocks in the heap for the next fetch (glibc only).

    Every fetched chunk is a fresh ``bytes`` of up to a few MiB, built by joining the
    socket's pieces, and most are freed soon after (read through, evicted). glibc maps
    blocks above its threshold on their own and unmaps them on free, and trims a heap's
    free top above twice that threshold: either way the next fetch touches fresh pages,
    one page fault per 4 KiB. Reading 1 MiB chunks in order, that was 190 faults per MiB
    over HTTP and 390 over S3, and a fifth of the daemon's CPU. With both thresholds fixed,
    the freed blocks are reused: 40 and 60 faults per MiB. Returns False where the settings
    cannot be made.
    """
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, SERVING_MMAP_THRESHOLD) == 1)
    done = bool(mallopt(M_TRIM_THRESHOLD, SERVING_TRIM_THRESHOLD) == 1) and done
    if not done:
        log.debug("the C library refused the allocator settings for serving")
    return done


STATM = Path("/proc/self/statm")
"""The kernel's page counts of this process; the second figure is the resident set."""


def resident_bytes(statm: Path = STATM) -> int | None:
    """Return this process's resident set in bytes, or None where the kernel does not say."""
    try:
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class ResidentBound:
    """Hands freed heap pages back to the system whenever the resident set outgrows its bound.

    The daemon's live memory is bounded (the byte budget counts cached and in-flight data),
    but the C allocator keeps freed pages: fetch buffers are allocated in the threads of the
    fetch engines, each with its own heap (arena), and the mix of socket-sized pieces and
    chunk-sized bodies leaves free holes that later allocations do not fit. Under 64 readers
    of faulty servers those holes grew the resident set by some 60 MiB more than live data.

    The bound is the resident set once the mount is ready to fetch (``settle``: the fetch
    engines are imported by then) plus ``headroom``. ``enforce``, called periodically from a
    worker thread (``malloc_trim`` walks every arena), trims every arena when the resident
    set is over it; below it, freed blocks stay for reuse (``reuse_freed_blocks``).
    """

    def __init__(self, headroom: int, statm: Path = STATM) -> None:
        self._headroom = headroom
        self._statm = statm
        self._limit: int | None = None
        self.trims = 0
        """How many times the heap was trimmed."""

    @property
    def limit(self) -> int | None:
        """Return the resident bytes above which the heap is trimmed (None: not settled)."""
        return self._limit

    def settle(self) -> None:
        """Count the bound from the resident set now (nothing is enforced before)."""
        resident = resident_bytes(self._statm)
        if resident is not None:
            self._limit = resident + self._headroom

    def enforce(self) -> bool:
        """Trim the heap if the resident set is over the bound; return True if it was."""
        resident = resident_bytes(self._statm)
        if self._limit is None or resident is None or resident <= self._limit:
            return False
        trim()
        self.trims += 1
        log.debug(
            "resident set of %d MiB over its bound of %d MiB: freed heap pages handed back",
            resident >> 20,
            self._limit >> 20,
        )
        return True


def _libc_function(name: str) -> Any:
    """Return the C library's function ``name``, or None where there is none."""
    try:
        return getattr(ctypes.CDLL(None), name, None)
    except OSError:
        return None
