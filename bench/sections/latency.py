"""The latency section: where users wait. Object stores answer in 10 to 50 ms, loopback servers in
microseconds; here a proxy holds each request ``DELAY`` seconds (bandwidth unchanged) in front
of nginx and of the S3 server, and the same two arrays are read through it.

Arrays: 1 MiB chunks (the "big" data, 512 at full scale) and 4 KiB chunks (20 000 at full
scale). Readers, each starting cold:

- refmount, one sequential reader: GNU ``cat`` of the chunk files in key order (the figure the
  goals count), the same through a proxy that holds nothing (what hiding the latency means
  reaching: the bytes take the same path, only the delay differs), and for 1 MiB
  chunks ``gdalmdiminfo -stats`` reading the array through the mount, with and without the
  delay (it reads the array twice, the second time from the page cache, and computes a
  histogram: its figure is mostly GDAL's own CPU, and what the delay costs it is the point);
- in-process fsspec ``cat`` one key at a time: ``SAMPLE`` keys, the rate extrapolated (at 20 ms
  a request, every key would take minutes);
- in-process zarr-python 3 reading the whole array through fsspec with its default
  ``async.concurrency`` and with 64;
- one fsspec ``cat`` of every key at once (it merges neighbouring ranges: the bound for a
  reader that knows every key in advance).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import log
from bench.goals import Check, Row
from bench.section import Context, Section
from bench.sections.latency_readers import (
    SAMPLE,
    Endpoint,
    cat_all_keys,
    cat_in_order,
    cat_one_key,
    gdal_stats,
    rate,
    refmount,
    write_set,
    zarr_read,
)
from bench.servers import (
    Server,
    environment,
    nginx_serving,
    s3_environment,
    s3_key,
    s3_options,
    s3_server,
    s3_upload,
)
from bench.tools import Tool
from tests.support.delay_proxy import DelayProxy

DELAY = 0.02
"""Seconds each request is held: a typical object store's time to first byte."""
MANY_CHUNKS = 20_000
"""4 KiB chunks at full scale."""
ZARR_CONCURRENCY = 64
"""The tuned zarr-python's ``async.concurrency``."""
TODAY_4KIB_FILES_S = 4800
"""4 KiB chunks through the mount behind a 20 ms proxy before this section existed (files/s,
HTTP): the 4 KiB goal is 1.5 times it."""
READERS = (
    "refmount",
    "refmount_no_delay",
    "gdal",
    "gdal_no_delay",
    "cat_one_key",
    "zarr_default",
    "zarr_c64",
    "cat_all_keys",
)
"""Every reader's key in the figures, in the order the notes' table shows them."""


@dataclass
class ArrayFigures:
    """One array over one target: each reader's rate (MiB/s for 1 MiB chunks, files/s for
    4 KiB), or why it has none; behind the delay, the daemon's CPU per chunk and how many
    reads waited for data being fetched ahead (its ``prefetch_waits``)."""

    chunks: int
    rates: dict[str, float | str] = field(default_factory=dict)
    daemon_cpu_ms_per_chunk: float | None = None
    prefetch_waits: float | None = None

    def to_json(self) -> dict[str, object]:
        """The figures as the JSON has them."""
        return {
            "chunks": self.chunks,
            **self.rates,
            "daemon_cpu_ms_per_chunk": self.daemon_cpu_ms_per_chunk,
            "prefetch_waits": self.prefetch_waits,
        }


@dataclass
class LatencyFigures:
    """Per target ("http", "s3") and array ("big", "many"): the median of the rounds."""

    delay_ms: float
    rounds: int
    targets: dict[str, dict[str, ArrayFigures]] = field(default_factory=dict)
    servers: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The section's JSON."""
        return {
            "delay_ms": self.delay_ms,
            "rounds": self.rounds,
            "servers": self.servers,
            **{
                target: {name: figures.to_json() for name, figures in arrays.items()}
                for target, arrays in self.targets.items()
            },
        }


def attempt(figures: ArrayFigures, reader: str, measure: Callable[[], float]) -> None:
    """Record ``measure()`` as ``reader``'s rate, or the error that stopped it."""
    try:
        figures.rates[reader] = measure()
    except Exception as error:  # one reader's failure is a figure, not the end
        figures.rates[reader] = f"{type(error).__name__}: {error}"[:300]
        log(f"latency: {reader}: {figures.rates[reader]}")


