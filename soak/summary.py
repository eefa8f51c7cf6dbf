"""The figures of a soak run as the report and the JSON show them: rates, latency percentiles,
requests and faults per target, the daemon's figures and stats, the checks and the verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from soak.arguments import Settings
from soak.checks import Check, Failures, checks
from soak.observed import Observed
from soak.units import MIB

DAEMON_STATS = ("reads", "fetches", "bytes_fetched", "cache_hits", "retries", "errors")
"""The figures of the mount's stats file the summary keeps."""
FAILURES_KEPT = 20
"""How many failed reads the JSON lists."""


def percentile(values: list[float], percent: float) -> float:
    """The value ``percent`` % of ``values`` are below (nearest rank; 0 without values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))]


@dataclass(frozen=True)
class Latency:
    """The read latency's median, 99th percentile and maximum, in seconds (to 0.1 ms)."""

    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, latencies: list[float]) -> Latency:
        """The percentiles of ``latencies``."""
        return cls(
            round(percentile(latencies, 50), 4),
            round(percentile(latencies, 99), 4),
            round(max(latencies, default=0.0), 4),
        )


@dataclass(frozen=True)
class Summary:
    """A run's settings, what it saw, its failed reads and its checks."""

    settings: Settings
    observed: Observed
    failures: Failures
    checks: list[Check]

    @classmethod
    def of(cls, settings: Settings, observed: Observed) -> Summary:
        """Sort the failed reads and make the checks."""
        failures = Failures.of(observed, settings.retries)
        return cls(settings, observed, failures, checks(settings, observed, failures))

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(check.ok for check in self.checks)

    @property
    def elapsed_s(self) -> float:
        """How long the readers read, to 10 ms."""
        return round(self.observed.elapsed, 2)

    @property
    def reads_per_s(self) -> float:
        """Reads per second, to 0.1."""
        elapsed = self.observed.elapsed
        return round(self.observed.tally.reads / elapsed, 1) if elapsed else 0.0

    @property
    def mib_per_s(self) -> float:
        """MiB read per second, to 0.01."""
        elapsed = self.observed.elapsed
        return round(self.observed.tally.bytes_read / MIB / elapsed, 2) if elapsed else 0.0

    @property
    def daemon_stats(self) -> dict[str, Any]:
        """The kept figures of the mount's stats file (None where it has none)."""
        return {name: self.observed.stats.get(name) for name in DAEMON_STATS}

    def to_json(self) -> dict[str, object]:
        """Every figure and check, as ``--json`` writes them."""
        settings, observed, tally = self.settings, self.observed, self.observed.tally
        daemon = observed.daemon
        return {
            "settings": {
                "seconds": settings.seconds,
                "threads": settings.threads,
                "fault_share": settings.fault_share,
                "retries": settings.retries,
                "timeout": settings.timeout,
                "fetcher": settings.fetcher,
                "cache_size": settings.cache_size,
                "targets": list(settings.targets),
                "keys": observed.keys,
                "seed": settings.seed,
            },
            "elapsed_s": self.elapsed_s,
            "reads": tally.reads,
            "reads_per_target": tally.per_target,
            "reads_per_s": self.reads_per_s,
            "bytes_read": tally.bytes_read,
            "mib_per_s": self.mib_per_s,
            "direct_reads": tally.direct_reads,
            "whole_file_reads": tally.whole_reads,
            "latency_s": asdict(Latency.of(tally.latencies)),
            "eio_reads": len(self.failures.eio),
            "eio_unexplained": len(self.failures.unexplained),
            "wrong_reads": len(self.failures.wrong),
            "other_errors": len(self.failures.other),
            "target_requests": observed.requests(),
            "faults_injected": observed.injected(),
            "daemon": {
                "start": daemon.start.to_json(),
                "after_warm_up": daemon.warm.to_json(),
                "end": daemon.end.to_json(),
                "peak_rss": daemon.peak.rss,
                "peak_fds": daemon.peak.fds,
                "peak_threads": daemon.peak.threads,
                "samples": daemon.samples,
            },
            "daemon_stats": self.daemon_stats,
            "failures": [
                {"key": f.key.name, "kind": f.kind.value, "detail": f.detail}
                for f in tally.failures[:FAILURES_KEPT]
            ],
            "checks": [asdict(check) for check in self.checks],
            "ok": self.ok,
            "log": str(settings.log) if settings.log else None,
        }
