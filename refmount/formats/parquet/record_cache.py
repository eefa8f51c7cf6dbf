"""The LRU of parsed record files, loaded once whoever asks (from worker threads)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from refmount.formats.parquet.records import Record
from refmount.lru import LRU


class _Pending:
    """A record being loaded by one thread while others wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Record | None = None
        self.error: BaseException | None = None


class RecordCache:
    """A thread-safe LRU of parsed records in which each missing record is loaded once.

    Records are loaded in worker threads (and by ``refmount check`` with no event loop), so
    its single-flight waits on ``threading.Event``s; ``refmount.flight`` is trio's.
    """

    def __init__(self, capacity: int, load: Callable[[tuple[int, int]], Record | None]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._entries: LRU[tuple[int, int], Record | None] = LRU(capacity)
        self._pending: dict[tuple[int, int], _Pending] = {}

    def contains(self, key: tuple[int, int]) -> bool:
        """Return True when ``key`` is cached (a loaded record or one known to be missing)."""
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def peek(self, key: tuple[int, int]) -> tuple[bool, Record | None]:
        """Return ``(True, record)`` when ``key`` is cached (record None: missing), else
        ``(False, None)``; never loads."""
        with self._lock:
            if self._entries.touch(key):
                return True, self._entries.peek(key)
            return False, None

    def get(self, key: tuple[int, int]) -> Record | None:
        """Return the record for ``key``, loading it (once, whoever asks) if it is not cached."""
        with self._lock:
            if self._entries.touch(key):
                return self._entries.peek(key)
            pending = self._pending.get(key)
            owner = pending is None
            if pending is None:
                pending = self._pending[key] = _Pending()
        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.value
        try:
            value = self._load(key)
        except BaseException as exc:
            pending.error = exc
            with self._lock:
                del self._pending[key]
            pending.done.set()
            raise
        pending.value = value
        with self._lock:
            del self._pending[key]
            self._entries.put(key, value)
        pending.done.set()
        return value
