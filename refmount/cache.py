"""A byte-budgeted least-recently-used cache of fetched target ranges."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CacheStatistics:
    """A snapshot of the cache's counters."""

    entries: int
    bytes: int
    budget: int
    hits: int
    misses: int
    evictions: int


class ByteCache:
    """Keeps recently used byte strings while their total length stays within ``budget``.

    Not thread-safe: it is owned by the event loop's thread (see docs/concurrency.md).
    A value larger than the whole budget is not kept at all.
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    @property
    def budget(self) -> int:
        """Return the byte budget."""
        return self._budget

    @property
    def size(self) -> int:
        """Return how many bytes are cached now."""
        return self._bytes

    def __contains__(self, key: object) -> bool:
        """Return True if ``key`` is cached, without counting a hit or a miss."""
        return key in self._entries

    def get(self, key: Hashable) -> bytes | None:
        """Return the cached value and mark it recently used, or None."""
        value = self._entries.get(key)
        if value is None:
            self._misses += 1
            return None
        self._entries.move_to_end(key)
        self._hits += 1
        return value

    def put(self, key: Hashable, value: bytes, reserve: int = 0) -> None:
        """Store ``value``, evicting the least recently used entries to stay in budget.

        ``reserve`` bytes are kept free in addition (data being fetched right now).
        """
        self.discard(key)
        if len(value) > self._budget:
            return
        self._entries[key] = value
        self._bytes += len(value)
        self.shrink(reserve)

    def shrink(self, reserve: int = 0) -> None:
        """Evict least recently used entries until ``reserve`` more bytes would fit."""
        while self._entries and self._bytes + reserve > self._budget:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= len(evicted)
            self._evictions += 1

    def discard(self, key: Hashable) -> None:
        """Drop one entry if present."""
        value = self._entries.pop(key, None)
        if value is not None:
            self._bytes -= len(value)

    def statistics(self) -> CacheStatistics:
        """Return the current counters."""
        return CacheStatistics(
            len(self._entries),
            self._bytes,
            self._budget,
            self._hits,
            self._misses,
            self._evictions,
        )
