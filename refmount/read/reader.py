"""Turns reads of references into bytes: fetches, prefetch, single-flight and the byte budget."""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import trio

from refmount.config import ReadConfig, RetryConfig
from refmount.errors import (
    RecentFailureError,
    ShortReadError,
    TargetError,
    TargetReadError,
)
from refmount.flight import Flight, SingleFlight
from refmount.lru import LRU
from refmount.model import Inline, Range, Reference, Whole, reference_length
from refmount.read.cache import ByteCache, Data
from refmount.read.failures import FAILED_RANGE_SECONDS, FAILED_RANGES, RecentFailures
from refmount.read.path import NeighbourPrefetch, ReaderStatistics, Target
from refmount.read.retry import Retrier

log = logging.getLogger(__name__)

T = TypeVar("T")

STREAMS = 256
"""How many large references the block prefetcher follows at once (least recently read go)."""

SEEK_BACK = 1024 * 1024
"""How far before the end of the last read a read may start and still count as sequential."""

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
        target: Target,
        config: ReadConfig,
        retry: RetryConfig | None = None,
        *,
        jitter: Callable[[float], float] = lambda limit: random.uniform(0, limit),
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self._target = target
        self._failures = RecentFailures(FAILED_RANGE_SECONDS, FAILED_RANGES, clock)
        self._config = config
        self._retrier = Retrier(retry or RetryConfig(), jitter)
        self._cache = ByteCache(config.cache_size)
        self._fetches: SingleFlight[Data] = SingleFlight()
        self._partly_served: LRU[Hashable, int] = LRU(PARTLY_SERVED)
        self._sizes: SingleFlight[int] = SingleFlight()
        self._known_sizes: dict[str, int] = {}
        self._in_flight_bytes = 0
        self._reads = 0
        self._bytes_served = 0
        self._fetch_count = 0
        self._bytes_fetched = 0
        self._errors = 0
        self._prefetches = 0
        self._bytes_prefetched = 0
        self._nursery: trio.Nursery | None = None
        self._streams: LRU[str, _Stream] = LRU(STREAMS)

    @property
    def config(self) -> ReadConfig:
        """Return how reads are served."""
        return self._config

    @property
    def cache(self) -> ByteCache:
        """Return the byte-budgeted cache (views over the reader keep their data in it too)."""
        return self._cache

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Prefetch in the background, in a nursery of the reader's own, while the block
        runs; leaving it cancels what is still in flight. Outside it, reads are served and
        nothing is fetched ahead."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    @property
    def can_prefetch(self) -> bool:
        """Return True when background work can be started."""
        return self._nursery is not None

    def spawn(self, job: Callable[[], Awaitable[object]], what: str) -> bool:
        """Run ``job`` in the background; its failures are logged at debug level only."""
        if self._nursery is None:
            return False
        self._nursery.start_soon(self._quietly, job, what)
        return True

    async def _quietly(self, job: Callable[[], Awaitable[object]], what: str) -> None:
        try:
            await job()
        except Exception as error:  # noqa: BLE001 - best effort: a prefetch never surfaces
            log.debug("prefetch of %s failed: %s", what, error)

    def _prefetch_room(self) -> int:
        """Return how many more bytes prefetch may have in flight: half the budget at most."""
        return self._cache.budget // 2 - self._in_flight_bytes

    def known_size(self, reference: Reference) -> int | None:
        """Return the reference's size if it is known without asking the target."""
        length = reference_length(reference)
        if length is None and isinstance(reference, Whole):
            return self._known_sizes.get(reference.url)
        return length

    async def size(self, key: str, reference: Reference) -> int:
        """Return the number of bytes a read of the whole reference returns."""
        known = self.known_size(reference)
        if known is not None:
            return known
        assert isinstance(reference, Whole)
        url = reference.url

        async def ask() -> int:
            size = await self._retrier.run(
                key, url, lambda: self._target.size(url), "cannot get size"
            )
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
        is and not cached: the page cache already holds it.
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
        at_hand = self._target.read_now(reference.url, base + offset, base + end)
        if at_hand is not None and len(at_hand) == end - offset:
            self._fetch_count += 1  # a read of the target all the same, just not a wait
            self._bytes_fetched += len(at_hand)
            self._bytes_served += len(at_hand)
            return at_hand
        if total <= self._config.whole_fetch_limit:
            cache_key = (reference.url, base, base + total)
            data: bytes | memoryview
            if offset == 0 and self._is_first_bytes(cache_key, end):
                data = await self._request(key, reference.url, base, base + end)
            else:
                blob = await self._fetch(key, *cache_key)
                data = memoryview(blob)[offset:end]
            self._served(cache_key, end - offset)
        else:
            data = await self._read_blocks(key, reference.url, base, total, offset, end)
            self._follow(key, reference.url, base, total, offset, end)
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

    def _follow(self, key: str, url: str, base: int, total: int, offset: int, end: int) -> None:
        """Track a large reference's reads; start fetching blocks ahead of sequential ones.

        Sequential: the first read starts at 0, or a read starts between ``SEEK_BACK`` before
        and one block after the end of the previous one. Each sequential read that enters a
        new block sets the window to 1 block, then doubles it up to ``prefetch_blocks``, and
        fetches the blocks after it up to the window in parallel; any other read resets it.
        """
        cap = self._config.prefetch_blocks
        if cap <= 0 or self._nursery is None:
            return
        block = self._config.block_size
        last = (end - 1) // block
        stream = self._streams.pop(key) or _Stream(0, -1, 0)
        self._streams.put(key, stream)
        expected = stream.next
        sequential = (stream.block < 0 and offset == 0) or (
            stream.block >= 0 and expected - SEEK_BACK <= offset <= expected + block
        )
        if not sequential:
            stream.window, stream.next, stream.block = 0, end, last
            return
        stream.next = max(stream.next, end)
        if last <= stream.block:
            return
        stream.block = last
        stream.window = 1 if stream.window == 0 else min(stream.window * 2, cap)
        for number in range(last + 1, min(last + stream.window, (total - 1) // block) + 1):
            start = base + number * block
            stop = base + min((number + 1) * block, total)
            cache_key = (url, start, stop)
            if cache_key in self._cache or self._fetches.busy(cache_key):
                continue
            if stop - start > self._prefetch_room():
                break
            self._in_flight_bytes += stop - start  # reserved until the task takes over
            self.spawn(
                functools.partial(self._prefetch_block, key, url, start, stop),
                f"{url} [{start}, {stop})",
            )

    async def _prefetch_block(self, key: str, url: str, start: int, stop: int) -> None:
        self._in_flight_bytes -= stop - start  # _fetch counts it again from here on
        self._prefetches += 1
        self._bytes_prefetched += stop - start
        await self._fetch(key, url, start, stop, background=True)

    def prefetch_neighbours(
        self, key: str, url: str, spans: Sequence[tuple[int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Fetch the first spans of ``url`` that are neither cached nor in flight, together.

        ``spans`` are ``(start, end)`` of references of up to ``whole_fetch_limit`` in one
        object, in order, each starting after the previous one ends (``key`` names them in
        logs). Spans already cached or in flight at the front count as fetched ahead. The
        window is ``scale`` times ``neighbour_bytes``, ``neighbour_count`` and
        ``neighbour_part_bytes`` when something is ahead, and once those values when nothing
        is (the reader left what was fetched for it: start small again). When what is ahead
        amounts to half the window, in bytes or in references, nothing is done (so the
        requests stay large: a reader in order sends one per half window, not one per file).
        Otherwise the next run of missing spans, up to the window (less when the budget is
        short: prefetch keeps in-flight data under half of it), is claimed in the
        single-flight table at once (no ``await``) and fetched in the background: one range
        request per part, all at once, so the first files of the run arrive sooner.

        The answer says how many bytes were requested, from which span's start on a call
        can do anything again (before it, at least half the window stays ahead, as long as
        what is ahead stays cached, so the caller need not walk the spans each time) and the
        scale used.
        """
        config = self._config
        if self._nursery is None or config.neighbour_bytes <= 0:
            return NeighbourPrefetch(0, 0, 1)
        ahead = ahead_count = 0
        for start, end in spans:
            cache_key = (url, start, end)
            if cache_key not in self._cache and not self._fetches.busy(cache_key):
                break
            ahead += end - start
            ahead_count += 1
        scale = max(1, scale) if ahead else 1
        limit = min(config.neighbour_bytes * scale, self._prefetch_room())
        count = config.neighbour_count * scale
        covered = spans[:ahead_count]
        if ahead * 2 >= limit or ahead_count * 2 >= count:
            return NeighbourPrefetch(0, _resume_at(covered, count, limit), scale)
        run: list[tuple[int, int]] = []
        for start, end in spans[ahead_count:]:
            cache_key = (url, start, end)
            if cache_key in self._cache or self._fetches.busy(cache_key):
                break
            if end - (run[0][0] if run else start) > limit or len(run) >= count:
                break
            run.append((start, end))
        if not run:
            return NeighbourPrefetch(0, _resume_at(covered, count, limit), scale)
        if ahead == 0 and len(run) == 1:
            return NeighbourPrefetch(0, 0, 1)  # the read being served asks for that one anyway
        requested = 0
        for part in _parts(run, config.neighbour_part_bytes * scale):
            claimed: list[tuple[tuple[str, int, int], Flight[Data]]] = []
            for start, end in part:
                flight = self._fetches.claim((url, start, end))
                assert flight is not None  # checked above, with no await in between
                claimed.append(((url, start, end), flight))
            first, last = part[0][0], part[-1][1]
            self._in_flight_bytes += last - first
            self._cache.shrink(self._in_flight_bytes)
            self._prefetches += 1
            self._bytes_prefetched += last - first
            requested += last - first
            try:
                job = functools.partial(self._coalesced, key, url, claimed)
                self.spawn(job, f"{url} [{first}, {last})")
            except BaseException:
                self._release(claimed, last - first)
                raise
        return NeighbourPrefetch(
            requested, _resume_at(spans[: ahead_count + len(run)], count, limit), scale
        )

    async def _coalesced(
        self, key: str, url: str, claimed: list[tuple[tuple[str, int, int], Flight[Data]]]
    ) -> None:
        """Fetch the claimed spans in one request and settle each; abandon them on failure."""
        first, last = claimed[0][0][1], claimed[-1][0][2]
        try:
            try:
                data = await self._request(key, url, first, last, "prefetch failed", remember=False)
            finally:
                self._in_flight_bytes -= last - first
            whole = memoryview(data)  # the entries share the answer's memory: no copies
            for cache_key, flight in claimed:
                _, start, end = cache_key
                value = whole[start - first : end - first]
                self._cache.put(cache_key, value, reserve=self._in_flight_bytes)
                self._fetches.settle(cache_key, flight, value)
        finally:
            self._release(claimed, 0)  # abandons whatever was not settled

    def _release(
        self, claimed: list[tuple[tuple[str, int, int], Flight[Data]]], in_flight: int
    ) -> None:
        self._in_flight_bytes -= in_flight
        for cache_key, flight in claimed:
            self._fetches.abandon(cache_key, flight)

    async def _read_blocks(
        self, key: str, url: str, base: int, total: int, offset: int, end: int
    ) -> bytes:
        block = self._config.block_size
        pieces: list[Data] = []
        for number in range(offset // block, (end - 1) // block + 1):
            start = number * block
            stop = min(start + block, total)
            piece = await self._fetch(key, url, base + start, base + stop)
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

    async def _fetch(
        self, key: str, url: str, start: int, end: int, *, background: bool = False
    ) -> Data:
        cache_key = (url, start, end)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached

        async def fetch() -> Data:
            length = end - start
            self._in_flight_bytes += length
            self._cache.shrink(self._in_flight_bytes)
            try:
                data = await self._request(key, url, start, end, remember=not background)
            finally:
                self._in_flight_bytes -= length
            self._cache.put(cache_key, data, reserve=self._in_flight_bytes)
            return data

        return await self._fetches.run(cache_key, fetch, share_errors=not background)

    async def _request(
        self,
        key: str,
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
                raise RecentFailureError(key, failed)
        try:
            return await self._retrier.run(
                key, url, lambda: self._checked_range(key, url, start, end), what
            )
        except TargetError as error:
            if remember:
                self._failures.remember(url, start, end, error)
            raise

    async def _checked_range(self, key: str, url: str, start: int, end: int) -> Data:
        """Fetch ``[start, end)`` and insist on exactly that many bytes."""
        data = await self._target.read_range(url, start, end)
        self._fetch_count += 1
        self._bytes_fetched += len(data)
        expected = end - start
        if len(data) > expected:
            raise TargetReadError(
                key,
                url,
                f"the server ignored the Range request: it sent {len(data)} bytes for a "
                f"{expected}-byte range",
            )
        if len(data) < expected:
            raise ShortReadError(key, url, expected, len(data))
        return data

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
            self._prefetches,
            self._bytes_prefetched,
            self._cache.size,
        )


def _resume_at(covered: Sequence[tuple[int, int]], count: int, limit: int) -> int:
    """Return the start of the first of ``covered`` (spans cached or in flight, in order) at
    which fewer than half of ``count`` spans and of ``limit`` bytes are left from it on."""
    remaining, remaining_bytes = len(covered), sum(end - start for start, end in covered)
    for start, end in covered:
        if remaining * 2 < count and remaining_bytes * 2 < limit:
            return start
        remaining -= 1
        remaining_bytes -= end - start
    return covered[-1][1] if covered else 0


def _parts(run: list[tuple[int, int]], size: int) -> list[list[tuple[int, int]]]:
    """Split a run of spans into consecutive parts of at most ``size`` bytes (one span at least)."""
    parts: list[list[tuple[int, int]]] = [[run[0]]]
    for span in run[1:]:
        if span[1] - parts[-1][0][0] > size:
            parts.append([span])
        else:
            parts[-1].append(span)
    return parts


@dataclass(slots=True)
class _Stream:
    """Where the last read of a large reference ended, its block and the prefetch window."""

    next: int
    block: int
    window: int
