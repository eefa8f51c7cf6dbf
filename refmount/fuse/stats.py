"""Counters and latency histograms of a mount, and the snapshot that ``refmount stats`` shows."""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from refmount.read.path import ReaderStatistics

STATS_FILE = ".refmount-stats"
"""The file in the mount's root whose contents are the JSON snapshot. It is not listed, so
listings, ``cp -r`` and zarr readers never see it; a reference key of the same name wins."""

SNAPSHOT_VERSION = 1
"""Bumped when a field of the snapshot changes meaning or goes away (new fields may appear)."""

SUB_BITS = 3
"""Each power of two of latencies is split into ``2**SUB_BITS`` buckets (at most 12.5% wide)."""

_EXACT = 1 << (SUB_BITS + 1)
"""Latencies below this many microseconds get one bucket each."""

MAX_BITS = 40
"""Latencies from ``2**MAX_BITS`` µs (about 12.7 days) on share the last bucket."""

BUCKETS = ((MAX_BITS - SUB_BITS) << SUB_BITS) + _EXACT
"""How many buckets every histogram has: a fixed number, whatever it records."""

PERCENTILES = (50, 90, 99)

EXPORT_BOUNDS_US = tuple(4**power for power in range(2, 14))
"""The upper bounds (µs) of the cumulative buckets a snapshot exports, 16 µs to about 67 s:
powers of two, hence boundaries of the fine buckets, so the exported counts are exact."""


def bucket_of(micros: int) -> int:
    """Return the bucket that a latency of ``micros`` microseconds falls in."""
    if micros < _EXACT:
        return max(micros, 0)
    shift = micros.bit_length() - (SUB_BITS + 1)
    return min((shift << SUB_BITS) + (micros >> shift), BUCKETS - 1)


def bucket_bounds(bucket: int) -> tuple[int, int]:
    """Return the latencies ``[low, high)``, in microseconds, that ``bucket`` counts."""
    if bucket < _EXACT:
        return bucket, bucket + 1
    shift = (bucket >> SUB_BITS) - 1
    mantissa = bucket - (shift << SUB_BITS)
    return mantissa << shift, (mantissa + 1) << shift


