"""Turns reads of references into bytes: fetches, prefetch, single-flight and the byte budget."""

from __future__ import annotations

import contextlib
import functools
import logging
import random
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TypeVar

import trio

from refmount.config import ReadConfig, RetryConfig
from refmount.errors import (
    RecentFailureError,
    ShortReadError,
    TargetError,
    TargetReadError,
)
from refmount.flight import SingleFlight
from refmount.lru import LRU
from refmount.model import Inline, Range, Reference, Whole, reference_length
from refmount.read.cache import ByteCache, Data
from refmount.read.failures import FAILED_RANGE_SECONDS, FAILED_RANGES, RecentFailures
from refmount.read.path import NeighbourPrefetch, ReaderStatistics, Storage
from refmount.read.prefetch import Prefetcher
from refmount.read.retry import Retrier

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_BYTES_READ = 64 * 1024
"""A read of at most this many bytes at the start of a cold entry is fetched on its own..."""
FIRST_BYTES_ENTRY = 256 * 1024
"""...when the entry is at least this large: below it, fetching it whole costs about as much."""

PARTLY_SERVED = 4096
"""How many cached entries served in part the reader follows (the least recently served go)."""


class Reader:
    """Serves reads of references; owns the byte cache and the in-flight requests.

    A reference of up to ``whole_fetch_limit`` bytes is fetched whole by its first read and
    later reads are sliced from memory. Larger references are fetched in aligned blocks of
    ``block_size``. Once every byte of such an entry (or block) was served, it leaves the
    cache: the kernel's page cache holds those bytes and answers the next reads of them.
    Every fetch must return exactly the bytes asked for: a shorter answer is retried and then
    a ``ShortReadError``, never padded; a longer one means the server ignored the range.
    Each request is bounded by ``retry.timeout`` and retried as ``retry`` says; a range
    whose read failed fails again at once for ``FAILED_RANGE_SECONDS`` (``RecentFailures``),
    so the kernel's second ask after a failed readahead costs no second round. A read the
    target can answer at once (``read_now``) skips all of that and the cache. Runs on the
    event loop thread only.

    Prefetch runs in the background only inside ``running()``: blocks
    ahead of a sequential read of a large reference, and neighbour spans that the filesystem
    asks for (``prefetch_neighbours``). Prefetched data lands in the cache under the key the
    normal path uses; its requests are single-flight entries too, so a read of data being
    prefetched waits for it. A prefetch failure is logged at debug and never reaches a read:
    the waiting read makes its own request.
    """

    def __init__(
        self,
        storage: Storage,
        config: ReadConfig,
        retry: RetryConfig | None = None,
        *,
        jitter: Callable[[float], float] = lambda limit: random.uniform(0, limit),
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self._storage = storage
        self._failures = RecentFailures(FAILED_RANGE_SECONDS, FAILED_RANGES, clock)
        self._config = config
        self._retrier = Retrier(retry or RetryConfig(), jitter)
        self._cache = ByteCache(config.cache_size)
        self._fetches: SingleFlight[Data] = SingleFlight()
        self._partly_served: LRU[Hashable, int] = LRU(PARTLY_SERVED)
        self._sizes: SingleFlight[int] = SingleFlight()
        self._known_sizes: dict[str, int] = {}
        self._reads = 0
        self._bytes_served = 0
        self._fetch_count = 0
        self._bytes_fetched = 0
        self._errors = 0
        self._prefetch = Prefetcher(
            config,
            self._cache,
            self._fetches,
            functools.partial(self._fetch, background=True),
            functools.partial(self._request, what="prefetch failed", remember=False),
        )

    @property
    def config(self) -> ReadConfig:
        """Return how reads are served."""
        return self._config

    @property
    def cache(self) -> ByteCache:
        """Return the byte-budgeted cache (views over the reader keep their data in it too)."""
        return self._cache

    def running(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Prefetch in the background while the block runs (``Prefetcher.running``)."""
        return self._prefetch.running()

    @property
    def can_prefetch(self) -> bool:
        """Return True when background work can be started."""
        return self._prefetch.can_prefetch

    def spawn(self, job: Callable[[], Awaitable[object]], what: str) -> bool:
        """Run ``job`` in the background; its failures are logged at debug level only."""
        return self._prefetch.spawn(job, what)

    def prefetch_neighbours(
        self, url: str, spans: Sequence[tuple[int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Fetch the next run of neighbour spans ahead (``Prefetcher.prefetch_neighbours``)."""
        return self._prefetch.prefetch_neighbours(url, spans, scale)

    def prefetch_objects(
        self, spans: Sequence[tuple[str, int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Fetch the next references, each an object of its own, ahead
        (``Prefetcher.prefetch_objects``)."""
        return self._prefetch.prefetch_objects(spans, scale)

    def known_size(self, reference: Reference) -> int | None:
        """Return the reference's size if it is known without asking the target."""
        length = reference_length(reference)
        if length is None and isinstance(reference, Whole):
            return self._known_sizes.get(reference.url)
        return length

    async def size(self, key: str, reference: Reference) -> int:
        """Return the number of bytes a read of the whole reference returns (whichever file
        ``key`` serves it)."""
        known = self.known_size(reference)
        if known is not None:
            return known
        assert isinstance(reference, Whole)
        url = reference.url

        async def ask() -> int:
            size = await self._retrier.run(url, lambda: self._storage.size(url), "cannot get size")
            self._known_sizes[url] = size
            return size

        return await self._sizes.run(url, ask)

    async def read(
        self, key: str, reference: Reference, offset: int, size: int
    ) -> bytes | memoryview:
        """Return up to ``size`` bytes at ``offset``; fewer only at the end of the file.

        A read inside a whole-fetched reference is a view of the cached bytes, not a copy:
        the kernel copies it once more anyway, and the cached bytes never change. What the
        target has at hand (``read_now``: a local file in the page cache) is returned as it
        is and not cached: the page cache already holds it. ``key`` names the file: the
        block prefetcher follows each file's reads on their own.
        """
        self._reads += 1
        if isinstance(reference, Inline):
            inline = reference.data[offset : offset + size]
            self._bytes_served += len(inline)
            return inline
        total = await self.size(key, reference)
        if offset >= total or size <= 0:
            return b""
        base = reference.offset if isinstance(reference, Range) else 0
        end = min(offset + size, total)
        at_hand = self._storage.read_now(reference.url, base + offset, base + end)
        if at_hand is not None and len(at_hand) == end - offset:
            self._fetch_count += 1  # a read of the target all the same, just not a wait
            self._bytes_fetched += len(at_hand)
            self._bytes_served += len(at_hand)
            return at_hand
        if total <= self._config.whole_fetch_limit:
            cache_key = (reference.url, base, base + total)
            data: bytes | memoryview
            if offset == 0 and self._is_first_bytes(cache_key, end):
                data = await self._request(reference.url, base, base + end)
            else:
                blob = await self._fetch(*cache_key)
                data = memoryview(blob)[offset:end]
            self._served(cache_key, end - offset)
        else:
            data = await self._read_blocks(reference.url, base, total, offset, end)
            self._prefetch.follow(key, reference.url, base, total, offset, end)
        self._bytes_served += len(data)
        return data

    def _is_first_bytes(self, cache_key: tuple[str, int, int], end: int) -> bool:
        """Whether a read of ``[0, end)`` of an entry is best answered by its own request.

        Tools that sniff a file read its first bytes only (magic numbers, headers); the
        kernel turns that into one small READ at offset 0. Fetching a large entry whole
        for it took several times as long as the small request (over HTTP, a cold 1 MiB
        chunk's first byte: 4.7 against 1.4 ms). A reader that goes on asks beyond those
        bytes next, and that read fetches the entry whole as any other does. Two such reads
        at once make two small requests: no single-flight for a few kilobytes.
        """
        return (
            end <= FIRST_BYTES_READ
            and cache_key[2] - cache_key[1] >= FIRST_BYTES_ENTRY
            and cache_key not in self._cache
            and not self._fetches.busy(cache_key)
        )

    async def _read_blocks(self, url: str, base: int, total: int, offset: int, end: int) -> bytes:
        block = self._config.block_size
        pieces: list[Data] = []
        for number in range(offset // block, (end - 1) // block + 1):
            start = number * block
            stop = min(start + block, total)
            piece = await self._fetch(url, base + start, base + stop)
            pieces.append(piece[max(offset - start, 0) : end - start])
            self._served((url, base + start, base + stop), len(pieces[-1]))
        return b"".join(pieces)

    def _served(self, cache_key: tuple[str, int, int], served: int) -> None:
        self.count_served(cache_key, cache_key[2] - cache_key[1], served)

    def count_served(self, cache_key: Hashable, length: int, served: int) -> None:
        """Count ``served`` more bytes of a cached entry of ``length`` bytes; once all of them
        went out, drop it.

        The kernel keeps what it was sent in its page cache and asks again only for what it
        dropped since (that is fetched again): so the memory goes back to be reused at once,
        instead of fresh memory for every new entry until the budget is full. Bytes are
        counted, not ranges: the kernel asks for each page once while it keeps it. Keys
        that share one entry share the count, so such an entry may leave early.
        """
        if served < length:
            served += self._partly_served.pop(cache_key) or 0
            if served < length:
                self._partly_served.put(cache_key, served)
                return
        elif self._partly_served:
            self._partly_served.pop(cache_key)
        self._cache.discard(cache_key)

    async def _fetch(self, url: str, start: int, end: int, *, background: bool = False) -> Data:
        cache_key = (url, start, end)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached
        if not background and self._fetches.busy(cache_key):
            self._prefetch.waited(url)

        async def fetch() -> Data:
            length = end - start
            self._cache.reserve(length)
            try:
                data = await self._request(url, start, end, remember=not background)
            finally:
                self._cache.release(length)
            self._cache.put(cache_key, data, reserve=self._cache.in_flight)
            return data

        return await self._fetches.run(cache_key, fetch, share_errors=not background)

    async def _request(
        self,
        url: str,
        start: int,
        end: int,
        what: str = "read failed",
        *,
        remember: bool = True,
    ) -> Data:
        """Fetch ``[start, end)`` of ``url`` with retries; nothing cached, nothing shared.

        With ``remember`` (reads, not prefetches), a range inside one that failed less than
        ``FAILED_RANGE_SECONDS`` ago fails at once with ``RecentFailureError`` (logged at
        debug level only), and a failure is remembered.
        """
        if remember:
            failed = self._failures.covering(url, start, end)
            if failed is not None:
                self._errors += 1
                raise RecentFailureError(failed)
        try:
            return await self._retrier.run(
                url,
                lambda: self._storage.read_range(url, start, end),
                what,
                functools.partial(self._check_range, url, start, end),
            )
        except TargetError as error:
            if remember:
                self._failures.remember(url, start, end, error)
            raise

    def _check_range(self, url: str, start: int, end: int, data: Data) -> None:
        """Count a fetch of ``[start, end)`` and insist on exactly that many bytes."""
        self._fetch_count += 1
        self._bytes_fetched += len(data)
        expected = end - start
        if len(data) > expected:
            raise TargetReadError(
                url,
                f"the server ignored the Range request: it sent {len(data)} bytes for a "
                f"{expected}-byte range",
            )
        if len(data) < expected:
            raise ShortReadError(url, expected, len(data))

    def statistics(self) -> ReaderStatistics:
        """Return the read path's counters."""
        return ReaderStatistics(
            self._reads,
            self._bytes_served,
            self._fetch_count,
            self._bytes_fetched,
            self._cache.statistics().hits,
            self._retrier.retries,
            self._errors + self._retrier.failures,
            self._prefetch.prefetches,
            self._prefetch.bytes_prefetched,
            self._cache.size,
            self._prefetch.waits,
        )
