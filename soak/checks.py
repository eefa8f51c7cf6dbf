"""The verdicts of a soak run: the failed reads sorted by kind (and the EIO reads no injected
fault explains), and each check with its value and its limit."""

from __future__ import annotations

from dataclasses import dataclass

from soak.arguments import Settings
from soak.faults import explains
from soak.observed import Observed
from soak.tally import Failure, Kind
from soak.units import MIB

Value = int | float | str | bool | None


@dataclass(frozen=True)
class Check:
    """One check: whether it passed, the value seen and the limit it is held to."""

    name: str
    ok: bool
    value: Value
    limit: Value

    def row(self) -> tuple[str, str, str, str]:
        """The check as a row of the report: ``ok`` or ``FAIL``, name, value, limit."""
        return ("ok" if self.ok else "FAIL", self.name, str(self.value), str(self.limit))


@dataclass(frozen=True)
class Failures:
    """The reads that failed, by kind, and the EIO ones the injected faults do not explain."""

    wrong: list[Failure]
    eio: list[Failure]
    other: list[Failure]
    unexplained: list[Failure]

    @classmethod
    def of(cls, observed: Observed, retries: int) -> Failures:
        """Sort the run's failed reads; ``retries`` is refmount's ``--retries``."""
        failures = observed.tally.failures
        eio = [f for f in failures if f.kind is Kind.EIO]
        return cls(
            wrong=[f for f in failures if f.kind is Kind.WRONG],
            eio=eio,
            other=[f for f in failures if f.kind is Kind.ERROR],
            unexplained=[
                f
                for f in eio
                if not explains(observed.proxies[f.key.target], f, retries, observed.bound)
            ],
        )


def growth(name: str, figure: int, slack: int) -> Check:
    """How much a figure grew from after the warm-up to the end, held to ``slack``."""
    return Check(f"{name} growth after warm-up", figure <= slack, figure, f"<= {slack}")


def checks(settings: Settings, observed: Observed, failures: Failures) -> list[Check]:
    """Every check of the run, in the order the report shows them."""
    tally, daemon = observed.tally, observed.daemon
    rss_limit = daemon.start.rss + settings.cache_bytes + settings.rss_slack_bytes
    made = [
        Check(
            "reads done",
            tally.reads > 0 and all(tally.per_target.get(name, 0) > 0 for name in settings.targets),
            tally.reads,
            "> 0 per target",
        ),
        Check("wrong bytes", not failures.wrong, len(failures.wrong), 0),
        Check("errors other than EIO", not failures.other, len(failures.other), 0),
        Check(
            "EIO not explained by injected faults",
            not failures.unexplained,
            len(failures.unexplained),
            0,
        ),
        Check("readers still blocked at the end", observed.hung == 0, observed.hung, 0),
        Check("daemon alive until unmounted", observed.alive, observed.alive, True),
        Check(
            "daemon exit status after unmount",
            observed.exit_code == 0,
            observed.exit_code,
            0,
        ),
        Check(
            "daemon peak RSS (MiB)",
            daemon.peak.rss <= rss_limit,
            round(daemon.peak.rss / MIB, 1),
            f"<= {rss_limit / MIB:.1f} (start + cache + slack)",
        ),
        growth("open fds", daemon.end.fds - daemon.warm.fds, settings.fd_slack),
        growth("threads", daemon.end.threads - daemon.warm.threads, settings.thread_slack),
        Check(
            "open file handles at the end",
            observed.stats.get("open_files") == 0,
            observed.stats.get("open_files"),
            0,
        ),
    ]
    if settings.fault_share > 0:
        total = sum(sum(counts.values()) for counts in observed.injected().values())
        made.append(Check("faults injected", total > 0, total, "> 0"))
    return made
