"""The disk cache (``--cache-dir``): fetched ranges kept on local disk, shared by every mount
of the host that names the same directory, surviving unmounts, restarts and crashes.

An entry is one target *version* (``disk_entry``): the key hashes the URL with its pinned
version, so a changed target is another entry and is never served from the old one. A read
is cut into 64 KiB pieces; cached pieces are read (and checked) from disk, the runs of
missing ones are fetched, each as one range, and written to disk before the read returns
(into the page cache: nothing waits for the disk itself). Anything wrong with the cache (a
full disk, a read-only or vanished directory, a file put there by someone else) costs one
warning a minute and a read from the network: the cache can only save requests, never fail
a read that the network would answer.

The directory holds only the entries' files. It is created ``0700``, must belong to the
user who mounts and be closed to others: a directory shared with another user is refused.
Eviction keeps it under its size: once a hundredth of the size has been written, the least
recently used entries (by their log's mtime, touched at use) are removed, in the
background, until nine tenths of the size are left. A mount using an entry another mount
removed notices at its next write and starts a new one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from refmount.lru import LRU
from refmount.store.disk_entry import PIECE, DiskEntry, EntryGone, pieces_of

log = logging.getLogger(__name__)

DEFAULT_MAX_SIZE = 10 * 1024**3
"""The default bound: the smaller of this and a tenth of the free space."""

OPEN_ENTRIES = 64
"""How many entries are kept open (two descriptors each)."""

MAX_RUNS = 8
"""A read missing more runs of pieces than this fetches its whole span in one range."""

WARN_EVERY = 60.0
"""Seconds between two warnings about the cache not working."""

TOUCH_EVERY = 60.0
"""Seconds between two touches of an entry in use (its recency, for eviction)."""

T = TypeVar("T")

Fetch = Callable[[int, int], Awaitable[bytes | memoryview]]
"""Reads bytes ``[start, end)`` of the target from the network."""


@dataclass(frozen=True, slots=True)
class DiskStatistics:
    """What the disk cache did: reads served wholly from disk, reads that fetched, bytes read
    from disk and written to it, entries evicted, and failures (each served from the network)."""

    hits: int = 0
    misses: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    evictions: int = 0
    errors: int = 0


def default_size(directory: str) -> int:
    """Return the default bound of a cache in ``directory``: 10 GiB or a tenth of the free
    space, whichever is smaller."""
    free = shutil.disk_usage(directory).free
    return max(PIECE, min(DEFAULT_MAX_SIZE, free // 10))


def open_directory(path: str, *, create: bool = True) -> int:
    """Create the cache directory ``0700`` if missing (``create``); return a descriptor of it.

    Raises ``OSError`` (with a message to show) for a directory that is not one, does not
    belong to this user or is open to others: a shared cache would let another user's
    mount serve bytes to this one's readers, or read them.
    """
    if create:
        os.makedirs(path, mode=0o700, exist_ok=True)
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    status = os.fstat(descriptor)
    problem = None
    if status.st_uid != os.geteuid():
        problem = f"it belongs to uid {status.st_uid}, not to the user mounting ({os.geteuid()})"
    elif status.st_mode & 0o077:
        problem = f"others may use it (mode {stat.S_IMODE(status.st_mode):o}; chmod 700 it)"
    if problem is not None:
        os.close(descriptor)
        raise OSError(f"cache directory {path}: {problem}")
    return descriptor


class DiskCache:
    """Fetched ranges on disk, for every mount naming the same directory (see the module)."""

    def __init__(
        self,
        path: str,
        max_size: int,
        limiter: trio.CapacityLimiter,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.max_size = max_size
        self._directory = open_directory(path)
        self._limiter = limiter
        self._clock = clock
        self._entries: LRU[str, DiskEntry] = LRU(OPEN_ENTRIES)
        self._touched: dict[str, float] = {}
        self._written_since_sweep = 0
        self._sweeping = False
        self._warned = -WARN_EVERY
        self._hits = self._misses = self._bytes_read = self._bytes_written = 0
        self._evictions = self._errors = 0

    def statistics(self) -> DiskStatistics:
        """Return the cache's counters."""
        return DiskStatistics(
            self._hits,
            self._misses,
            self._bytes_read,
            self._bytes_written,
            self._evictions,
            self._errors,
        )

    def close(self) -> None:
        """Close every entry and the directory (once the event loop has stopped)."""
        for key, entry in self._entries.items():
            self._entries.pop(key)
            entry.close()
        if self._directory >= 0:
            os.close(self._directory)
            self._directory = -1

    async def read(
        self, url: str, version: str, size: int, start: int, end: int, fetch: Fetch
    ) -> bytes | memoryview:
        """Return bytes ``[start, end)`` of version ``version`` (``size`` bytes) of ``url``:
        cached pieces from disk, missing ones fetched with ``fetch`` and kept."""
        end = min(end, size)
        if end <= start:
            return b""
        try:
            entry = await self._entry(url, version, size)
        except OSError as error:
            self._failed(f"cannot open the entry of {url}", error)
            return await fetch(start, end)
        first, last = pieces_of(start, end)
        try:
            found = await self._from_disk(entry, first, last)
        except OSError as error:
            await self._forget(entry, error, url)
            return await fetch(start, end)
        if found is not None:
            self._hits += 1
            self._bytes_read += len(found)
            return memoryview(found)[start - first * PIECE : end - first * PIECE]
        self._misses += 1
        return await self._fill(entry, url, first, last, start, end, fetch)

    async def _from_disk(self, entry: DiskEntry, first: int, last: int) -> bytes | None:
        """Return pieces ``first..last`` from disk if every one is there and sound."""
        if entry.missing(first, last):
            await self._thread(entry.refresh)  # another mount may have written them
            if entry.missing(first, last):
                return None
        data, bad = await self._thread(lambda: entry.read(first, last + 1))
        if bad:
            self._failed(
                f"{len(bad)} cached pieces of {entry.key} failed their checksum",
                OSError("fetched again"),
            )
            return None
        self._touch(entry)
        return data

    async def _fill(
        self,
        entry: DiskEntry,
        url: str,
        first: int,
        last: int,
        start: int,
        end: int,
        fetch: Fetch,
    ) -> bytes | memoryview:
        """Fetch the missing runs of pieces ``first..last``, keep them, and return
        ``[start, end)`` assembled from them and the pieces on disk."""
        runs = entry.missing(first, last)
        if len(runs) > MAX_RUNS or not runs:
            runs = [(first, last + 1)]
        span_start = first * PIECE
        whole = runs == [(first, last + 1)]  # the span is one fetch: served as it came
        span = bytearray(0 if whole else min((last + 1) * PIECE, entry.size) - span_start)
        fetched: list[tuple[int, bytes | memoryview]] = []
        for run_first, run_stop in runs:
            run_start, run_end = run_first * PIECE, min(run_stop * PIECE, entry.size)
            data = await fetch(run_start, run_end)
            if len(data) != run_end - run_start:  # not the pinned size: keep nothing
                return await fetch(start, end)
            if not whole:
                span[run_start - span_start : run_end - span_start] = data
            fetched.append((run_first, data))
        cached = _between(first, last + 1, runs)
        try:
            for run_first, run_stop in cached:
                data, bad = await self._thread(functools.partial(entry.read, run_first, run_stop))
                if bad:
                    return await fetch(start, end)
                at = run_first * PIECE - span_start
                span[at : at + len(data)] = data
                self._bytes_read += len(data)
            for run_first, data in fetched:
                written = await self._thread(functools.partial(entry.write, run_first, data))
                self._bytes_written += written
                self._written_since_sweep += written
        except OSError as error:
            await self._forget(entry, error, url)
        self._touch(entry)
        self._maybe_sweep()
        served = memoryview(fetched[0][1] if whole else span)
        return served[start - span_start : end - span_start]

    async def _entry(self, url: str, version: str, size: int) -> DiskEntry:
        """Return the open entry of ``url`` at ``version``, opening it (in a thread) if need be."""
        digest = hashlib.sha256(f"{url}\0{version}\0{size}".encode()).digest()
        key = digest.hex()[:40]
        entry = self._entries.get(key)
        if entry is None:
            entry = await self._thread(lambda: DiskEntry(self._directory, key, digest, size))
            for evicted in self._entries.put(key, entry):
                await self._drop(evicted)
        return entry

    async def _drop(self, entry: DiskEntry) -> None:
        """Close an entry no longer kept open (in a thread: it waits for its users)."""
        self._touched.pop(entry.key, None)
        await self._thread(entry.close)

    async def _forget(self, entry: DiskEntry, error: OSError, url: str) -> None:
        """Drop an entry that failed (it is opened afresh next time); count and maybe warn."""
        if self._entries.peek(entry.key) is entry:
            self._entries.pop(entry.key)
            await self._drop(entry)
        if not isinstance(error, EntryGone):
            self._failed(f"cannot use the cached ranges of {url}", error)

    def _failed(self, what: str, error: OSError) -> None:
        self._errors += 1
        now = self._clock()
        if now - self._warned >= WARN_EVERY:
            self._warned = now
            log.warning(
                "disk cache %s: %s: %s; reading from the network (said once a minute)",
                self.path,
                what,
                error.strerror or error,
            )

    def _touch(self, entry: DiskEntry) -> None:
        """Mark ``entry`` used (its log's mtime), at most once a minute."""
        now = self._clock()
        if now - self._touched.get(entry.key, -TOUCH_EVERY) < TOUCH_EVERY:
            return
        self._touched[entry.key] = now
        try:
            os.utime(f"{entry.key}.log", dir_fd=self._directory, follow_symlinks=False)
        except OSError as error:
            self._failed("cannot mark an entry used", error)

    def _maybe_sweep(self) -> None:
        """Start a sweep in the background once a hundredth of the size was written."""
        if self._sweeping or self._written_since_sweep < self.max_size // 100:
            return
        self._sweeping = True
        self._written_since_sweep = 0
        trio.lowlevel.spawn_system_task(self._sweep)

    async def _sweep(self) -> None:
        """Keep the directory under its size (a system task: it must never raise)."""
        try:
            removed = await self._thread(lambda: sweep(self._directory, self.max_size))
        except OSError as error:
            self._failed("cannot keep the directory under its size", error)
            removed = []
        except Exception as error:  # noqa: BLE001 - a system task that raises ends the mount
            self._failed("cannot keep the directory under its size", OSError(str(error)))
            removed = []
        finally:
            self._sweeping = False
        self._evictions += len(removed)
        for key in removed:
            entry = self._entries.pop(key)
            if entry is not None:
                await self._drop(entry)

    async def _thread(self, job: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(job, limiter=self._limiter)


def sweep(directory: int, max_size: int) -> list[str]:
    """Remove the least recently used entries of the cache directory until nine tenths of
    ``max_size`` are left (or nothing is over); return the keys removed (blocking)."""
    entries: dict[str, list[float]] = {}  # key → [bytes on disk, last use]
    for name in os.listdir(directory):
        key, dot, suffix = name.rpartition(".")
        if not dot or suffix not in ("data", "log"):
            continue
        try:
            status = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed meanwhile by another mount
        found = entries.setdefault(key, [0.0, 0.0])
        found[0] += status.st_blocks * 512
        if suffix == "log":
            found[1] = status.st_mtime
    total = sum(size for size, _ in entries.values())
    if total <= max_size:
        return []
    removed: list[str] = []
    for key, (size, _) in sorted(entries.items(), key=lambda item: item[1][1]):
        if total <= max_size * 9 // 10:
            break
        for suffix in ("log", "data"):
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another mount
                os.unlink(f"{key}.{suffix}", dir_fd=directory)
        total -= size
        removed.append(key)
    return removed


def clear(directory: int) -> tuple[int, int]:
    """Remove every entry of the cache directory; return how many and the bytes they held
    (blocking). Mounts using one keep reading its open files, and start anew at a write."""
    removed: set[str] = set()
    freed = 0
    for name in os.listdir(directory):
        key, dot, suffix = name.rpartition(".")
        if not dot or suffix not in ("data", "log"):
            continue
        try:
            freed += os.stat(name, dir_fd=directory, follow_symlinks=False).st_blocks * 512
            os.unlink(name, dir_fd=directory)
        except FileNotFoundError:
            continue  # removed meanwhile by another mount
        removed.add(key)
    return len(removed), freed


def _between(first: int, stop: int, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return the runs of ``[first, stop)`` that ``runs`` (sorted, disjoint) leave out."""
    gaps: list[tuple[int, int]] = []
    at = first
    for run_first, run_stop in runs:
        if run_first > at:
            gaps.append((at, run_first))
        at = max(at, run_stop)
    if at < stop:
        gaps.append((at, stop))
    return gaps
