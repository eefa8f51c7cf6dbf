"""The one count-bounded least-recently-used mapping: every memo, history and handle table of
the daemon that must not grow without bound is one of these.

Byte-bounded caching of fetched data is ``read.cache.ByteCache``, which counts shared buffers
once; everything bounded by a number of entries uses ``LRU``. Not thread-safe: an owner
shared between threads holds its own lock around it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """Up to ``capacity`` entries; adding one more evicts the least recently used.

    ``get`` and ``touch`` make an entry the most recently used; ``peek`` and ``in`` do not.
    ``put`` returns what it evicted, for owners whose values hold resources to release.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an LRU holds at least one entry, not {capacity}")
        self._capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    @property
    def capacity(self) -> int:
        """Return how many entries are kept at most."""
        return self._capacity

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """Iterate over the keys, least recently used first."""
        return iter(self._entries)

    def items(self) -> list[tuple[K, V]]:
        """Return the entries, least recently used first (a copy: safe to change it while
        going through them)."""
        return list(self._entries.items())

    def get(self, key: K) -> V | None:
        """Return the value of ``key`` and make it the most recently used, or None."""
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key]

    def peek(self, key: K) -> V | None:
        """Return the value of ``key`` without changing the order, or None."""
        return self._entries.get(key)

    def touch(self, key: K) -> bool:
        """Make ``key`` the most recently used; return False when it is not kept."""
        if key not in self._entries:
            return False
        self._entries.move_to_end(key)
        return True

    def put(self, key: K, value: V) -> list[V]:
        """Keep ``value`` under ``key`` as the most recently used; return the values evicted
        to stay within capacity (oldest first; never ``value`` itself)."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        evicted: list[V] = []
        while len(self._entries) > self._capacity:
            evicted.append(self._entries.popitem(last=False)[1])
        return evicted

    def pop(self, key: K) -> V | None:
        """Remove ``key`` and return its value, or None when it is not kept."""
        return self._entries.pop(key, None)
