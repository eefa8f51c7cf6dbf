"""The icechunk section: mounting and reading Icechunk repositories, made at run time.

- Mount: a repository of 1 000 000 virtual chunks (at full scale; 100 bytes each, into a
  local file): seconds until the mount answers, and the daemon's peak RSS once it has
  answered and listed one directory of chunks. Goals: ready < 5 s, RSS < 300 MB.
- Reads: ``big``'s 512 (at full scale) 1 MiB chunks as a repository's virtual chunks on
  nginx and on the S3 server, each request held ``DELAY`` seconds by the latency section's
  proxy. GNU ``cat`` of the chunk files through the mount in key order (one sequential
  reader) against zarr-python 3 reading the array in process through Icechunk's store at
  its default ``async.concurrency``; both read through Icechunk, which checks each chunk's
  checksum. Goal: refmount ≥ 1.0x zarr-python. Beside them, the same byte ranges as a
  kerchunk set read through the mount by refmount's own engines: what reading virtual chunks
  without Icechunk's store would give (without its checksums).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import MIB, log
from bench.goals import Check, Row, absolute
from bench.processes import process_cpu_seconds
from bench.section import Context, Section
from bench.sections.icechunk_readers import (
    HUGE_ARRAY,
    READ_ARRAY,
    Container,
    chunk_files,
    http_container,
    make_huge_repository,
    make_read_repository,
    mount_repository,
    s3_container,
    zarr_read,
)
from bench.sections.latency import DELAY
from bench.sections.latency_readers import Endpoint, cat_in_order, write_set
from bench.sections.latency_readers import refmount as latency_mount
from bench.servers import (
    Server,
    environment,
    nginx_serving,
    s3_environment,
    s3_key,
    s3_server,
    s3_upload,
)
from bench.tools import Tool
from tests.support.delay_proxy import DelayProxy

HUGE_CHUNKS = 1_000_000
"""Virtual chunks of the mounted repository at full scale."""
READY_GOAL_S = 5.0
RSS_GOAL_MB = 300.0
"""The RSS goal in megabytes (10^6 bytes; the figures are MiB)."""
MB_PER_MIB = MIB / 1e6
READERS = ("refmount", "zarr_default", "refmount_own_engines")
"""Every reader's key in the read figures: GNU cat through the mount of the repository,
zarr-python in process, and GNU cat through a mount of a kerchunk set of the same byte ranges
(refmount's own engines, coalescing neighbours, with no checksum to check)."""


@dataclass
class MountFigures:
    """The mount of the huge repository: how long writing it took (not a goal), until the
    mount answered, and the daemon's RSS (MiB) after listing one directory of chunks."""

    chunks: int
    build_s: float
    ready_s: float
    vmrss_mib: float | None
    vmhwm_mib: float | None

    def to_json(self) -> dict[str, object]:
        """Every field by name."""
        return dataclasses.asdict(self)


@dataclass
class ReadFigures:
    """One target behind the delay: each reader's MiB/s (or why it has none), the daemon's
    CPU per chunk, and its prefetch counters after the read."""

    chunks: int
    rates: dict[str, float | str] = field(default_factory=dict)
    server_cpu_ms_per_chunk: dict[str, float] = field(default_factory=dict)
    """The server's CPU per chunk while each reader read (its processes: nginx's workers,
    s3rver; none when it runs inside the benchmark, as moto does)."""
    daemon_cpu_ms_per_chunk: float | None = None
    bytes_prefetched: float | None = None
    prefetch_waits: float | None = None

    def to_json(self) -> dict[str, object]:
        """The figures as the JSON has them."""
        return {
            "chunks": self.chunks,
            **self.rates,
            "server_cpu_ms_per_chunk": self.server_cpu_ms_per_chunk,
            "daemon_cpu_ms_per_chunk": self.daemon_cpu_ms_per_chunk,
            "bytes_prefetched": self.bytes_prefetched,
            "prefetch_waits": self.prefetch_waits,
        }


@dataclass
class IcechunkFigures:
    """The section's figures: the mount (or why it failed) and, per target ("http", "s3"),
    the median of the rounds."""

    delay_ms: float
    rounds: int
    mount: MountFigures | str | None = None
    targets: dict[str, ReadFigures] = field(default_factory=dict)
    servers: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The section's JSON."""
        mount = self.mount.to_json() if isinstance(self.mount, MountFigures) else self.mount
        return {
            "delay_ms": self.delay_ms,
            "rounds": self.rounds,
            "servers": self.servers,
            "mount": mount,
            **{target: figures.to_json() for target, figures in self.targets.items()},
        }


def measure_mount(context: Context) -> MountFigures:
    """Write the huge repository, mount it, list one directory of its chunks."""
    chunks = max(1000, int(HUGE_CHUNKS * context.options.scale))
    repository = context.workdir / "icechunk-huge"
    log(f"icechunk: writing a repository of {chunks:,} virtual chunks")
    build_s, chunks = make_huge_repository(repository, chunks, context.data.many_file)
    with mount_repository(context.workdir, "icechunk-huge", repository, dict(os.environ)) as mount:
        ready = mount.ready_seconds
        os.listdir(mount.path / HUGE_ARRAY / "c" / "0")
        rss = mount.rss()
    return MountFigures(chunks, build_s, ready, rss.get("VmRSS"), rss.get("VmHWM"))


def attempt(figures: ReadFigures, reader: str, measure: Callable[[], float]) -> None:
    """Record ``measure()`` as ``reader``'s rate, or the error that stopped it."""
    try:
        figures.rates[reader] = measure()
    except Exception as error:  # one reader's failure is a figure, not the end
        figures.rates[reader] = f"{type(error).__name__}: {str(error)[-300:]}"
        log(f"icechunk: {reader}: {figures.rates[reader]}")


@dataclass(frozen=True)
class ReadTarget:
    """How the readers reach one target through a proxy, given the proxy's base URL: the
    repository's container, the URL of the object its chunks lie in, and the same object for
    refmount's own engines."""

    tag: str
    container: Callable[[str], Container]
    url: Callable[[str], str]
    endpoint: Callable[[str], Endpoint]
    env: dict[str, str]


@dataclass(frozen=True)
class Reached:
    """One target's data behind the proxy: the repository, its container, and the kerchunk
    set of the same byte ranges with its endpoint."""

    repository: Path
    container: Container
    refs: Path
    endpoint: Endpoint


def read_round(
    context: Context, server: Server, target: ReadTarget, reached: Reached
) -> ReadFigures:
    """One round: the repository's mount read by cat, zarr-python in process, and the
    kerchunk set's mount read by cat, each starting cold."""
    count = context.data.big_chunks
    figures = ReadFigures(count)
    readers: dict[str, Callable[[], float]] = {
        "refmount": functools.partial(cat_mount, context, reached.repository, target.env, figures),
        "zarr_default": lambda: count / zarr_read(reached.repository, reached.container),
        "refmount_own_engines": functools.partial(own_engines, context, reached, target.env),
    }
    for reader, measure in readers.items():
        before = server_cpu_seconds(server)
        attempt(figures, reader, measure)
        after = server_cpu_seconds(server)
        if before is not None and after is not None:
            figures.server_cpu_ms_per_chunk[reader] = 1000 * (after - before) / count
    return figures


def own_engines(context: Context, reached: Reached, env: dict[str, str]) -> float:
    """MiB/s of GNU cat of the kerchunk set's chunk files in key order through a fresh mount."""
    count = context.data.big_chunks
    with latency_mount(context, reached.refs, reached.endpoint, env) as mount:
        return count / cat_in_order(mount, READ_ARRAY, count)[0]


def server_cpu_seconds(server: Server) -> float | None:
    """The CPU time ``server``'s processes have used so far (None without any)."""
    pids = server.pids()
    return sum(map(process_cpu_seconds, pids)) if pids else None


def cat_mount(
    context: Context, repository: Path, env: dict[str, str], figures: ReadFigures
) -> float:
    """MiB/s of GNU cat of the chunk files in key order through a fresh mount; the daemon's
    CPU per chunk and prefetch counters go into ``figures``."""
    count = figures.chunks
    with mount_repository(context.workdir, "icechunk-read", repository, env) as mount:
        cpu = process_cpu_seconds(mount.process.pid)
        started = time.perf_counter()
        subprocess.run(["cat", *chunk_files(mount, count)], stdout=subprocess.DEVNULL, check=True)
        seconds = time.perf_counter() - started
        cpu = process_cpu_seconds(mount.process.pid) - cpu
        snapshot = json.loads((mount.path / ".refmount-stats").read_bytes())
    figures.daemon_cpu_ms_per_chunk = 1000 * cpu / count
    figures.bytes_prefetched = snapshot.get("bytes_prefetched")
    figures.prefetch_waits = snapshot.get("prefetch_waits")
    return count / seconds


def median_figures(rounds: list[ReadFigures]) -> ReadFigures:
    """The median of each reader's rate and of each counter over the rounds that have one."""
    merged = ReadFigures(rounds[0].chunks)
    for reader in READERS:
        values = [r.rates.get(reader) for r in rounds]
        numbers = [v for v in values if isinstance(v, float)]
        if numbers:
            merged.rates[reader] = statistics.median(numbers)
        elif values[0] is not None:
            merged.rates[reader] = values[0]
    for name in ("daemon_cpu_ms_per_chunk", "bytes_prefetched", "prefetch_waits"):
        found = [v for r in rounds if (v := getattr(r, name)) is not None]
        setattr(merged, name, statistics.median(found) if found else None)
    for reader in READERS:
        cpu = [c for r in rounds if (c := r.server_cpu_ms_per_chunk.get(reader)) is not None]
        if cpu:
            merged.server_cpu_ms_per_chunk[reader] = statistics.median(cpu)
    return merged


def measure_target(context: Context, server: Server, target: ReadTarget) -> ReadFigures:
    """Every round over one target, behind a proxy that holds each request ``DELAY`` seconds."""
    port = int(server.url.rsplit(":", 1)[1])
    count = context.data.big_chunks
    workdir = context.workdir
    with DelayProxy(port, DELAY) as proxy:
        container = target.container(proxy.url)
        repository = make_read_repository(
            workdir / f"icechunk-{target.tag}", container, target.url(proxy.url), count
        )
        endpoint = target.endpoint(proxy.url)
        refs = write_set(workdir / f"icechunk-{target.tag}.json", endpoint, {READ_ARRAY: count})
        reached = Reached(repository, container, refs, endpoint)
        rounds = []
        for number in range(context.options.rounds):
            log(f"icechunk {target.tag}: round {number + 1} of {context.options.rounds}")
            rounds.append(read_round(context, server, target, reached))
    return median_figures(rounds)


def run(context: Context) -> IcechunkFigures:
    """The huge mount, then reads over nginx and over the S3 server."""
    data, workdir = context.data, context.workdir
    result = IcechunkFigures(DELAY * 1000, context.options.rounds)
    try:
        result.mount = measure_mount(context)
    except Exception as error:  # the reads are figures of their own
        result.mount = f"{type(error).__name__}: {error}"[:300]
        log(f"icechunk: mount: {result.mount}")
    with nginx_serving(data, workdir) as (server, urls):
        result.servers["http"] = server.name
        name = urls[READ_ARRAY].rsplit("/", 1)[1]
        http = ReadTarget(
            "http",
            http_container,
            lambda base: f"{base}/{name}",
            lambda base: Endpoint("http", {READ_ARRAY: f"{base}/{name}"}),
            dict(os.environ),
        )
        result.targets["http"] = measure_target(context, server, http)
    with s3_server(workdir) as server:
        env = s3_environment(s3_key(server))
        url = s3_upload(server, data, (READ_ARRAY,))[READ_ARRAY]
        result.servers["s3"] = server.name
        s3 = ReadTarget(
            "s3",
            functools.partial(s3_container, "bench"),
            lambda base: url,
            lambda base: Endpoint("s3", {READ_ARRAY: url}, ("-o", f"s3_endpoint_url={base}")),
            env,
        )
        with environment(env):
            result.targets["s3"] = measure_target(context, server, s3)
    return result


def rate_goal(figures: ReadFigures) -> Check:
    """The goal "refmount ≥ 1.0x zarr-python in process": unknown without both rates."""

    def check(ratios: object, mine: float | None) -> bool | None:
        other = figures.rates.get("zarr_default")
        if mine is None or not isinstance(other, float):
            return None
        return mine >= other

    return check


READY_GOAL = absolute(lambda seconds: seconds < READY_GOAL_S)
RSS_GOAL = absolute(lambda mib: mib * MB_PER_MIB < RSS_GOAL_MB)


def rows(result: IcechunkFigures) -> list[Row]:
    """Ready and peak RSS of the huge mount; per target, cat through the mount."""
    out = []
    mount = result.mount
    if isinstance(mount, MountFigures):
        title = f"Icechunk {mount.chunks:,} virtual chunks"
        ready: float | str | None = mount.ready_s
        rss: float | str | None = mount.vmhwm_mib
    else:
        title, ready, rss = "Icechunk mount", mount, mount
    if mount is not None:
        ready_row = Row(f"{title}: ready", "s", {Tool.REFMOUNT: ready}, False, "< 5 s", READY_GOAL)
        rss_values = {Tool.REFMOUNT: rss}
        rss_row = Row(f"{title}: daemon peak RSS", "MiB", rss_values, False, "< 300 MB", RSS_GOAL)
        out += [ready_row, rss_row]
    delay = f"{result.delay_ms:.0f} ms"
    for target, figures in result.targets.items():
        out.append(
            Row(
                f"icechunk {target} +{delay}: 1 MiB virtual chunks, cat in order",
                "MiB/s",
                {Tool.REFMOUNT: figures.rates.get("refmount")},
                True,
                "≥ 1x zarr-python + icechunk",
                rate_goal(figures),
            )
        )
    return out


def notes(result: IcechunkFigures) -> list[str]:
    """Every reader of each target, refmount's ratio to zarr-python, and the daemon's work."""
    lines = [
        "",
        f"Icechunk: every request held {result.delay_ms:.0f} ms by a proxy ({result.rounds} "
        "round(s), medians; MiB/s); zarr_default is zarr-python in process through "
        "Icechunk's store at its default async.concurrency:",
    ]
    for target, figures in result.targets.items():
        cells = [
            f"{reader} {_cell(figures.rates.get(reader))} "
            f"(server CPU ms/chunk {_cell(figures.server_cpu_ms_per_chunk.get(reader))})"
            for reader in READERS
        ]
        prefetched = figures.bytes_prefetched
        lines.append(
            f"  {target} ({result.servers.get(target, '?')}, {figures.chunks} chunks): "
            + ", ".join(cells)
            + f"; ratio {_ratio(figures)}; daemon CPU ms/chunk "
            f"{_cell(figures.daemon_cpu_ms_per_chunk)}, MiB prefetched "
            f"{_cell(None if prefetched is None else prefetched / MIB)}, "
            f"prefetch waits {_cell(figures.prefetch_waits)}"
        )
    if isinstance(result.mount, MountFigures):
        mount = result.mount
        lines.append(
            f"  mount: {mount.chunks:,} chunks written and committed in {mount.build_s:.1f} s; "
            f"ready {mount.ready_s:.2f} s, VmRSS {_cell(mount.vmrss_mib)} MiB, "
            f"VmHWM {_cell(mount.vmhwm_mib)} MiB"
        )
    return lines


def _ratio(figures: ReadFigures) -> str:
    mine, other = figures.rates.get("refmount"), figures.rates.get("zarr_default")
    if isinstance(mine, float) and isinstance(other, float) and other > 0:
        return f"{mine / other:.2f}x"
    return "-"


def _cell(found: float | str | None) -> str:
    if found is None:
        return "-"
    if isinstance(found, str):
        return found[:40]
    return f"{found:,.0f}" if found >= 100 else f"{found:.3g}"


SECTION = Section("icechunk", run, rows, notes=notes)
