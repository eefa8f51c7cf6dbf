"""A byte-budgeted least-recently-used cache of fetched target ranges."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

Data = bytes | memoryview
"""A cached value: bytes, or a read-only view of a part of bytes that other values share."""


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
    """Keeps recently used byte strings while the memory they hold stays within ``budget``.

    A value may be a ``memoryview`` of a larger ``bytes`` object that other values share
    (one request's answer split into entries). Such an object is counted once, whole, from
    the arrival of its first entry to the departure of its last: what counts is the memory
    the cache keeps alive, not the bytes it can hand out. Evicting one of its entries frees
    nothing while the others stay, so eviction goes on until memory is actually freed.

    Not thread-safe: it is owned by the event loop's thread (see docs/concurrency.md).
    A value whose memory is larger than the whole budget is not kept at all.
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._entries: OrderedDict[Hashable, Data] = OrderedDict()
        self._shared: dict[int, list[int]] = {}
        """``id`` of a buffer that views are cached of → [views cached, its length]."""
        self._bytes = 0
        self._in_flight = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    @property
    def budget(self) -> int:
        """Return the byte budget."""
        return self._budget

    @property
    def size(self) -> int:
        """Return how many bytes the cached values keep in memory now."""
        return self._bytes

    @property
    def in_flight(self) -> int:
        """Return the bytes reserved for data being fetched, not yet in the cache."""
        return self._in_flight

    def reserve(self, length: int) -> None:
        """Reserve ``length`` bytes for data being fetched, evicting to make room for them:
        cached plus reserved bytes stay within the budget."""
        self._in_flight += length
        self.shrink(self._in_flight)

    def release(self, length: int) -> None:
        """Give back a reservation (the data arrived, or its fetch ended without it)."""
        self._in_flight -= length

    def __contains__(self, key: object) -> bool:
        """Return True if ``key`` is cached, without counting a hit or a miss."""
        return key in self._entries

    def get(self, key: Hashable) -> Data | None:
        """Return the cached value and mark it recently used, or None."""
        value = self._entries.get(key)
        if value is None:
            self._misses += 1
            return None
        self._entries.move_to_end(key)
        self._hits += 1
        return value

    def put(self, key: Hashable, value: Data, reserve: int = 0) -> None:
        """Store ``value``, evicting the least recently used entries to stay in budget.

        ``reserve`` bytes are kept free in addition (data being fetched right now).
        """
        self.discard(key)
        if _memory(value) > self._budget:
            return
        self._entries[key] = value
        self._count(value)
        self.shrink(reserve)

    def shrink(self, reserve: int = 0) -> None:
        """Evict least recently used entries until ``reserve`` more bytes would fit."""
        while self._entries and self._bytes + reserve > self._budget:
            _, evicted = self._entries.popitem(last=False)
            self._uncount(evicted)
            self._evictions += 1

    def discard(self, key: Hashable) -> None:
        """Drop one entry if present."""
        value = self._entries.pop(key, None)
        if value is not None:
            self._uncount(value)

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

    def _count(self, value: Data) -> None:
        if not isinstance(value, memoryview):
            self._bytes += len(value)
            return
        # the views keep their buffer alive, so its id stays its own while it is counted
        shared = self._shared.get(id(value.obj))
        if shared is None:
            length = _memory(value)
            self._shared[id(value.obj)] = [1, length]
            self._bytes += length
        else:
            shared[0] += 1

    def _uncount(self, value: Data) -> None:
        if not isinstance(value, memoryview):
            self._bytes -= len(value)
            return
        shared = self._shared[id(value.obj)]
        shared[0] -= 1
        if shared[0] == 0:
            del self._shared[id(value.obj)]
            self._bytes -= shared[1]


def _memory(value: Data) -> int:
    """Return the bytes ``value`` keeps in memory: a view keeps its whole buffer."""
    if isinstance(value, memoryview):
        return memoryview(value.obj).nbytes
    return len(value)
