"""What one soak run saw: the readers' tally, the faults each proxy applied, the daemon's
figures and its stats file at the end, and how the readers and the daemon ended."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from soak.daemon import DaemonFigures
from soak.faults import FaultLog, injected
from soak.tally import Tally


@dataclass(frozen=True)
class Observed:
    """Everything the checks and the summary are made of."""

    tally: Tally
    proxies: Mapping[str, FaultLog]
    """Each target's fault proxy, by target name."""
    keys: int
    """How many keys the mounted set has."""
    daemon: DaemonFigures
    stats: Mapping[str, Any]
    """The mount's stats file at the end, as parsed JSON (empty when it could not be read)."""
    hung: int
    """Readers still reading well after the deadline."""
    elapsed: float
    """Seconds from starting the readers to the last of them ending."""
    alive: bool
    """Whether the daemon was still running just before the unmount."""
    exit_code: int | None
    """The daemon's exit status after the unmount."""
    bound: float
    """The longest one request may take (``faults.worst_case``)."""

    def requests(self) -> dict[str, int]:
        """How many requests each target's proxy received."""
        return {name: len(log.applied) for name, log in self.proxies.items()}

    def injected(self) -> dict[str, dict[str, int]]:
        """How many requests got each fault, per target."""
        return {name: injected(log) for name, log in self.proxies.items()}
