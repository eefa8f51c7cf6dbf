"""Local target files kept open, read on the event loop when the page cache holds the bytes."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import outcome
import trio

from refmount.lru import LRU

T = TypeVar("T")

log = logging.getLogger(__name__)

MAX_OPEN = 64
"""Local target files kept open at once; the least recently used one is closed first."""

NOWAIT = getattr(os, "RWF_NOWAIT", 0)
"""``preadv`` flag: return what the page cache holds instead of waiting for the disk."""

PER_TARGET_THREADS = 4
"""Worker threads one target file may occupy at once, abandoned ones included: a file whose
reads hang (a dead network filesystem) cannot take the threads other files need."""

MAX_LINKS = 40
"""Symbolic links followed in one path before giving up with ``ELOOP`` (Linux's limit)."""

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

    Only regular files are read: a target is opened with ``O_NONBLOCK`` (a FIFO does not
    wait for a writer) and refused unless the descriptor's ``fstat`` says regular file, so a
    FIFO, socket, device or directory never blocks a read, and a path swapped between a
    check and the open cannot slip through. A target inside ``forbidden`` (the mount's own
    mountpoint) is refused before the open by its real path (``real_path``: nothing inside
    is looked at) and after it by the path of the open descriptor.

    A worker thread may be abandoned: a cancelled call (the reader's deadline, shutdown)
    returns at once while its thread may stay blocked in a system call (a hung network
    filesystem). Such a thread is counted (``abandoned``), no longer counts against the
    shared ``limiter``, but keeps one of its target's ``per_target`` slots until it
    returns: one stuck file can hold at most ``per_target`` threads, and other files still
    get theirs. A descriptor is closed only when no read, abandoned or not, holds it
    (``users`` is 0), so a worker thread never reads a closed or reused descriptor; an
    abandoned open closes what it opened when it returns. Owned by the event loop's thread.
    """

    def __init__(
        self,
        limiter: trio.CapacityLimiter,
        max_open: int = MAX_OPEN,
        *,
        per_target: int = PER_TARGET_THREADS,
        forbidden: Iterable[str] = (),
    ) -> None:
        self._limiter = limiter
        self._per_target = per_target
        self._forbidden = tuple(os.path.realpath(path) for path in forbidden)
        self._handles: LRU[str, _Handle] = LRU(max_open)
        self._slots: dict[str, trio.CapacityLimiter] = {}
        self._abandoned = 0
        self._stuck: dict[str, int] = {}
        """Path → threads abandoned while using it that have not returned yet."""
        self._scratch = bytearray()

    @property
    def open_count(self) -> int:
        """Return how many descriptors are kept open (those retired but still read not counted)."""
        return len(self._handles)

    @property
    def abandoned(self) -> int:
        """Return how many worker threads were given up on and have not returned yet."""
        return self._abandoned

    async def read(self, path: str, start: int, end: int) -> tuple[bytes, os.stat_result]:
        """Return bytes ``[start, end)`` of ``path`` (fewer at its end) and its status after.

        The status comes from the open descriptor (``fstat``), so it describes the file the
        bytes came from. Raises ``OSError`` as the system does (``EINVAL`` for a target
        that is not a regular file or lies inside the mount itself).
        """
        handle = await self._acquire(path)
        if handle.nowait:
            try:
                found = self._from_page_cache(handle, start, end)
            except BaseException:
                self._release(handle)
                raise
            if found is not None:
                self._release(handle)
                return found
        return await self._in_thread(
            path,
            functools.partial(_read_and_stat, handle.fd, start, end),
            done=lambda: self._release(handle),
        )

    async def status(self, path: str) -> os.stat_result:
        """Return the status of the open ``path`` (opened as ``read`` opens it)."""
        handle = await self._acquire(path)
        return await self._in_thread(
            path, functools.partial(os.fstat, handle.fd), done=lambda: self._release(handle)
        )

    async def path_status(self, path: str) -> os.stat_result:
        """Return ``os.stat(path)``: the status of what the path names now."""
        return await self.call(path, functools.partial(os.stat, path))

    async def call(self, path: str, work: Callable[[], T]) -> T:
        """Return ``work()``, run in one of ``path``'s worker threads (abandoned when
        cancelled): for path look-ups that may block as long as a read of ``path``."""
        return await self._in_thread(path, work)

    def read_now(self, path: str, start: int, end: int) -> tuple[bytes, os.stat_result] | None:
        """Return what ``read`` would, if ``path`` is open and the page cache holds the range.

        Never waits: None means "use ``read``".
        """
        handle = self._handles.get(path)
        if handle is None or not handle.nowait:
            return None
        return self._from_page_cache(handle, start, end)

    def forget(self, path: str) -> None:
        """Close ``path``'s descriptor (once no read holds it); the next read opens it anew."""
        handle = self._handles.pop(path)
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
            fd = await self._in_thread(
                path, functools.partial(_open, path, self._forbidden), discard=_close
            )
            handle = self._handles.get(path)  # another read may have opened it meanwhile
            if handle is None:
                handle = _Handle(fd, nowait=NOWAIT != 0)
                for oldest in self._handles.put(path, handle):
                    self._retire(oldest)
            else:
                _close(fd)
        handle.users += 1
        return handle

    async def _in_thread(
        self,
        path: str,
        work: Callable[[], T],
        *,
        done: Callable[[], None] = lambda: None,
        discard: Callable[[T], object] = lambda _: None,
    ) -> T:
        """Run ``work`` in a worker thread, holding a slot of ``path``'s and of the shared
        limiter; ``done`` is called on the loop's thread once ``work`` has returned.

        Cancelled while ``work`` runs: raises at once and abandons the thread, which keeps
        its target slot (and calls ``done``, then ``discard`` with its result) when it
        returns. ``done`` is also called if the call is cancelled before ``work`` starts.
        """
        call = _Call[T]()
        slots = self._slots.get(path)
        if slots is None:
            slots = self._slots[path] = trio.CapacityLimiter(self._per_target)
        try:
            await slots.acquire_on_behalf_of(call)
            try:
                await self._limiter.acquire_on_behalf_of(call)
            except BaseException:
                self._free_slot(path, slots, call)
                raise
        except BaseException:
            done()
            raise
        token = trio.lowlevel.current_trio_token()

        def finish(result: outcome.Outcome[T]) -> None:
            call.result = result
            if call.abandoned:
                self._returned(path)
                self._free_slot(path, slots, call)
                done()
                if isinstance(result, outcome.Value):
                    discard(result.value)
            else:
                call.finished.set()

        def deliver(result: outcome.Outcome[T]) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(finish, result)

        trio.lowlevel.start_thread_soon(work, deliver)
        try:
            await call.finished.wait()
        except BaseException:
            self._limiter.release_on_behalf_of(call)
            if call.result is None:  # still running: abandon it
                call.abandoned = True
                self._abandon(path)
                raise
            self._free_slot(path, slots, call)
            done()
            if isinstance(call.result, outcome.Value):
                discard(call.result.value)
            raise
        self._limiter.release_on_behalf_of(call)
        self._free_slot(path, slots, call)
        done()
        assert call.result is not None
        return call.result.unwrap()

    def _abandon(self, path: str) -> None:
        self._abandoned += 1
        stuck = self._stuck[path] = self._stuck.get(path, 0) + 1
        if stuck == 1:
            log.warning(
                "%s: a system call on it has not returned: its worker thread is left behind "
                "(%d threads left behind in all)",
                path,
                self._abandoned,
            )

    def _returned(self, path: str) -> None:
        self._abandoned -= 1
        self._stuck[path] -= 1
        if not self._stuck[path]:
            del self._stuck[path]
            log.info("%s: every thread left behind has returned", path)

    def _free_slot(self, path: str, slots: trio.CapacityLimiter, call: object) -> None:
        slots.release_on_behalf_of(call)
        idle = slots.borrowed_tokens == 0 and slots.statistics().tasks_waiting == 0
        if idle and self._slots.get(path) is slots:
            del self._slots[path]

    def _release(self, handle: _Handle) -> None:
        handle.users -= 1
        if handle.retired and handle.users == 0:
            _close(handle.fd)

    @staticmethod
    def _retire(handle: _Handle) -> None:
        handle.retired = True
        if handle.users == 0:
            _close(handle.fd)


@dataclass(eq=False)
class _Call(Generic[T]):
    """One worker-thread call: its result once returned, and whether it was given up on."""

    finished: trio.Event = field(default_factory=trio.Event)
    result: outcome.Outcome[T] | None = None
    abandoned: bool = False


def _open(path: str, forbidden: tuple[str, ...]) -> int:
    """Open ``path`` for reading without blocking; refuse what is not a regular file, and
    what lies inside ``forbidden`` (raises ``OSError`` with ``EINVAL``)."""
    if forbidden:
        real_path(path, forbidden)  # refuses what lies inside, without looking in there
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_kind(mode)})", path)
        if forbidden:  # the file actually opened, whatever was swapped since the check
            _refuse_inside(os.readlink(f"/proc/self/fd/{fd}"), forbidden)
        os.set_blocking(fd, True)
    except BaseException:
        _close(fd)
        raise
    return fd


