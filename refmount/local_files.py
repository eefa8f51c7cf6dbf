"""Local target files kept open, read on the event loop when the page cache holds the bytes."""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from dataclasses import dataclass

import trio

MAX_OPEN = 64
"""Local target files kept open at once; the least recently used one is closed first."""

NOWAIT = getattr(os, "RWF_NOWAIT", 0)
"""``preadv`` flag: return what the page cache holds instead of waiting for the disk."""

SCRATCH_SIZE = 4 * 1024 * 1024
"""Reads from the page cache up to this size go through one reused buffer: filling a new
buffer and copying it out costs several times more than the read (fresh pages each time)."""


@dataclass(eq=False)
class _Handle:
    """One open target file and the reads using it."""

    fd: int
    nowait: bool
    """False once the filesystem refused ``RWF_NOWAIT``: every read goes to a thread."""
    users: int = 0
    retired: bool = False
    """Evicted or replaced while in use: the last user closes it."""


class LocalFiles:
    """Reads byte ranges of local files through descriptors kept open between reads.

    A read first asks the page cache, on the event loop's thread, with ``preadv`` and
    ``RWF_NOWAIT``: that never waits for the disk, it answers ``EAGAIN`` or fewer bytes
    instead. Whatever is missing is read in a worker thread, as are opens and every read of
    a filesystem that refuses the flag (network filesystems, tmpfs). Paths are only ever
    looked up in worker threads.

    Owned by the event loop's thread. A descriptor is closed only when no read holds it
    (``users`` is 0), so a worker thread never reads a closed or reused descriptor; for the
    same reason a read in a worker thread is never abandoned: cancelling it waits for the
    system call to return. Closing a read-only descriptor does not wait for the disk, so it
    is done on the event loop's thread.
    """

    def __init__(self, limiter: trio.CapacityLimiter, max_open: int = MAX_OPEN) -> None:
        self._limiter = limiter
        self._max_open = max_open
        self._handles: OrderedDict[str, _Handle] = OrderedDict()
        self._scratch = bytearray()

    @property
    def open_count(self) -> int:
        """Return how many descriptors are kept open (those retired but still read not counted)."""
        return len(self._handles)

    async def read(self, path: str, start: int, end: int) -> tuple[bytes, os.stat_result]:
        """Return bytes ``[start, end)`` of ``path`` (fewer at its end) and its status after.

        The status comes from the open descriptor (``fstat``), so it describes the file the
        bytes came from. Raises ``OSError`` as the system does.
        """
        handle = await self._acquire(path)
        try:
            if handle.nowait:
                found = self._from_page_cache(handle, start, end)
                if found is not None:
                    return found
            return await trio.to_thread.run_sync(
                _read_and_stat, handle.fd, start, end, limiter=self._limiter
            )
        finally:
            self._release(handle)

    def read_now(self, path: str, start: int, end: int) -> tuple[bytes, os.stat_result] | None:
        """Return what ``read`` would, if ``path`` is open and the page cache holds the range.

        Never waits: None means "use ``read``".
        """
        handle = self._handles.get(path)
        if handle is None or not handle.nowait:
            return None
        self._handles.move_to_end(path)
        return self._from_page_cache(handle, start, end)

    def forget(self, path: str) -> None:
        """Close ``path``'s descriptor (once no read holds it); the next read opens it anew."""
        handle = self._handles.pop(path, None)
        if handle is not None:
            self._retire(handle)

    def close(self) -> None:
        """Close every descriptor no read holds; the others close when their reads end."""
        for path in list(self._handles):
            self.forget(path)

    def _from_page_cache(
        self, handle: _Handle, start: int, end: int
    ) -> tuple[bytes, os.stat_result] | None:
        """Return the range if the page cache holds all of it (or all up to the end).

        Larger ranges than ``SCRATCH_SIZE`` are left to a thread (``os.pread`` allocates once).
        """
        wanted = max(end - start, 0)
        if wanted > SCRATCH_SIZE:
            return None
        if len(self._scratch) < wanted:
            self._scratch = bytearray(min(max(wanted, 2 * len(self._scratch)), SCRATCH_SIZE))
        buffer = memoryview(self._scratch)[:wanted]
        try:
            got = os.preadv(handle.fd, [buffer], start, NOWAIT)
        except BlockingIOError:
            return None
        except OSError:
            handle.nowait = False  # EOPNOTSUPP and the like: this filesystem goes to threads
            return None
        status = os.fstat(handle.fd)
        if got < len(buffer) and start + got < status.st_size:
            return None  # only part of it is cached: the thread reads it all
        return bytes(buffer[:got]), status

    async def _acquire(self, path: str) -> _Handle:
        handle = self._handles.get(path)
        if handle is None:
            fd = await trio.to_thread.run_sync(_open, path, limiter=self._limiter)
            handle = self._handles.get(path)  # another read may have opened it meanwhile
            if handle is None:
                handle = self._handles[path] = _Handle(fd, nowait=NOWAIT != 0)
                self._evict()
            else:
                _close(fd)
        self._handles.move_to_end(path)
        handle.users += 1
        return handle

    def _release(self, handle: _Handle) -> None:
        handle.users -= 1
        if handle.retired and handle.users == 0:
            _close(handle.fd)

    def _evict(self) -> None:
        while len(self._handles) > self._max_open:
            _, oldest = self._handles.popitem(last=False)
            self._retire(oldest)

    @staticmethod
    def _retire(handle: _Handle) -> None:
        handle.retired = True
        if handle.users == 0:
            _close(handle.fd)


def _open(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _read_and_stat(fd: int, start: int, end: int) -> tuple[bytes, os.stat_result]:
    pieces: list[bytes] = []
    position = start
    while position < end:
        piece = os.pread(fd, end - position, position)
        if not piece:
            break
        pieces.append(piece)
        position += len(piece)
    data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    return data, os.fstat(fd)