@dataclass
class Round:
    """One round over one target: every reader of both arrays."""

    context: Context
    direct: Endpoint
    delayed: Endpoint
    env: dict[str, str]
    counts: dict[str, int]

    def measure(self, tag: str) -> dict[str, ArrayFigures]:
        """Write the two reference sets (direct, delayed); measure both arrays."""
        workdir = self.context.workdir
        direct = write_set(workdir / f"latency-{tag}-direct.json", self.direct, self.counts)
        delayed = write_set(workdir / f"latency-{tag}-delayed.json", self.delayed, self.counts)
        return {name: self.measure_array(direct, delayed, name) for name in self.counts}

    def measure_array(self, direct: Path, delayed: Path, name: str) -> ArrayFigures:
        """Every reader of array ``name``, each starting cold."""
        count = self.counts[name]
        figures = ArrayFigures(count)
        attempt(figures, "refmount", functools.partial(self.mounted, figures, delayed, name))
        attempt(figures, "refmount_no_delay", functools.partial(self.direct_read, direct, name))
        if name == "big":
            attempt(figures, "gdal", functools.partial(self.gdal, delayed, self.delayed, name))
            attempt(
                figures, "gdal_no_delay", functools.partial(self.gdal, direct, self.direct, name)
            )
        attempt(figures, "cat_one_key", functools.partial(self.one_key, delayed, name))
        for reader, concurrency in (("zarr_default", None), ("zarr_c64", ZARR_CONCURRENCY)):
            attempt(figures, reader, functools.partial(self.zarr, delayed, name, concurrency))
        attempt(figures, "cat_all_keys", functools.partial(self.all_keys, delayed, name))
        return figures

    def mounted(self, figures: ArrayFigures, refs: Path, name: str) -> float:
        count = self.counts[name]
        with refmount(self.context, refs, self.delayed, self.env) as mount:
            seconds, cpu = cat_in_order(mount, name, count)
            snapshot = json.loads((mount.path / ".refmount-stats").read_bytes())
        figures.daemon_cpu_ms_per_chunk = 1000 * cpu / count
        figures.prefetch_waits = snapshot.get("prefetch_waits")
        return rate(name, count, seconds)

    def direct_read(self, refs: Path, name: str) -> float:
        count = self.counts[name]
        with refmount(self.context, refs, self.direct, self.env) as mount:
            return rate(name, count, cat_in_order(mount, name, count)[0])

    def gdal(self, refs: Path, endpoint: Endpoint, name: str) -> float:
        with refmount(self.context, refs, endpoint, self.env) as mount:
            return rate(name, self.counts[name], gdal_stats(mount, name))

    def one_key(self, refs: Path, name: str) -> float:
        seconds, keys = cat_one_key(refs, self.delayed, name, self.counts[name])
        return rate(name, keys, seconds)

    def zarr(self, refs: Path, name: str, concurrency: int | None) -> float:
        return rate(name, self.counts[name], zarr_read(refs, self.delayed, name, concurrency))

    def all_keys(self, refs: Path, name: str) -> float:
        count = self.counts[name]
        return rate(name, count, cat_all_keys(refs, self.delayed, name, count))


def median_figures(
    rounds: list[dict[str, ArrayFigures]], readers: tuple[str, ...] = READERS
) -> dict[str, ArrayFigures]:
    """The median of each of ``readers``' rate over the rounds that measured it."""
    out = {}
    for name, first in rounds[0].items():
        merged = ArrayFigures(first.chunks)
        for reader in readers:
            values = [r[name].rates.get(reader) for r in rounds]
            numbers = [v for v in values if isinstance(v, float)]
            if numbers:
                merged.rates[reader] = statistics.median(numbers)
            elif values[0] is not None:
                merged.rates[reader] = values[0]
        cpu = [c for r in rounds if (c := r[name].daemon_cpu_ms_per_chunk) is not None]
        merged.daemon_cpu_ms_per_chunk = statistics.median(cpu) if cpu else None
        waits = [w for r in rounds if (w := r[name].prefetch_waits) is not None]
        merged.prefetch_waits = statistics.median(waits) if waits else None
        out[name] = merged
    return out


def measure_target(
    context: Context, tag: str, server: Server, endpoint: Endpoint, env: dict[str, str]
) -> dict[str, ArrayFigures]:
    """Every round over one target, through two proxies in front of ``server``: one that
    holds each request ``DELAY`` seconds and one that does not (the same path for the bytes,
    so that the readers without delay differ from the others in the delay alone)."""
    port = int(server.url.rsplit(":", 1)[1])
    scale = context.options.scale
    counts = {
        "big": context.data.big_chunks,
        "many": min(context.data.many_chunks, max(16, int(MANY_CHUNKS * scale))),
    }
    with DelayProxy(port, DELAY) as slow, DelayProxy(port, 0.0) as fast:
        direct, delayed = (through(endpoint, server.url, proxy.url) for proxy in (fast, slow))
        rounds = []
        for number in range(context.options.rounds):
            log(f"latency {tag}: round {number + 1} of {context.options.rounds}")
            rounds.append(Round(context, direct, delayed, env, counts).measure(tag))
    return median_figures(rounds)


