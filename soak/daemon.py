"""The daemon's figures from /proc: resident memory, threads and open file descriptors, read at
the moments the checks compare and sampled every second for their peaks."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

from soak.units import KIB

SAMPLE_SECONDS = 1.0


@dataclass(frozen=True)
class ProcFigures:
    """A process's resident memory (bytes), threads and open file descriptors."""

    rss: int
    threads: int
    fds: int

    @classmethod
    def of(cls, pid: int) -> ProcFigures:
        """``pid``'s figures now, from ``/proc/<pid>/status`` and ``/proc/<pid>/fd``; an OSError
        when it is gone (a zombie has no memory figure)."""
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        status: dict[str, str] = {}
        with open(f"/proc/{pid}/status") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                status[name] = value
        if "VmRSS" not in status:
            raise ProcessLookupError(f"process {pid} has exited")
        return cls(int(status["VmRSS"].split()[0]) * KIB, int(status["Threads"]), fds)

    def to_json(self) -> dict[str, int]:
        """``{"fds": ..., "rss": ..., "threads": ...}``."""
        return {"fds": self.fds, "rss": self.rss, "threads": self.threads}


def peaks(samples: list[ProcFigures]) -> ProcFigures:
    """The largest value of each figure in ``samples`` (0 without samples)."""
    return ProcFigures(
        max((sample.rss for sample in samples), default=0),
        max((sample.threads for sample in samples), default=0),
        max((sample.fds for sample in samples), default=0),
    )


class Monitor(threading.Thread):
    """Sample the daemon's /proc figures every second until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True, name="soak-monitor")
        self.pid = pid
        self.samples: list[tuple[float, ProcFigures]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        """Sample until ``stop``; a moment the figures cannot be read is skipped."""
        while not self.stopping.is_set():
            with contextlib.suppress(OSError):
                self.samples.append((time.monotonic(), ProcFigures.of(self.pid)))
            self.stopping.wait(SAMPLE_SECONDS)

    def stop(self) -> None:
        """Stop sampling (waiting up to 5 s for the thread)."""
        self.stopping.set()
        self.join(5)

    def peaks(self) -> ProcFigures:
        """The largest value of each figure over the samples."""
        return peaks([sample for _, sample in self.samples])


@dataclass(frozen=True)
class DaemonFigures:
    """The daemon's figures over the run: after the first reads, after the warm-up, at the
    end, at their peak, and how many samples the peaks are taken from."""

    start: ProcFigures
    warm: ProcFigures
    end: ProcFigures
    peak: ProcFigures
    """The sampled peaks; the RSS's counts the end too."""
    samples: int

    @classmethod
    def of(
        cls, start: ProcFigures, warm: ProcFigures, end: ProcFigures, monitor: Monitor
    ) -> DaemonFigures:
        """The figures read at three moments and the monitor's peaks (the RSS's with the end's)."""
        sampled = monitor.peaks()
        peak = ProcFigures(max(sampled.rss, end.rss), sampled.threads, sampled.fds)
        return cls(start, warm, end, peak, len(monitor.samples))
