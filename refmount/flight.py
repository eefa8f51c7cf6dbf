"""The one single-flight for trio tasks: concurrent requests for one key run once, and every
caller gets that one result.

Cancellation rules (see docs/concurrency.md): a leader cancelled (or failing with anything
but a ``TargetError``) abandons its flight, and its waiters start a request of their own, so
one reader's cancelled read never fails another's. A ``TargetError`` is handed to the
waiters (as ``RecentFailureError``: the leader's read reports it once) unless the caller
asked otherwise (``share_errors=False``). A claimed flight (``claim``) is settled or
abandoned by its claimer, never left hanging.

The Parquet record cache, which loads records in worker threads, keeps a thread-based
equivalent of its own: a ``trio.Event`` cannot be waited on outside the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

from refmount.errors import RecentFailureError, TargetError

T = TypeVar("T")


@dataclass
class Flight(Generic[T]):
    """One request in progress that later callers for the same key wait on."""

    done: trio.Event = field(default_factory=trio.Event)
    value: T | None = None
    error: TargetError | None = None
    abandoned: bool = False


class SingleFlight(Generic[T]):
    """Runs one request per key at a time; concurrent callers share its result or error."""

    def __init__(self) -> None:
        self._flights: dict[Hashable, Flight[T]] = {}

    def in_flight(self) -> int:
        """Return how many requests are running."""
        return len(self._flights)

    def busy(self, key: Hashable) -> bool:
        """Return True while a request for ``key`` is running."""
        return key in self._flights

    def claim(self, key: Hashable) -> Flight[T] | None:
        """Register a flight for ``key`` that the caller settles or abandons, or None if busy.

        Callers of ``run`` for ``key`` wait for it meanwhile.
        """
        if key in self._flights:
            return None
        flight: Flight[T] = Flight()
        self._flights[key] = flight
        return flight

    def settle(self, key: Hashable, flight: Flight[T], value: T) -> None:
        """Hand ``value`` to the callers waiting on a claimed flight."""
        flight.value = value
        self._finish(key, flight)

    def abandon(self, key: Hashable, flight: Flight[T]) -> None:
        """Give up a claimed flight: its waiters start their own request."""
        if not flight.done.is_set():
            flight.abandoned = True
            self._finish(key, flight)

    def _finish(self, key: Hashable, flight: Flight[T]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        flight.done.set()

    async def run(
        self, key: Hashable, request: Callable[[], Awaitable[T]], *, share_errors: bool = True
    ) -> T:
        """Return ``request()``'s result, or wait for the identical request already running.

        With ``share_errors`` False a failure is not handed to the waiters: they try again.
        A waiter handed the leader's failure raises it as ``RecentFailureError`` (logged at
        debug level): the leader's read reports it once, however many reads waited on it
        (a large readahead sends several READs of one file at once).
        """
        while True:
            flight = self._flights.get(key)
            if flight is None:
                return await self._lead(key, request, share_errors)
            await flight.done.wait()
            if flight.abandoned:
                continue  # the leader was cancelled; try again ourselves
            if flight.error is not None:
                raise RecentFailureError(flight.error)
            assert flight.value is not None
            return flight.value

    async def _lead(
        self, key: Hashable, request: Callable[[], Awaitable[T]], share_errors: bool
    ) -> T:
        flight: Flight[T] = Flight()
        self._flights[key] = flight
        try:
            flight.value = await request()
            return flight.value
        except TargetError as error:
            if share_errors:
                flight.error = error
            else:
                flight.abandoned = True
            raise
        except BaseException:
            flight.abandoned = True
            raise
        finally:
            del self._flights[key]
            flight.done.set()
