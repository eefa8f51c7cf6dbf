"""Target ranges whose reads failed lately, answered again at once with their error."""

from __future__ import annotations

from collections.abc import Callable

from refmount.errors import TargetError
from refmount.lru import LRU

FAILED_RANGE_SECONDS = 1.0
"""How long a range whose read failed (after its retries) fails again at once..."""
FAILED_RANGES = 256
"""...and how many such ranges are remembered (the oldest go)."""


class RecentFailures:
    """Target ranges whose reads failed lately, each remembered for ``seconds``.

    When a read ahead of the kernel fails, the kernel asks again at once for the page the
    program wants: a range of the failed one. Answering that from here makes one ``read()``
    cost one round of retries and one log line. At most ``capacity`` ranges are kept.
    """

    def __init__(self, seconds: float, capacity: int, clock: Callable[[], float]) -> None:
        self._seconds = seconds
        self._clock = clock
        self._failed: LRU[tuple[str, int, int], tuple[float, TargetError]] = LRU(capacity)

    def remember(self, url: str, start: int, end: int, error: TargetError) -> None:
        """Note that ``[start, end)`` of ``url`` failed with ``error`` just now."""
        self._failed.put((url, start, end), (self._clock() + self._seconds, error))

    def covering(self, url: str, start: int, end: int) -> TargetError | None:
        """Return the error of a recent failure of a range holding ``[start, end)``."""
        if not self._failed:
            return None
        now = self._clock()
        for (failed_url, first, last), (until, error) in self._failed.items():
            if until <= now:
                self._failed.pop((failed_url, first, last))
            elif failed_url == url and first <= start and end <= last:
                return error
        return None
