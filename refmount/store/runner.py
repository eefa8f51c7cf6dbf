"""Where the store's requests run: coroutines of the fetch engines on fsspec's asyncio loop,
awaited from trio without a thread per request (``bridge``) and at most
``connections_per_host`` at a time per host; blocking calls in worker threads, all bounded by
one ``trio.CapacityLimiter``. Whatever fails leaves as ``TargetError`` (``failures``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import fsspec.asyn
import trio

from refmount.errors import TargetError
from refmount.store.bridge import wait_for_future
from refmount.store.failures import target_error
from refmount.store.routes import Route

T = TypeVar("T")


class Runner:
    """Runs requests for URLs: on fsspec's loop within their host's slots, or in a thread."""

    def __init__(self, threads: trio.CapacityLimiter, connections_per_host: int) -> None:
        self.threads = threads
        """The one limit on worker threads (the local files' reads share it)."""
        self._per_host = connections_per_host
        self._hosts: dict[str, trio.Semaphore] = {}

    def _host_slots(self, route: Route) -> trio.Semaphore:
        slots = self._hosts.get(route.host)
        if slots is None:
            slots = self._hosts[route.host] = trio.Semaphore(self._per_host)
        return slots

    async def on_loop(
        self, url: str, route: Route, coroutine: Callable[[], Coroutine[Any, Any, T]]
    ) -> T:
        """Run ``coroutine()`` on fsspec's loop and return its result."""
        async with self._host_slots(route):
            loop = fsspec.asyn.get_loop()
            future = asyncio.run_coroutine_threadsafe(coroutine(), loop)
            try:
                return await wait_for_future(future)
            except (trio.Cancelled, TargetError):
                raise
            except Exception as error:
                raise target_error(url, error) from error

    async def in_thread(self, url: str, function: Callable[[], T]) -> T:
        """Run the blocking ``function`` in a worker thread (given up on when cancelled)."""
        try:
            return await trio.to_thread.run_sync(
                function, limiter=self.threads, abandon_on_cancel=True
            )
        except Exception as error:
            raise target_error(url, error) from error
