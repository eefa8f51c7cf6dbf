"""The disk cache section (``--cache-dir``): what a mount gains from fetched bytes kept on
local disk. The latency section's two arrays (1 MiB and 4 KiB chunks, back to back in their
files) are served by nginx behind the same proxy holding each request ``DELAY`` seconds,
and each is read by GNU ``cat`` in key order through a fresh mount, four ways:

- ``local``: the mount over the local files themselves (kept in the page cache), the way
  the ``local`` section reads them: the mount's own speed, no network;
- ``cold``: behind the proxy, no disk cache;
- ``cold_cache``: behind the proxy, with an empty ``--cache-dir`` (what keeping costs);
- ``warm``: behind the proxy, a **new** mount with the directory ``cold_cache`` filled
  (every byte from the disk cache, only the versions asked of the server).

Goals: ``warm`` ≥ 0.9x ``local`` and ≥ 5x ``cold`` (1 MiB chunks), ``cold_cache`` costs at
most a tenth more time than ``cold``, ``warm`` 4 KiB chunks ≥ 0.9x ``local``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import log
from bench.goals import Check, Row
from bench.section import Context, Section
from bench.sections.latency import (
    DELAY,
    MANY_CHUNKS,
    ArrayFigures,
    attempt,
    goal,
    median_figures,
    through,
)
from bench.sections.latency_readers import Endpoint, cat_in_order, rate, write_set
from bench.servers import nginx_serving
from bench.system import resident
from bench.tools import Tool, refmount_mount
from tests.support.delay_proxy import DelayProxy

READERS = ("local", "cold", "cold_cache", "warm")
"""Every reader's key in the figures, in the order they run and the notes show them."""

COLD_COST = 0.1
"""At most this share more time for a cold read with ``--cache-dir`` than without."""

WARM_BIG_GOAL = goal([("local", 0.9), ("cold", 5.0)])
COLD_GOAL = goal([("cold", 1 / (1 + COLD_COST))])
WARM_MANY_GOAL = goal([("local", 0.9)])


@dataclass
class DiskCacheFigures:
    """Per array ("big", "many"): each reader's median rate, and each one's daemon CPU
    milliseconds per chunk (the median, in ``cpu``; the warm mount's is also the figures')."""

    delay_ms: float
    rounds: int
    server: str = ""
    arrays: dict[str, ArrayFigures] = field(default_factory=dict)
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    each_round: list[dict[str, ArrayFigures]] = field(default_factory=list)
    """Every round's rates (the spread the medians hide)."""

    def to_json(self) -> dict[str, object]:
        """The section's JSON."""
        return {
            "delay_ms": self.delay_ms,
            "rounds": self.rounds,
            "server": self.server,
            **{
                name: {**figures.to_json(), "cpu_ms_per_chunk": self.cpu.get(name, {})}
                for name, figures in self.arrays.items()
            },
            "each_round": [
                {name: figures.rates for name, figures in measured.items()}
                for measured in self.each_round
            ],
        }


@dataclass
class Round:
    """One round: both arrays, every reader, with a cache directory of the round's own."""

    context: Context
    local: Path
    delayed: Path
    endpoint: Endpoint
    cache: Path
    counts: dict[str, int]
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    """The daemon's CPU milliseconds per chunk, by array and reader."""

    def measure(self) -> dict[str, ArrayFigures]:
        """Every reader of both arrays; the cache directory is removed at the end."""
        try:
            return {name: self.measure_array(name) for name in self.counts}
        finally:
            shutil.rmtree(self.cache, ignore_errors=True)

    def measure_array(self, name: str) -> ArrayFigures:
        figures = ArrayFigures(self.counts[name])
        cached = ("--cache-dir", str(self.cache))
        for reader, refs, options in (
            ("local", self.local, ()),
            ("cold", self.delayed, ()),
            ("cold_cache", self.delayed, cached),
            ("warm", self.delayed, cached),
        ):
            read = functools.partial(self.read, figures, reader, refs, name, options)
            attempt(figures, reader, read)
        return figures

    def read(
        self,
        figures: ArrayFigures,
        reader: str,
        refs: Path,
        name: str,
        options: tuple[str, ...],
    ) -> float:
        """The rate of ``cat`` in key order through a fresh mount; for ``warm``, also the
        daemon's CPU per chunk, and a check that the disk cache served every read."""
        count = self.counts[name]
        env = dict(os.environ)
        with refmount_mount(self.context.workdir, "disk-cache", refs, options, env) as mount:
            seconds, cpu = cat_in_order(mount, name, count)
            snapshot = json.loads((mount.path / ".refmount-stats").read_bytes())
        self.cpu.setdefault(name, {})[reader] = 1000 * cpu / count
        if reader == "warm":
            figures.daemon_cpu_ms_per_chunk = 1000 * cpu / count
            disk = snapshot.get("disk_cache") or {}
            if disk.get("misses", 1) != 0:
                raise RuntimeError(f"the warm mount missed the disk cache: {disk}")
        return rate(name, count, seconds)


