"""The soak's report: a table of the run's figures, a table of the checks, the first failed
reads and the verdict."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from soak.daemon import DaemonFigures, ProcFigures
from soak.summary import Latency, Summary
from soak.units import MIB

FAILURES_SHOWN = 5
"""How many failed reads the report lists below the checks."""


def table(rows: Sequence[tuple[str, ...]]) -> str:
    """``rows`` with their columns padded to the widest cell, two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def over_the_run(
    daemon: DaemonFigures, figure: Callable[[ProcFigures], int], show: Callable[[int], str]
) -> str:
    """A daemon figure at the start, after warm-up, at the end and at its peak: ``a/b/c/d``."""
    moments = (daemon.start, daemon.warm, daemon.end, daemon.peak)
    return "/".join(show(figure(moment)) for moment in moments)


def figures(summary: Summary) -> list[tuple[str, str]]:
    """The rows of the figures table."""
    observed, tally = summary.observed, summary.observed.tally
    latency = Latency.of(tally.latencies)
    stats, daemon, failures = summary.daemon_stats, observed.daemon, summary.failures
    return [
        ("duration", f"{summary.elapsed_s} s, {summary.settings.threads} readers"),
        (
            "reads",
            f"{tally.reads} ({summary.reads_per_s}/s, {summary.mib_per_s} MiB/s), "
            f"per target {tally.per_target}",
        ),
        ("read latency", f"p50 {latency.p50} s, p99 {latency.p99} s, max {latency.max} s"),
        ("target requests", str(observed.requests())),
        ("faults injected", str(observed.injected())),
        ("daemon retries", str(stats["retries"])),
        ("daemon fetch errors", str(stats["errors"])),
        ("EIO reads", f"{len(failures.eio)} ({len(failures.unexplained)} unexplained)"),
        (
            "RSS MiB start/warm/end/peak",
            over_the_run(daemon, lambda f: f.rss, lambda v: f"{v / MIB:.0f}"),
        ),
        ("fds start/warm/end/peak", over_the_run(daemon, lambda f: f.fds, str)),
        ("threads start/warm/end/peak", over_the_run(daemon, lambda f: f.threads, str)),
    ]


def report(summary: Summary) -> str:
    """The report printed at the end of a run."""
    lines = [table([("figure", "value"), *figures(summary)]), ""]
    lines.append(
        table([("", "check", "value", "limit"), *(check.row() for check in summary.checks)])
    )
    for failure in summary.observed.tally.failures[:FAILURES_SHOWN]:
        lines.append(f"  {failure.kind.value}: {failure.key.name}: {failure.detail}")
    lines.append("")
    lines.append("soak passed" if summary.ok else "soak FAILED")
    return "\n".join(lines)
