"""The reader of a decoded mount: decoded chunk files, decoded in worker threads, kept in the
byte cache until served and decoded ahead of in-order reads; everything else as the plain
``Reader`` serves it. ``decoded_view`` builds a mount's decoded view: references and reader.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence

import trio

from refmount.config import ReadConfig
from refmount.decode.codecs import Pipeline
from refmount.decode.decompress import DecodeFailed
from refmount.decode.view import DecodedArray, DecodedReferences, Plan, plan
from refmount.errors import RecentFailureError, TargetError
from refmount.flight import SingleFlight
from refmount.lru import LRU
from refmount.model import Inline, Reference, ReferenceSet
from refmount.read.cache import Data
from refmount.read.failures import FAILED_RANGE_SECONDS, FAILED_RANGES, RecentFailures
from refmount.read.path import NeighbourPrefetch, ReaderStatistics
from refmount.read.reader import Reader

DECODE_THREADS = max(2, os.cpu_count() or 2)
"""How many chunks are decoded at once (in worker threads; codecs release the GIL)."""

STARTED_CHUNKS = 1024
"""How many chunks last started are remembered (to spot readers that go in order, several
at once: a chunk whose predecessor was started recently is read in order)."""

Lookahead = Callable[[DecodedArray, int], tuple[str, Reference] | None]
"""Finds a chunk's key and stored reference without I/O (``DecodedReferences.chunk_now``)."""


class DecodeError(TargetError):
    """A chunk could not be decoded: ``EIO``, naming the stored chunk's URL, the codec and
    the reason (and the key, once the filesystem attaches it)."""


def decoded_view(
    references: ReferenceSet, reader: Reader, cache_size: int
) -> tuple[DecodedReferences, DecodingReader]:
    """Return the decoded view of a mount's references and reader; warn once per array
    served as stored."""
    decisions = plan(references, cache_size)
    decisions.warn()
    view = DecodedReferences(references, decisions)
    return view, DecodingReader(reader, decisions, lookahead=view.chunk_now)


class DecodingReader:
    """The reader of a decoded mount: decoded chunk files, everything else as ``inner`` reads.

    A read that starts a chunk whose predecessor (C order, same array) was started recently,
    or the first chunk, gets the next one decoded ahead in the background, when ``lookahead``
    knows its reference without I/O and half the cache is free: decoding it overlaps with
    serving this one.

    A decoded chunk is the stored chunk read through ``inner`` (so fetching, prefetch and
    retries are unchanged), decoded in a worker thread (at most ``threads`` at once), and
    kept in ``inner``'s byte-budgeted cache until every byte of it was served, as fetched
    data is (``Reader.count_served``); concurrent reads of a chunk share one decode.
    Sizes are only known with the key, so ``known_size`` answers None and ``size`` decides.
    """

    def __init__(
        self,
        inner: Reader,
        decisions: Plan,
        *,
        threads: int = DECODE_THREADS,
        lookahead: Lookahead | None = None,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self._inner = inner
        self._plan = decisions
        self._limiter = trio.CapacityLimiter(threads)
        self._decodes: SingleFlight[Data] = SingleFlight()
        self._lookahead = lookahead
        self._started: LRU[tuple[str, int], None] = LRU(STARTED_CHUNKS)
        self._failed = RecentFailures(FAILED_RANGE_SECONDS, FAILED_RANGES, clock)
        """Decoded chunks whose decode failed lately, as ``(key, 0, size)``: the kernel asks
        again at once after a failed read, and one ``read()`` then logs the failure once."""

    @property
    def config(self) -> ReadConfig:
        """Return how reads are served."""
        return self._inner.config

    @property
    def can_prefetch(self) -> bool:
        """Return True when background work can be started."""
        return self._inner.can_prefetch

    def spawn(self, job: Callable[[], Awaitable[object]], what: str) -> bool:
        """Run ``job`` in the background."""
        return self._inner.spawn(job, what)

    def prefetch_neighbours(
        self, url: str, spans: Sequence[tuple[int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Prefetch stored bytes of neighbouring chunks (decoded when read)."""
        return self._inner.prefetch_neighbours(url, spans, scale)

    def prefetch_objects(
        self, spans: Sequence[tuple[str, int, int]], scale: int = 1
    ) -> NeighbourPrefetch:
        """Prefetch the stored bytes of the next chunks, each an object of its own."""
        return self._inner.prefetch_objects(spans, scale)

    def statistics(self) -> ReaderStatistics:
        """Return the read path's counters."""
        return self._inner.statistics()

    def known_size(self, reference: Reference) -> int | None:
        """Return None: a decoded chunk's size depends on its key (``size`` tells)."""
        return None

    async def size(self, key: str, reference: Reference) -> int:
        """Return the size of file ``key`` as served."""
        array = self._plan.chunk_array(key)
        if array is not None:
            return array.pipeline.size
        return await self._inner.size(key, reference)

    async def read(
        self, key: str, reference: Reference, offset: int, size: int
    ) -> bytes | memoryview:
        """Return up to ``size`` bytes at ``offset`` of file ``key`` as served."""
        array = self._plan.chunk_array(key)
        if array is None:
            return await self._inner.read(key, reference, offset, size)
        decoded = await self._decoded(key, reference, array.pipeline)
        data = memoryview(decoded)[offset : offset + max(size, 0)]
        self._inner.count_served(("decoded", key), len(decoded), len(data))
        if offset == 0:
            self._decode_ahead(key, array)
        return data

    def _decode_ahead(self, key: str, array: DecodedArray) -> None:
        """Decode the chunk after ``key`` in the background if reads go in order."""
        index = array.chunk_index(key)
        in_order = index == 0 or (array.path, index - 1) in self._started
        self._started.put((array.path, index), None)
        if (
            not in_order
            or index + 1 >= array.grid.count
            or self._lookahead is None
            or not self._inner.can_prefetch
        ):
            return
        cache = self._inner.cache
        if cache.size + array.pipeline.size > cache.budget // 2:
            return
        following = self._lookahead(array, index + 1)
        if following is None:
            return
        next_key, reference = following
        if ("decoded", next_key) in cache or self._decodes.busy(("decoded", next_key)):
            return
        self._inner.spawn(
            lambda: self._decoded(next_key, reference, array.pipeline), f"decoding {next_key}"
        )

    async def _decoded(self, key: str, reference: Reference, pipeline: Pipeline) -> Data:
        cache = self._inner.cache
        cache_key = ("decoded", key)
        cached = cache.get(cache_key)
        if cached is not None:
            return cached
        failed = self._failed.covering(key, 0, pipeline.size)
        if failed is not None:
            raise RecentFailureError(failed)

        async def decode() -> Data:
            total = await self._inner.size(key, reference)
            stored = await self._inner.read(key, reference, 0, total)
            try:
                data = await trio.to_thread.run_sync(
                    pipeline.decode, bytes(stored), limiter=self._limiter
                )
            except DecodeFailed as error:
                url = "inline" if isinstance(reference, Inline) else reference.url
                failure = DecodeError(url, f"cannot decode ({error.codec}): {error.reason}")
                self._failed.remember(key, 0, pipeline.size, failure)
                raise failure from None
            cache.put(cache_key, data)
            return data

        return await self._decodes.run(cache_key, decode)
