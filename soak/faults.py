"""The faults the proxies inject, how long a read may take through them, and which EIO reads
they explain."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from soak.tally import Failure
from tests.support.servers import Applied, Fault

FAULTS = (
    Fault.ERROR_503,
    Fault.RESET,
    Fault.TRUNCATE,
    Fault.HUGE_BODY,
    Fault.ENDLESS_BODY,
    Fault.GZIP_BOMB,
    Fault.STALL_MID_BODY,
)
"""The faults the proxies inject, drawn uniformly for the chosen share of requests: broken
answers, and misbehaving servers (a range ignored with a gigabyte body, a body that never
ends, a gzip bomb, a body that stalls half-way; HEAD requests pass instead)."""

FINAL_FAULTS = (Fault.HUGE_BODY, Fault.ENDLESS_BODY, Fault.GZIP_BOMB)
"""Faults refmount refuses at once, without retrying: one of them explains an EIO."""

RECENT_FAILURE_SECONDS = 1.0
"""How long refmount answers a range that just failed with that failure (so an EIO may
come from a failure that ended up to this long before the read started)."""


class FaultLog(Protocol):
    """What a fault proxy recorded: every request with the fault applied to it."""

    @property
    def applied(self) -> list[Applied]:
        """Every request with the fault applied to it, oldest first."""
        ...

    def faults_between(
        self, path: str, start: float, end: float, only: Collection[Fault] | None = None
    ) -> int:
        """How many requests for ``path`` got a fault (one of ``only``) in [start, end]."""
        ...


def worst_case(timeout: float, retries: int) -> float:
    """The longest one request may take, all attempts and backoff delays included."""
    delays = sum(min(2.0, 0.05 * 2.0**attempt) for attempt in range(retries))
    return timeout * (retries + 1) + delays


def explains(log: FaultLog, failure: Failure, retries: int, bound: float) -> bool:
    """Whether the faults in ``log`` explain an EIO read.

    They do when its object got at least ``retries + 1`` injected faults, or one that is refused
    at once, in the window in which that read (or a fetch it waited for, or a failure it was
    answered with) could have been attempted: from its start less ``bound`` (the longest a
    request may take) and ``RECENT_FAILURE_SECONDS``, to a second after its end.
    """
    path = failure.key.object_path
    window = (failure.started - bound - RECENT_FAILURE_SECONDS, failure.ended + 1)
    return (
        log.faults_between(path, *window) >= retries + 1
        or log.faults_between(path, *window, only=FINAL_FAULTS) > 0
    )


def injected(log: FaultLog) -> dict[str, int]:
    """How many requests got each of ``FAULTS``, by the fault's name."""
    applied = log.applied
    return {fault.value: sum(1 for item in applied if item.fault is fault) for fault in FAULTS}