class LatencyHistogram:
    """A fixed log-scale histogram of latencies in microseconds; nothing is kept per request.

    Values below 16 µs are exact; above, each power of two is split into 8 buckets, so a
    percentile is reported with at most 12.5% error (never above the true maximum).
    """

    __slots__ = ("_counts", "count", "maximum", "total")

    def __init__(self) -> None:
        self._counts = [0] * BUCKETS
        self.count = 0
        self.total = 0
        self.maximum = 0

    def record(self, micros: int) -> None:
        """Count one latency of ``micros`` microseconds."""
        self._counts[bucket_of(micros)] += 1
        self.count += 1
        self.total += micros
        if micros > self.maximum:
            self.maximum = micros

    def percentile(self, percent: float) -> int:
        """Return the latency that ``percent`` % of the recorded ones do not exceed (0 if none).

        The answer is the top of the bucket holding that rank, capped at the maximum seen.
        """
        if self.count == 0:
            return 0
        rank = max(1, -(-int(percent * self.count) // 100))
        seen = 0
        for bucket, count in enumerate(self._counts):
            seen += count
            if seen >= rank:
                return min(bucket_bounds(bucket)[1] - 1, self.maximum)
        return self.maximum

    def mean(self) -> float:
        """Return the mean latency in microseconds (0 if none)."""
        return self.total / self.count if self.count else 0.0

    def below(self, bounds: tuple[int, ...]) -> list[int]:
        """Return how many latencies were under each of ``bounds`` (µs, ascending), exactly
        when every bound is the low end of a bucket (as ``EXPORT_BOUNDS_US`` are)."""
        counts: list[int] = []
        seen = 0
        bucket = 0
        for bound in bounds:
            while bucket < BUCKETS and bucket_bounds(bucket)[1] <= bound:
                seen += self._counts[bucket]
                bucket += 1
            counts.append(seen)
        return counts


class OperationStatistics:
    """How often one FUSE operation ran, how often it failed (by errno) and how long it took."""

    __slots__ = ("errnos", "errors", "latency")

    def __init__(self) -> None:
        self.latency = LatencyHistogram()
        self.errors = 0
        self.errnos: dict[int, int] = {}

    @property
    def count(self) -> int:
        """Return how many requests were answered, successfully or not."""
        return self.latency.count

    def snapshot(self) -> dict[str, Any]:
        """Return the counters and percentiles as JSON-ready values (latencies in µs)."""
        latency = self.latency
        out: dict[str, Any] = {"count": latency.count, "errors": self.errors}
        out["errnos"] = {errno.errorcode.get(e, str(e)): n for e, n in sorted(self.errnos.items())}
        for percent in PERCENTILES:
            out[f"p{percent}_us"] = latency.percentile(percent)
        out["max_us"] = latency.maximum
        out["mean_us"] = round(latency.mean(), 1)
        out["sum_us"] = latency.total
        out["below_us"] = dict(
            zip(map(str, EXPORT_BOUNDS_US), latency.below(EXPORT_BOUNDS_US), strict=True)
        )
        return out


class Statistics:
    """The counters of one mount: per FUSE operation, plus uptime.

    Owned by the event loop's thread, like the reader (see docs/concurrency.md): ``record``
    is called by the FUSE boundary after every handler, with no ``await`` in it, so it needs
    no lock. It costs a dictionary lookup, a few integer operations and no allocation once
    an operation has been seen.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self._operations: dict[str, OperationStatistics] = {}

    def operation(self, name: str) -> OperationStatistics:
        """Return the counters of operation ``name``, creating them on first use."""
        found = self._operations.get(name)
        if found is None:
            found = self._operations[name] = OperationStatistics()
        return found

    def record(self, name: str, nanoseconds: int, error: int | None = None) -> None:
        """Count one request of ``name`` that took ``nanoseconds``; ``error`` is its errno."""
        operation = self._operations.get(name)
        if operation is None:
            operation = self.operation(name)
        operation.latency.record(nanoseconds // 1000)
        if error is not None:
            operation.errors += 1
            operation.errnos[error] = operation.errnos.get(error, 0) + 1

    @property
    def operations(self) -> Mapping[str, OperationStatistics]:
        """Return the operations seen so far, by name."""
        return self._operations

    def uptime(self) -> float:
        """Return the seconds since these statistics were created (just before mounting)."""
        return float(self._clock() - self._started)

    def snapshot(
        self,
        reader: ReaderStatistics,
        *,
        open_files: int,
        source: str,
        about: Mapping[str, str] | None = None,
        disk_cache: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """Return everything ``refmount stats`` shows, as one JSON-ready mapping (with the
        mount's ``about`` facts, such as an Icechunk mount's ``snapshot``, and the disk
        cache's counters under ``disk_cache`` when it has one)."""
        return {
            "version": SNAPSHOT_VERSION,
            "source": source,
            **(about or {}),
            "pid": os.getpid(),
            "uptime_s": round(self.uptime(), 3),
            "open_files": open_files,
            "reads": reader.reads,
            "bytes_served": reader.bytes_served,
            "fetches": reader.fetches,
            "bytes_fetched": reader.bytes_fetched,
            "cache_hits": reader.cache_hits,
            "bytes_cached": reader.bytes_cached,
            "bytes_prefetched": reader.bytes_prefetched,
            "prefetch_waits": reader.prefetch_waits,
            "retries": reader.retries,
            "errors": reader.errors,
            **({} if disk_cache is None else {"disk_cache": dict(disk_cache)}),
            "operations": {
                name: self._operations[name].snapshot() for name in sorted(self._operations)
            },
        }


def encode_snapshot(snapshot: Mapping[str, Any]) -> bytes:
    """Return a snapshot as compact JSON."""
    return json.dumps(snapshot, separators=(",", ":")).encode()


# ------------------------------------------------------------------ presentation

_COUNTERS = (
    ("uptime", "uptime_s"),
    ("open files", "open_files"),
    ("reads", "reads"),
    ("bytes served", "bytes_served"),
    ("target fetches", "fetches"),
    ("bytes fetched", "bytes_fetched"),
    ("cache hits", "cache_hits"),
    ("bytes cached", "bytes_cached"),
    ("prefetched", "bytes_prefetched"),
    ("prefetch waits", "prefetch_waits"),
    ("retries", "retries"),
    ("fetch errors", "errors"),
)

_DISK_COUNTERS = (
    ("disk hits", "hits", "reads answered wholly from the disk cache"),
    ("disk misses", "misses", "reads that fetched what the disk cache lacked"),
    ("disk read", "bytes_read", "bytes read from the disk cache"),
    ("disk written", "bytes_written", "bytes written to the disk cache"),
    ("disk evictions", "evictions", "targets removed from the disk cache to keep its size"),
    ("disk errors", "errors", "disk cache failures (each read served from the network)"),
)
"""(label, field of ``disk_cache``, Prometheus help) of the disk cache's counters."""


def human_bytes(count: int) -> str:
    """Return ``count`` bytes as ``12.3 MiB`` (exact below 1 KiB)."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_duration(seconds: float) -> str:
    """Return ``seconds`` as ``3d 04:05:06``, ``04:05:06`` or ``12.3 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}d {clock}" if days else clock


def _latency(micros: int) -> str:
    if micros < 1000:
        return f"{micros} µs"
    if micros < 1_000_000:
        return f"{micros / 1000:.1f} ms"
    return f"{micros / 1_000_000:.2f} s"


def format_snapshot(snapshot: Mapping[str, Any]) -> str:
    """Return a snapshot as the readable tables that ``refmount stats`` prints."""
    lines = [f"source          {snapshot.get('source', '?')} (pid {snapshot.get('pid', '?')})"]
    if "snapshot" in snapshot:
        lines.append(f"snapshot        {snapshot['snapshot']}")
    for label, field in _COUNTERS:
        value = snapshot.get(field, 0)
        if field == "uptime_s":
            shown = human_duration(float(value))
        elif field.startswith("bytes"):
            shown = f"{value:,} ({human_bytes(int(value))})"
        else:
            shown = f"{value:,}"
        lines.append(f"{label:<16}{shown}")
    disk: Mapping[str, int] | None = snapshot.get("disk_cache")
    for label, field, _ in _DISK_COUNTERS if disk is not None else ():
        value = int(disk.get(field, 0)) if disk is not None else 0
        shown = f"{value:,} ({human_bytes(value)})" if field.startswith("bytes") else f"{value:,}"
        lines.append(f"{label:<16}{shown}")
    operations: Mapping[str, Mapping[str, Any]] = snapshot.get("operations", {})
    if operations:
        header = ("operation", "count", "errors", "p50", "p90", "p99", "max")
        rows: list[tuple[str, ...]] = [header]
        for name, figures in operations.items():
            rows.append(
                (
                    name,
                    f"{figures['count']:,}",
                    f"{figures['errors']:,}",
                    *(_latency(int(figures[f"p{p}_us"])) for p in PERCENTILES),
                    _latency(int(figures["max_us"])),
                )
            )
        widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
        lines.append("")
        for row in rows:
            cells = [row[0].ljust(widths[0])]
            cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
            lines.append("  ".join(cells).rstrip())
        failing = {
            name: figures["errnos"] for name, figures in operations.items() if figures["errnos"]
        }
        if failing:
            lines.append("")
            lines.append("errors by errno:")
            for name, errnos in failing.items():
                shown = ", ".join(f"{code} {count:,}" for code, count in errnos.items())
                lines.append(f"  {name}: {shown}")
    return "\n".join(lines)


# ------------------------------------------------------------------ Prometheus

_PROMETHEUS_COUNTERS = (
    ("reads", "reads", "read requests answered"),
    ("bytes_served", "bytes_served", "bytes returned to readers"),
    ("fetches", "fetches", "requests made to targets"),
    ("bytes_fetched", "bytes_fetched", "bytes received from targets"),
    ("cache_hits", "cache_hits", "reads answered from memory"),
    ("retries", "retries", "target requests tried again"),
    ("fetch_errors", "errors", "target requests that failed for good"),
    ("bytes_prefetched", "bytes_prefetched", "bytes requested ahead of reads"),
    ("prefetch_waits", "prefetch_waits", "reads that waited for a fetch already under way"),
)
"""(metric name without ``refmount_`` and ``_total``, snapshot field, help) of the counters."""

_PROMETHEUS_GAUGES = (
    ("uptime_seconds", "uptime_s", "seconds the mount has been up"),
    ("open_files", "open_files", "files open on the mount"),
    ("cached_bytes", "bytes_cached", "bytes of fetched data held in memory"),
)


def _label_value(text: str) -> str:
    """Escape a label value for the text exposition format."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Mapping[str, str]) -> str:
    inner = ",".join(f'{name}="{_label_value(value)}"' for name, value in pairs.items())
    return "{" + inner + "}" if pairs else ""


def _number(value: object) -> str:
    """Return a sample value: integers exactly, floats as Python writes them."""
    return str(value) if isinstance(value, int) else repr(float(str(value)))


def prometheus_text(snapshot: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """Return a snapshot in Prometheus' text exposition format (0.0.4), every sample carrying
    ``labels`` (a mount's ``mountpoint``), for node_exporter's textfile collector.

    Counters end in ``_total``; each FUSE operation's latencies are one histogram,
    ``refmount_operation_latency_seconds``, with cumulative buckets at ``EXPORT_BOUNDS_US``
    plus ``+Inf``, ``_sum`` and ``_count``. A bucket counts the latencies below its bound.
    """
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")

    def sample(name: str, value: float, extra: Mapping[str, str] | None = None) -> None:
        lines.append(f"{name}{_labels({**labels, **(extra or {})})} {_number(value)}")

    family("refmount_info", "gauge", "the mount's reference set and daemon")
    info = {"source": str(snapshot.get("source", "")), "pid": str(snapshot.get("pid", ""))}
    sample("refmount_info", 1, info)
    for name, field, help_text in _PROMETHEUS_GAUGES:
        family(f"refmount_{name}", "gauge", help_text)
        sample(f"refmount_{name}", snapshot.get(field, 0))
    for name, field, help_text in _PROMETHEUS_COUNTERS:
        family(f"refmount_{name}_total", "counter", help_text)
        sample(f"refmount_{name}_total", snapshot.get(field, 0))
    disk: Mapping[str, int] = snapshot.get("disk_cache") or {}
    for _, field, help_text in _DISK_COUNTERS if disk else ():
        family(f"refmount_disk_cache_{field}_total", "counter", help_text)
        sample(f"refmount_disk_cache_{field}_total", disk.get(field, 0))
    operations: Mapping[str, Mapping[str, Any]] = snapshot.get("operations", {})
    family("refmount_operations_total", "counter", "FUSE requests answered, by operation")
    for operation, figures in operations.items():
        sample("refmount_operations_total", figures["count"], {"operation": operation})
    family("refmount_operation_errors_total", "counter", "FUSE requests failed, by errno")
    for operation, figures in operations.items():
        for code, count in figures.get("errnos", {}).items():
            sample(
                "refmount_operation_errors_total", count, {"operation": operation, "errno": code}
            )
    name = "refmount_operation_latency_seconds"
    family(name, "histogram", "time to answer a FUSE request, by operation")
    for operation, figures in operations.items():
        below: Mapping[str, int] = figures.get("below_us", {})
        for bound, count in below.items():
            le = _number(int(bound) / 1_000_000)
            sample(f"{name}_bucket", count, {"operation": operation, "le": le})
        sample(f"{name}_bucket", figures["count"], {"operation": operation, "le": "+Inf"})
        sample(f"{name}_sum", int(figures.get("sum_us", 0)) / 1_000_000, {"operation": operation})
        sample(f"{name}_count", figures["count"], {"operation": operation})
    return "\n".join(lines) + "\n"
