"""Fetching ahead of reads, in the background: blocks after sequential reads of a large
reference, runs of neighbour spans the filesystem asks for (``fuse.neighbours``), and chains
of references that are each an object of their own (an Icechunk array's chunks), one
request each.

Prefetched data lands in the reader's cache under the key reads use; its requests are
entries of the reader's single-flight table too, so a read of data being prefetched waits
for it. In-flight prefetches stay under half the byte budget. A prefetch failure is logged
at debug level and never reaches a read: the waiting read makes its own request. Nothing is
fetched ahead outside ``running()``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

from refmount.config import ReadConfig
from refmount.flight import Flight, SingleFlight
from refmount.lru import LRU
from refmount.read.cache import ByteCache, Data
from refmount.read.path import NeighbourPrefetch

log = logging.getLogger(__name__)

TARGETS = 256
"""How many target URLs prefetch keeps state for (the least recently used go, state and all)."""

STREAMS = 16
"""How many large references of one target the block prefetcher follows at once (the least
recently read go)."""

REFILL = 4
"""A neighbour window is refilled once a quarter of it (bytes or references) went to the reader."""

SEEK_BACK = 1024 * 1024
"""How far before the end of the last read a read may start and still count as sequential."""

Fetch = Callable[[str, int, int], Awaitable[Data]]
"""``fetch(url, start, end)``: a range through the cache and the single-flight table."""


class Prefetcher:
    """Starts background fetches for one reader: owns the nursery they run in, what it keeps
    of each target (the streams of block reads it follows, its windows' caps), and its
    counters.

    ``fetch`` reads a range as the reader does (cache, single-flight, retries, failures not
    handed to waiters); ``request`` fetches one range with retries and nothing else (the
    claimed spans of a neighbour run are settled here).
    """

    def __init__(
        self,
        config: ReadConfig,
        cache: ByteCache,
        flights: SingleFlight[Data],
        fetch: Fetch,
        request: Fetch,
    ) -> None:
        self._config = config
        self._cache = cache
        self._flights = flights
        self._fetch = fetch
        self._request = request
        self._nursery: trio.Nursery | None = None
        self._targets: LRU[str, _Target] = LRU(TARGETS)
        self.prefetches = 0
        """How many prefetch requests were started."""
        self.bytes_prefetched = 0
        """How many bytes they asked for."""
        self.waits = 0
        """How many reads waited for a fetch already under way (it was not ahead enough)."""

    def waited(self, url: str) -> None:
        """Note that a read of ``url`` waited for a fetch under way: the next window of that
        object may grow further (a slow server needs more in flight to stay ahead)."""
        self.waits += 1
        self._target(url).late = True

    def _target(self, url: str) -> _Target:
        """Return what is kept of ``url`` (new when nothing is), now the most recently used."""
        target = self._targets.get(url)
        if target is None:
            target = _Target(LRU(STREAMS))
            self._targets.put(url, target)
        return target

    def _cap(self, target: _Target, cap: int, first: int, window: int) -> int:
        """Return how far a window over ``target`` may grow, ``cap`` so far (``first`` at first).

        When a read of the target waited since the last call while the window (``window``) had
        reached ``cap``, twice as far, up to ``late_growth`` times ``first``. A window that
        still waits for its server at full size must reach further ahead to hide the time
        each request takes; waits while it grows are its ramp, and one that keeps ahead needs
        no more memory than it has.
        """
        late, target.late = target.late, False
        if late and window >= cap:
            return min(cap * 2, first * max(1, self._config.late_growth))
        return cap

    def _room(self) -> int:
        """Return how many more bytes prefetch may have in flight: half the budget at most."""
        return self._cache.budget // 2 - self._cache.in_flight

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Prefetch in the background, in a nursery of its own, while the block
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

    def follow(self, key: str, url: str, base: int, total: int, offset: int, end: int) -> None:
        """Track a large reference's reads; start fetching blocks ahead of sequential ones.

        Sequential: the first read starts at 0, or a read starts between ``SEEK_BACK`` before
        and one block after the end of the previous one. Each sequential read that enters a
        new block sets the window to 1 block, then doubles it up to ``prefetch_blocks`` (more
        when reads waited: ``_cap``), and fetches the blocks after it up to the window in
        parallel; any other read resets it.
        """
        if self._config.prefetch_blocks <= 0 or self._nursery is None:
            return
        block = self._config.block_size
        last = (end - 1) // block
        target = self._target(url)
        stream = target.streams.get(key)
        if stream is None:
            stream = _Stream(0, -1, 0, self._config.prefetch_blocks)
            target.streams.put(key, stream)
        stream.cap = self._cap(target, stream.cap, self._config.prefetch_blocks, stream.window)
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
        stream.window = 1 if stream.window == 0 else min(stream.window * 2, stream.cap)
        for number in range(last + 1, min(last + stream.window, (total - 1) // block) + 1):
            start = base + number * block
            stop = base + min((number + 1) * block, total)
            cache_key = (url, start, stop)
            if cache_key in self._cache or self._flights.busy(cache_key):
                continue
            if stop - start > self._room():
                break
            self._cache.reserve(stop - start)  # until the task takes over
            self.spawn(
                functools.partial(self._prefetch_block, url, start, stop),
                f"{url} [{start}, {stop})",
            )

    async def _prefetch_block(self, url: str, start: int, stop: int) -> None:
        self._cache.release(stop - start)  # the fetch counts it again from here on
        self.prefetches += 1
        self.bytes_prefetched += stop - start
        await self._fetch(url, start, stop)

    def prefetch_neighbours(
        self, url: str, spans: Sequence[tuple[int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Fetch the first spans of ``url`` that are neither cached nor in flight, together.

        ``spans`` are ``(start, end)`` of references of up to ``whole_fetch_limit`` in one
        object, in order, each starting after the previous one ends (``url`` names them in
        logs). Spans already cached or in flight at the front count as fetched ahead. The
        window is ``scale`` times ``neighbour_bytes``, ``neighbour_count`` and
        ``neighbour_part_bytes`` when something is ahead, and once those values when nothing
        is (the reader left what was fetched for it: start small again). While less than
        three quarters of the window is ahead (in bytes and in references), the missing spans
        up to the window's end (less when the budget is short: prefetch keeps in-flight data
        under half of it) are claimed in the single-flight table at once (no ``await``) and
        fetched in the background: one range request per part, all at once. So a reader in
        order meets a full window ahead each time it asks, and requests stay large: one run
        per quarter window, not one per file.

        The answer says how many bytes were requested, from which span's start on a call
        can do anything again (before it, more than three quarters of the window stays
        ahead, as long as what is ahead stays cached, so the caller need not walk the spans
        each time) and the scale to ask with next: twice this one after a run, up to
        ``neighbour_growth`` (further when reads waited: ``_cap``).
        """
        config = self._config
        if self._nursery is None or config.neighbour_bytes <= 0:
            return NeighbourPrefetch(0, 0, 1)
        ahead, ahead_count = self._ahead(url, spans)
        scale = max(1, scale) if ahead else 1
        limit = min(config.neighbour_bytes * scale, self._room())
        count = config.neighbour_count * scale
        covered = spans[:ahead_count]
        keep = _Keep(limit - limit // REFILL, count - max(1, count // REFILL))
        if ahead >= keep.bytes or ahead_count >= keep.count:
            return NeighbourPrefetch(0, _resume_at(covered, keep), scale)
        run: list[tuple[int, int]] = []
        for start, end in spans[ahead_count:]:
            cache_key = (url, start, end)
            if cache_key in self._cache or self._flights.busy(cache_key):
                break
            if ahead + end - (run[0][0] if run else start) > limit:
                break
            if ahead_count + len(run) >= count:
                break
            run.append((start, end))
        if not run:
            return NeighbourPrefetch(0, _resume_at(covered, keep), scale)
        if ahead == 0 and len(run) == 1:
            return NeighbourPrefetch(0, 0, 1)  # the read being served asks for that one anyway
        part_scale = min(scale, max(1, config.neighbour_growth))  # larger parts cost more CPU
        requested = sum(
            self._send_part(url, part)
            for part in _parts(run, config.neighbour_part_bytes * part_scale)
        )
        grown = min(2 * scale, self._neighbour_cap(url, scale))
        return NeighbourPrefetch(
            requested, _resume_at(spans[: ahead_count + len(run)], keep), grown
        )

    def prefetch_objects(
        self, spans: Sequence[tuple[str, int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Fetch ahead the first of ``spans`` that are neither cached nor in flight, one
        request each.

        ``spans`` are ``(url, start, end)`` of whole references of up to ``whole_fetch_limit``
        that the filesystem will read in this order, each in an object of its own (nothing
        to coalesce: an Icechunk array's chunks are each one ``store.get``). The window is
        ``prefetch_neighbours``'s (``scale`` times ``neighbour_bytes`` and ``neighbour_count``
        while something is ahead, once those when nothing is; never more than the budget
        leaves prefetch); while less than three quarters of it is ahead, the missing spans
        up to its end are claimed in the single-flight table at once (no ``await``) and
        fetched in the background, all at once. A read of one of them waits for its request;
        a failed one is abandoned and the read makes its own.

        The answer's ``resume_at`` is the position in ``spans`` from which a call can do
        anything again (0: at once); its scale is twice this one after a run, up to
        ``neighbour_growth``.
        """
        config = self._config
        if self._nursery is None or config.neighbour_bytes <= 0:
            return NeighbourPrefetch(0, 0, 1)
        sizes: list[int] = []
        for span in spans:
            if not self._pending(span):
                break
            sizes.append(span[2] - span[1])
        ahead, ahead_count = sum(sizes), len(sizes)
        scale = max(1, scale) if ahead else 1
        limit = min(config.neighbour_bytes * scale, self._room())
        count = config.neighbour_count * scale
        keep = _Keep(limit - limit // REFILL, count - max(1, count // REFILL))
        if ahead >= keep.bytes or ahead_count >= keep.count:
            return NeighbourPrefetch(0, _resume_index(sizes, keep), scale)
        requested = 0
        for url, start, end in spans[ahead_count:]:
            if self._pending((url, start, end)) or ahead_count + 1 > count:
                break
            if ahead + requested + end - start > limit:
                break
            requested += self._send_part(url, [(start, end)])
            ahead_count += 1
            sizes.append(end - start)
        if not requested:
            return NeighbourPrefetch(0, _resume_index(sizes, keep), scale)
        grown = min(2 * scale, max(1, config.neighbour_growth))
        return NeighbourPrefetch(requested, _resume_index(sizes, keep), grown)

    def _pending(self, cache_key: tuple[str, int, int]) -> bool:
        """Return True when the range is cached or being fetched."""
        return cache_key in self._cache or self._flights.busy(cache_key)

    def _ahead(self, url: str, spans: Sequence[tuple[int, int]]) -> tuple[int, int]:
        """Return the bytes and the number of the first ``spans`` cached or in flight."""
        ahead = ahead_count = 0
        for start, end in spans:
            cache_key = (url, start, end)
            if cache_key not in self._cache and not self._flights.busy(cache_key):
                break
            ahead += end - start
            ahead_count += 1
        return ahead, ahead_count

    def _send_part(self, url: str, part: list[tuple[int, int]]) -> int:
        """Claim the spans of ``part`` (none may be busy) and fetch them in the background in
        one request; return its size."""
        claimed: list[tuple[tuple[str, int, int], Flight[Data]]] = []
        for start, end in part:
            flight = self._flights.claim((url, start, end))
            assert flight is not None  # checked by the caller, with no await in between
            claimed.append(((url, start, end), flight))
        first, last = part[0][0], part[-1][1]
        self._cache.reserve(last - first)
        self.prefetches += 1
        self.bytes_prefetched += last - first
        try:
            job = functools.partial(self._coalesced, url, claimed)
            self.spawn(job, f"{url} [{first}, {last})")
        except BaseException:
            self._release(claimed, last - first)
            raise
        return last - first

    def _neighbour_cap(self, url: str, scale: int) -> int:
        """Return how far neighbour windows over ``url`` may grow (``_cap``), in scale units."""
        target = self._target(url)
        first = max(1, self._config.neighbour_growth)
        target.neighbour_cap = self._cap(target, target.neighbour_cap or first, first, scale)
        return target.neighbour_cap

    async def _coalesced(
        self, url: str, claimed: list[tuple[tuple[str, int, int], Flight[Data]]]
    ) -> None:
        """Fetch the claimed spans in one request and settle each; abandon them on failure."""
        first, last = claimed[0][0][1], claimed[-1][0][2]
        try:
            try:
                data = await self._request(url, first, last)
            finally:
                self._cache.release(last - first)
            whole = memoryview(data)  # the entries share the answer's memory: no copies
            for cache_key, flight in claimed:
                _, start, end = cache_key
                value = whole[start - first : end - first]
                self._cache.put(cache_key, value, reserve=self._cache.in_flight)
                self._flights.settle(cache_key, flight, value)
        finally:
            self._release(claimed, 0)  # abandons whatever was not settled

    def _release(
        self, claimed: list[tuple[tuple[str, int, int], Flight[Data]]], in_flight: int
    ) -> None:
        self._cache.release(in_flight)
        for cache_key, flight in claimed:
            self._flights.abandon(cache_key, flight)


def _resume_at(covered: Sequence[tuple[int, int]], keep: _Keep) -> int:
    """Return the start of the first of ``covered`` (spans cached or in flight, in order) at
    which fewer than ``keep`` spans and bytes are left from it on: where a call can refill."""
    position = _resume_index([end - start for start, end in covered], keep)
    if position < len(covered):
        return covered[position][0]
    return covered[-1][1] if covered else 0


def _resume_index(sizes: Sequence[int], keep: _Keep) -> int:
    """Return the position of the first of ``sizes`` (references cached or in flight, in
    order) from which fewer than ``keep`` references and bytes are left: where a call can
    refill; ``len(sizes)`` when none is."""
    remaining, remaining_bytes = len(sizes), sum(sizes)
    for position, size in enumerate(sizes):
        if remaining < keep.count and remaining_bytes < keep.bytes:
            return position
        remaining -= 1
        remaining_bytes -= size
    return len(sizes)


def _parts(run: list[tuple[int, int]], size: int) -> list[list[tuple[int, int]]]:
    """Split a run of spans into consecutive parts of at most ``size`` bytes (one span at least)."""
    parts: list[list[tuple[int, int]]] = [[run[0]]]
    for span in run[1:]:
        if span[1] - parts[-1][0][0] > size:
            parts.append([span])
        else:
            parts[-1].append(span)
    return parts


@dataclass(frozen=True, slots=True)
class _Keep:
    """How much must stay ahead of the reader before a neighbour run is worth sending."""

    bytes: int
    count: int


@dataclass(slots=True)
class _Target:
    """What prefetch keeps of one target URL, kept and evicted as a whole: the block streams of
    its large references being read (by file key: one object may hold several), whether a
    read of it waited for a fetch under way since a window over it last asked (``late``), and
    how far neighbour windows over it may grow (``neighbour_cap``, in scale units; 0 until a
    run was sent)."""

    streams: LRU[str, _Stream]
    late: bool = False
    neighbour_cap: int = 0


@dataclass(slots=True)
class _Stream:
    """Where the last read of a large reference ended, its block, the prefetch window and
    how far the window may grow."""

    next: int
    block: int
    window: int
    cap: int