def real_path(path: str, forbidden: tuple[str, ...] = ()) -> str:
    """Return ``os.path.realpath(path)``; raise ``OSError`` (``EINVAL``) if it lies inside
    one of the real paths ``forbidden``.

    Unlike ``realpath``, nothing inside ``forbidden`` is ever looked at: a path reaching
    into it is refused before the look-up. Looking up a name in a FUSE mount from its own
    daemon, while the kernel waits for that daemon's answer to another request, can block
    until that request ends.
    """
    pending = [part for part in path.split("/") if part not in ("", ".")][::-1]
    resolved = "" if path.startswith("/") else os.getcwd().rstrip("/")
    links = 0
    while pending:
        part = pending.pop()
        if part == "..":
            resolved = os.path.dirname(resolved) if resolved else ""
            resolved = "" if resolved == "/" else resolved
            continue
        candidate = f"{resolved}/{part}"
        _refuse_inside(candidate, forbidden)
        try:
            mode = os.lstat(candidate).st_mode
        except OSError:  # missing, or not a directory: not a link (as realpath takes it)
            mode = 0
        if not stat.S_ISLNK(mode):
            resolved = candidate
            continue
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        target = os.readlink(candidate)
        if target.startswith("/"):
            resolved = ""
        pending.extend(part for part in target.split("/")[::-1] if part not in ("", "."))
    resolved = resolved or "/"
    _refuse_inside(resolved, forbidden)
    return resolved


def _refuse_inside(real: str, forbidden: tuple[str, ...]) -> None:
    for root in forbidden:
        if real == root or real.startswith(root.rstrip("/") + "/"):
            raise OSError(errno.EINVAL, f"inside the mount itself ({root})", real)


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


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
