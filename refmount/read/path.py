"""What the read path is to the layers around it: the ``Storage`` the reader reads from (the
store, or a fake in tests), the ``ReadPath`` the filesystem reads through (the ``Reader``, or
the decode view over it), and the figures they hand back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from refmount.config import ReadConfig
from refmount.model import Reference


class Storage(Protocol):
    """What the reader needs from a store (``refmount.store.store.Store`` or a test fake)."""

    async def read_range(self, url: str, start: int, end: int) -> bytes | memoryview:
        """Return bytes ``[start, end)`` of ``url``, fewer if the target is shorter."""
        ...

    async def size(self, url: str) -> int:
        """Return the size of the whole target ``url``."""
        ...

    def read_now(self, url: str, start: int, end: int) -> bytes | None:
        """Return ``read_range``'s answer if it is at hand without waiting, else None."""
        ...


@dataclass(frozen=True, slots=True)
class NeighbourPrefetch:
    """What ``Reader.prefetch_neighbours`` (or ``prefetch_objects``) did: the bytes it
    requested, the start of the first span (its position among the references, for
    ``prefetch_objects``) at which another call can do anything (0: at once) and the
    window's scale to ask with next."""

    requested: int
    resume_at: int
    scale: int


@dataclass(frozen=True, slots=True)
class ReaderStatistics:
    """Counters of the read path."""

    reads: int
    bytes_served: int
    fetches: int
    bytes_fetched: int
    cache_hits: int
    retries: int
    errors: int
    prefetches: int = 0
    bytes_prefetched: int = 0
    bytes_cached: int = 0
    prefetch_waits: int = 0


class ReadPath(Protocol):
    """What the filesystem reads through: a ``Reader``, or a view over one (``--decode``)."""

    @property
    def config(self) -> ReadConfig:
        """Return how reads are served."""
        ...

    @property
    def can_prefetch(self) -> bool:
        """Return True when background work can be started."""
        ...

    def spawn(self, job: Callable[[], Awaitable[object]], what: str) -> bool:
        """Run ``job`` in the background."""
        ...

    def prefetch_neighbours(
        self, url: str, spans: Sequence[tuple[int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Fetch the stored bytes of neighbouring references ahead of reads."""
        ...

    def prefetch_objects(
        self, spans: Sequence[tuple[str, int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Fetch the stored bytes of the next references, each an object of its own, ahead."""
        ...

    def statistics(self) -> ReaderStatistics:
        """Return the read path's counters."""
        ...

    def known_size(self, reference: Reference) -> int | None:
        """Return a reference's size if it is known without I/O."""
        ...

    async def size(self, key: str, reference: Reference) -> int:
        """Return the size of file ``key``."""
        ...

    async def read(
        self, key: str, reference: Reference, offset: int, size: int
    ) -> bytes | memoryview:
        """Return up to ``size`` bytes at ``offset`` of file ``key``."""
        ...
