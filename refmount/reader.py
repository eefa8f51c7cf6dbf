"""Turns a read of ``(offset, size)`` in a reference into bytes: whole-reference fetches, block
fetches for large references, single-flight, the byte budget, and length checks."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import trio

from refmount.cache import ByteCache
from refmount.config import ReadConfig, RetryConfig
from refmount.errors import (
    RemoteAccessError,
    RemoteChangedError,
    RemoteError,
    ShortReadError,
    TargetAccessError,
    TargetChangedError,
    TargetError,
    TargetReadError,
)
from refmount.model import Inline, Range, Reference, Whole

log = logging.getLogger(__name__)

T = TypeVar("T")


class Target(Protocol):
    """What the reader needs from a store (``refmount.store.Store`` or a test fake)."""

    async def read_range(self, url: str, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)`` of ``url``, fewer if the target is shorter."""
        ...

    async def size(self, url: str) -> int:
        """Return the size of the whole target ``url``."""
        ...


@dataclass
class _Flight(Generic[T]):
    """One request in progress that later callers for the same key wait on."""

    done: trio.Event = field(default_factory=trio.Event)
    value: T | None = None
    error: TargetError | None = None
    abandoned: bool = False


class SingleFlight(Generic[T]):
    """Runs one request per key at a time; concurrent callers share its result or error."""

    def __init__(self) -> None:
        self._flights: dict[Hashable, _Flight[T]] = {}

    def in_flight(self) -> int:
        """Return how many requests are running."""
        return len(self._flights)

    async def run(self, key: Hashable, request: Callable[[], Awaitable[T]]) -> T:
        """Return ``request()``'s result, or wait for the identical request already running."""
        while True:
            flight = self._flights.get(key)
            if flight is None:
                return await self._lead(key, request)
            await flight.done.wait()
            if flight.abandoned:
                continue  # the leader was cancelled; try again ourselves
            if flight.error is not None:
                raise flight.error
            assert flight.value is not None
            return flight.value

    async def _lead(self, key: Hashable, request: Callable[[], Awaitable[T]]) -> T:
        flight: _Flight[T] = _Flight()
        self._flights[key] = flight
        try:
            flight.value = await request()
            return flight.value
        except TargetError as error:
            flight.error = error
            raise
        except BaseException:
            flight.abandoned = True
            raise
        finally:
            del self._flights[key]
            flight.done.set()


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


