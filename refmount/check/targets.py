"""Asking every target of a checked set something (its size, its version), a bounded number
of requests at a time; a target that cannot answer becomes a problem of the set, named by the
first key that points into it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from refmount.check.summary import Summary, TargetInfo
from refmount.errors import RefmountError
from refmount.formats.options import Progress

REQUESTS = 16
"""How many targets are asked at once."""


async def ask_each_target(
    summary: Summary,
    ask: Callable[[TargetInfo], Awaitable[None]],
    what: str,
    progress: Progress | None = None,
    requests: int = REQUESTS,
) -> None:
    """Run ``ask(target)`` for every target of ``summary``, ``requests`` at a time.

    A target whose ``ask`` fails (a ``RefmountError`` or ``OSError``) becomes a problem:
    "cannot get the ``what`` of URL: why". ``progress`` is told ``(targets done, targets)``.
    """
    limiter = trio.CapacityLimiter(requests)
    total = len(summary.targets)
    done = 0

    async def one(target: TargetInfo) -> None:
        nonlocal done
        async with limiter:
            try:
                await ask(target)
            except (RefmountError, OSError) as error:
                summary.problem(target.first_key, f"cannot get the {what} of {target.url}: {error}")
        done += 1
        if progress is not None:
            progress(done, total)

    async with trio.open_nursery() as nursery:
        for target in summary.targets.values():
            nursery.start_soon(one, target)