def run(context: Context) -> DiskCacheFigures:
    """Every round over nginx behind the delaying proxy, the local files kept resident."""
    data, workdir = context.data, context.workdir
    result = DiskCacheFigures(DELAY * 1000, context.options.rounds)
    counts = {
        "big": data.big_chunks,
        "many": min(data.many_chunks, max(16, int(MANY_CHUNKS * context.options.scale))),
    }
    local = Endpoint("file", {"big": str(data.big_file), "many": str(data.many_file)})
    local_refs = write_set(workdir / "disk-cache-local.json", local, counts)
    with (
        resident([data.big_file, data.many_file]),
        nginx_serving(data, workdir) as (server, urls),
    ):
        result.server = server.name
        port = int(server.url.rsplit(":", 1)[1])
        with DelayProxy(port, DELAY) as proxy:
            endpoint = through(Endpoint("http", urls), server.url, proxy.url)
            delayed = write_set(workdir / "disk-cache-delayed.json", endpoint, counts)
            rounds, cpu = [], []
            for number in range(context.options.rounds):
                log(f"disk_cache: round {number + 1} of {context.options.rounds}")
                cache = workdir / f"disk-cache-{number}"
                measured = Round(context, local_refs, delayed, endpoint, cache, counts)
                rounds.append(measured.measure())
                cpu.append(measured.cpu)
    result.each_round = rounds
    result.arrays = median_figures(rounds, READERS)
    result.cpu = median_cpu(cpu)
    return result


def median_cpu(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """The median CPU per chunk of each array and reader over the rounds that measured it."""
    out: dict[str, dict[str, float]] = {}
    for figures in rounds:
        for name, readers in figures.items():
            for reader in readers:
                values = [r[name][reader] for r in rounds if reader in r.get(name, {})]
                out.setdefault(name, {})[reader] = statistics.median(values)
    return out


def rows(result: DiskCacheFigures) -> list[Row]:
    """Three rows: the warm re-read of each array through a new mount, and the cold read
    with the disk cache (each against the readers its goal names: see the notes)."""
    delay = f"+{result.delay_ms:.0f} ms"
    out = []
    big, many = result.arrays.get("big"), result.arrays.get("many")
    if big is not None:
        out.append(
            _row(
                f"http {delay}: 1 MiB chunks, new mount, warm --cache-dir",
                "MiB/s",
                big,
                "warm",
                "≥ 0.9x local, ≥ 5x cold",
                WARM_BIG_GOAL,
            )
        )
        out.append(
            _row(
                f"http {delay}: 1 MiB chunks, cold, with --cache-dir",
                "MiB/s",
                big,
                "cold_cache",
                f"time ≤ {1 + COLD_COST:.1f}x without",
                COLD_GOAL,
            )
        )
    if many is not None:
        out.append(
            _row(
                f"http {delay}: 4 KiB chunks, new mount, warm --cache-dir",
                "files/s",
                many,
                "warm",
                "≥ 0.9x local",
                WARM_MANY_GOAL,
            )
        )
    return out


def _row(
    figure: str,
    unit: str,
    figures: ArrayFigures,
    reader: str,
    text: str,
    made: Callable[[ArrayFigures], Check],
) -> Row:
    """A row of ``reader``'s rate, its goal ``made`` for ``figures``."""
    return Row(figure, unit, {Tool.REFMOUNT: figures.rates.get(reader)}, True, text, made(figures))


def notes(result: DiskCacheFigures) -> list[str]:
    """Every reader's rate and the ratios the goals take."""
    lines = [
        "",
        f"Disk cache: every request held {result.delay_ms:.0f} ms by a proxy, a new mount "
        f"per reader ({result.rounds} round(s), medians):",
    ]
    for name, figures in result.arrays.items():
        unit = "MiB/s" if name == "big" else "files/s"
        cells = [f"{reader} {_cell(figures.rates.get(reader))}" for reader in READERS]
        ratios = [
            f"warm/local {_ratio(figures, 'warm', 'local')}",
            f"warm/cold {_ratio(figures, 'warm', 'cold')}",
            f"cold_cache/cold {_ratio(figures, 'cold_cache', 'cold')}",
        ]
        cpu = result.cpu.get(name, {})
        cpu_text = ", ".join(f"{reader} {cpu[reader]:.3g}" for reader in READERS if reader in cpu)
        lines.append(
            f"  {name} ({figures.chunks}, {unit}): {', '.join(cells)}; {', '.join(ratios)}; "
            f"daemon CPU ms/chunk: {cpu_text or '-'}"
        )
    return lines


def ratio(figures: ArrayFigures, mine: str, other: str) -> float | None:
    """``mine``'s rate over ``other``'s, None where either has none."""
    a, b = figures.rates.get(mine), figures.rates.get(other)
    if not isinstance(a, float) or not isinstance(b, float) or b == 0:
        return None
    return a / b


def _ratio(figures: ArrayFigures, mine: str, other: str) -> str:
    found = ratio(figures, mine, other)
    return "-" if found is None else f"{found:.2f}x"


def _cell(found: float | str | None) -> str:
    if found is None:
        return "-"
    if isinstance(found, str):
        return found[:40]
    return f"{found:,.0f}" if found >= 100 else f"{found:.3g}"


SECTION = Section("disk_cache", run, rows, notes=notes)