class Reader:
    """Serves reads of references; owns the byte cache and the in-flight requests.

    A reference of up to ``whole_fetch_limit`` bytes is fetched whole by its first read and
    later reads are sliced from memory. Larger references are fetched in aligned blocks of
    ``block_size``. Every fetch must return exactly the bytes asked for: a shorter answer is
    retried and then a ``ShortReadError``, never padded; a longer one means the server ignored
    the range. Each request is bounded by ``retry.timeout`` and retried as ``retry`` says.
    Runs on the event loop thread only.
    """

    def __init__(
        self,
        target: Target,
        config: ReadConfig,
        retry: RetryConfig | None = None,
        *,
        jitter: Callable[[float], float] = lambda limit: random.uniform(0, limit),
    ) -> None:
        self._target = target
        self._config = config
        self._retry = retry or RetryConfig()
        self._jitter = jitter
        self._cache = ByteCache(config.cache_size)
        self._fetches: SingleFlight[bytes] = SingleFlight()
        self._sizes: SingleFlight[int] = SingleFlight()
        self._known_sizes: dict[str, int] = {}
        self._in_flight_bytes = 0
        self._reads = 0
        self._bytes_served = 0
        self._fetch_count = 0
        self._bytes_fetched = 0
        self._retries = 0
        self._errors = 0

    def known_size(self, reference: Reference) -> int | None:
        """Return the reference's size if it is known without asking the target."""
        match reference:
            case Inline(data):
                return len(data)
            case Range(length=length):
                return length
            case Whole(url):
                return self._known_sizes.get(url)

    async def size(self, key: str, reference: Reference) -> int:
        """Return the number of bytes a read of the whole reference returns."""
        known = self.known_size(reference)
        if known is not None:
            return known
        assert isinstance(reference, Whole)
        url = reference.url

        async def ask() -> int:
            size = await self._attempts(key, url, lambda: self._target.size(url), "cannot get size")
            self._known_sizes[url] = size
            return size

        return await self._sizes.run(url, ask)

    async def read(self, key: str, reference: Reference, offset: int, size: int) -> bytes:
        """Return up to ``size`` bytes at ``offset``; fewer only at the end of the file."""
        self._reads += 1
        if isinstance(reference, Inline):
            data = reference.data[offset : offset + size]
            self._bytes_served += len(data)
            return data
        total = await self.size(key, reference)
        if offset >= total or size <= 0:
            return b""
        base = reference.offset if isinstance(reference, Range) else 0
        end = min(offset + size, total)
        if total <= self._config.whole_fetch_limit:
            blob = await self._fetch(key, reference.url, base, base + total)
            data = blob[offset:end]
        else:
            data = await self._read_blocks(key, reference.url, base, total, offset, end)
        self._bytes_served += len(data)
        return data

    async def _read_blocks(
        self, key: str, url: str, base: int, total: int, offset: int, end: int
    ) -> bytes:
        block = self._config.block_size
        pieces: list[bytes] = []
        for number in range(offset // block, (end - 1) // block + 1):
            start = number * block
            stop = min(start + block, total)
            piece = await self._fetch(key, url, base + start, base + stop)
            pieces.append(piece[max(offset - start, 0) : end - start])
        return b"".join(pieces)

    async def _fetch(self, key: str, url: str, start: int, end: int) -> bytes:
        cache_key = (url, start, end)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached

        async def fetch() -> bytes:
            length = end - start
            self._in_flight_bytes += length
            self._cache.shrink(self._in_flight_bytes)
            try:
                data = await self._attempts(
                    key, url, lambda: self._checked_range(key, url, start, end), "read failed"
                )
            finally:
                self._in_flight_bytes -= length
            self._cache.put(cache_key, data, reserve=self._in_flight_bytes)
            return data

        return await self._fetches.run(cache_key, fetch)

    async def _checked_range(self, key: str, url: str, start: int, end: int) -> bytes:
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

    async def _attempts(
        self, key: str, url: str, request: Callable[[], Awaitable[T]], what: str
    ) -> T:
        """Run ``request`` with the per-request timeout, retrying retryable failures.

        Retryable: ``RemoteError``s the store marks so, timeouts and short bodies; a target
        that changed since it was pinned, or that this mount may not read, never is. After
        the last attempt the error names the key, the URL, the last problem and the attempts.
        """
        policy = self._retry
        attempt = 0
        while True:
            try:
                with trio.fail_after(policy.timeout):
                    return await request()
            except trio.TooSlowError:
                error: TargetError = TargetReadError(
                    key, url, f"{what}: no answer within {policy.timeout:g} s"
                )
                retryable = True
            except ShortReadError as short:
                error, retryable = short, True
            except TargetError as other:
                error, retryable = other, False
            except RemoteError as remote:
                error = _target_error(key, url, what, remote)
                error.__cause__ = remote
                retryable = remote.retryable and not isinstance(
                    remote, RemoteAccessError | RemoteChangedError
                )
            if not retryable or attempt >= policy.retries:
                self._errors += 1
                raise error.after_attempts(attempt + 1)
            self._retries += 1
            delay = self._jitter(policy.backoff_limit(attempt))
            log.debug("retrying %s for key %r in %.2f s: %s", url, key, delay, error)
            attempt += 1
            await trio.sleep(delay)

    def statistics(self) -> ReaderStatistics:
        """Return the read path's counters."""
        return ReaderStatistics(
            self._reads,
            self._bytes_served,
            self._fetch_count,
            self._bytes_fetched,
            self._cache.statistics().hits,
            self._retries,
            self._errors,
        )


def _target_error(key: str, url: str, what: str, remote: RemoteError) -> TargetError:
    """Return the ``TargetError`` (naming ``key``) that stands for the store's ``remote``."""
    if isinstance(remote, RemoteAccessError):
        return TargetAccessError(key, url, remote.problem)
    if isinstance(remote, RemoteChangedError):
        return TargetChangedError(key, url, f"{what}: {remote.problem}")
    return TargetReadError(key, url, f"{what}: {remote.problem}")
