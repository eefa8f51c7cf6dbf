"""The trio↔asyncio bridge: trio awaits a future completed on another thread's event loop
(fsspec's, where async filesystems and obstore's coroutines run) without a thread of its own.

Cancelling the trio task cancels the future, so the coroutine behind it is cancelled too.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from typing import TypeVar

import trio

T = TypeVar("T")


async def wait_for_future(future: concurrent.futures.Future[T]) -> T:
    """Await a future completed on another thread, without blocking trio or using a thread."""
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()

    def wake(_: object) -> None:
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(done.set)

    future.add_done_callback(wake)
    try:
        await done.wait()
    except trio.Cancelled:
        future.cancel()
        raise
    return future.result()
