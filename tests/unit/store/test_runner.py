"""Tests of where the store's requests run: fsspec's loop within host slots, worker threads,
and the one error family for whatever fails there."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import trio

from refmount.errors import TargetError, TargetReadError
from refmount.store.options import StorageOptions
from refmount.store.routes import route_of
from refmount.store.runner import Runner

OPTIONS = StorageOptions()


async def test_requests_of_one_host_wait_for_its_slots_and_other_hosts_do_not() -> None:
    runner = Runner(trio.CapacityLimiter(4), connections_per_host=2)
    running: dict[str, int] = {"a": 0, "b": 0}
    most: dict[str, int] = {"a": 0, "b": 0}

    def request(host: str) -> Callable[[], Coroutine[Any, Any, None]]:
        async def body() -> None:
            running[host] += 1
            most[host] = max(most[host], running[host])
            await asyncio.sleep(0.05)
            running[host] -= 1

        return body

    async with trio.open_nursery() as nursery:
        for host in ("a", "b"):
            url = f"http://{host}/x"
            for _ in range(5):
                nursery.start_soon(runner.on_loop, url, route_of(url, OPTIONS), request(host))
    assert most == {"a": 2, "b": 2}


async def test_a_failure_on_the_loop_or_in_a_thread_is_a_target_error_naming_the_url() -> None:
    runner = Runner(trio.CapacityLimiter(1), connections_per_host=1)
    url = "http://h/x"

    async def refused() -> None:
        raise FileNotFoundError("gone")

    with pytest.raises(TargetReadError) as on_loop:
        await runner.on_loop(url, route_of(url, OPTIONS), refused)
    assert on_loop.value.url == url
    assert isinstance(on_loop.value.__cause__, FileNotFoundError)

    def broken() -> None:
        raise PermissionError("no")

    with pytest.raises(TargetError) as in_thread:
        await runner.in_thread(url, broken)
    assert in_thread.value.url == url
    assert not in_thread.value.retryable


async def test_blocking_work_runs_in_a_worker_thread() -> None:
    runner = Runner(trio.CapacityLimiter(1), connections_per_host=1)
    where = await runner.in_thread("file:///x", lambda: threading.current_thread().name)
    assert where != threading.current_thread().name