def through(endpoint: Endpoint, server: str, proxy: str) -> Endpoint:
    """``endpoint`` with the server's URL replaced by the proxy's everywhere."""
    return Endpoint(
        endpoint.protocol,
        {name: url.replace(server, proxy) for name, url in endpoint.urls.items()},
        tuple(option.replace(server, proxy) for option in endpoint.refmount_options),
        {k: (proxy if v == server else v) for k, v in endpoint.remote_options.items()},
    )


def run(context: Context) -> LatencyFigures:
    """Both targets: nginx, then the S3 server."""
    data, workdir = context.data, context.workdir
    result = LatencyFigures(DELAY * 1000, context.options.rounds)
    with nginx_serving(data, workdir) as (server, urls):
        result.servers["http"] = server.name
        env = dict(os.environ)
        result.targets["http"] = measure_target(
            context, "http", server, Endpoint("http", urls), env
        )
    with s3_server(workdir) as server:
        env = s3_environment(s3_key(server))
        urls = s3_upload(server, data)
        direct = Endpoint("s3", urls, ("-o", f"s3_endpoint_url={server.url}"), s3_options(server))
        result.servers["s3"] = server.name
        with environment(env):
            result.targets["s3"] = measure_target(context, "s3", server, direct, env)
    return result


def value(figures: ArrayFigures, reader: str) -> float | None:
    """A reader's rate, None when it has none."""
    found = figures.rates.get(reader)
    return found if isinstance(found, float) else None


def goal(
    checks: list[tuple[str, float]], absolute_at_least: float | None = None
) -> Callable[[ArrayFigures], Check]:
    """The goal "refmount ≥ factor times each of ``checks``' readers" (and ≥ an absolute rate)."""

    def for_figures(figures: ArrayFigures) -> Check:
        def check(ratios: object, mine: float | None) -> bool | None:
            if mine is None:
                return None
            results: list[bool | None] = []
            for reader, factor in checks:
                other = value(figures, reader)
                results.append(None if other is None else mine >= factor * other)
            if absolute_at_least is not None:
                results.append(mine >= absolute_at_least)
            if any(r is False for r in results):
                return False
            return None if any(r is None for r in results) else True

        return check

    return for_figures


BIG_GOAL = goal([("refmount_no_delay", 0.9), ("zarr_c64", 1.0), ("cat_one_key", 10.0)])
MANY_GOAL = goal([("zarr_c64", 2.0)], 1.5 * TODAY_4KIB_FILES_S)


def rows(result: LatencyFigures) -> list[Row]:
    """Two rows per target: 1 MiB and 4 KiB chunks behind the delay, refmount against fsspec
    cat one key at a time (the other readers are in the notes' table)."""
    out = []
    delay = f"{result.delay_ms:.0f} ms"
    for target, arrays in result.targets.items():
        for name, figures in arrays.items():
            big = name == "big"
            values: dict[Tool, float | str | None] = {
                Tool.REFMOUNT: figures.rates.get("refmount"),
                Tool.CAT: figures.rates.get("cat_one_key"),
            }
            out.append(
                Row(
                    f"{target} +{delay}: {'1 MiB' if big else '4 KiB'} chunks, cat in order",
                    "MiB/s" if big else "files/s",
                    values,
                    True,
                    "≥ 0.9x no delay, ≥ 1x zarr c64, ≥ 10x cat"
                    if big
                    else f"≥ 2x zarr c64, ≥ {1.5 * TODAY_4KIB_FILES_S:,.0f} files/s",
                    (BIG_GOAL if big else MANY_GOAL)(figures),
                )
            )
    return out


def notes(result: LatencyFigures) -> list[str]:
    """The table of every reader behind the delay, and what each ratio means."""
    header = ["latency", *READERS, "daemon CPU ms/chunk", "prefetch waits"]
    table = [header]
    for target, arrays in result.targets.items():
        for name, figures in arrays.items():
            unit = "MiB/s" if name == "big" else "files/s"
            cells = [_cell(figures.rates.get(reader)) for reader in READERS]
            cpu, waits = figures.daemon_cpu_ms_per_chunk, figures.prefetch_waits
            label = f"{target} {name} ({figures.chunks}, {unit})"
            table.append([label, *cells, _cell(cpu), _cell(waits)])
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [
        "",
        f"Latency: every request held {result.delay_ms:.0f} ms by a proxy "
        f"({result.rounds} round(s), medians); cat_one_key is {SAMPLE} keys, extrapolated:",
    ]
    for line in table:
        lines.append("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)))
    return lines


def _cell(found: float | str | None) -> str:
    if found is None:
        return "-"
    if isinstance(found, str):
        return found[:24]
    return f"{found:,.0f}" if found >= 100 else f"{found:.3g}"


SECTION = Section("latency", run, rows, notes=notes)
