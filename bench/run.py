"""One run of the benchmark: the machine's state before it, each section measured in turn (a
failing section is recorded, not fatal), the rows of all of them, the report and the JSON."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import log
from bench.datasets import DataSet
from bench.goals import Row
from bench.mounts import unmount_all
from bench.registry import BY_NAME
from bench.report import LEGEND, table_lines
from bench.section import Context, Options, Result, SectionFailed
from bench.system import mount_fusectl, other_cpu_share, proactive_reclaim, unmount_fusectl


@dataclass
class SectionRun:
    """A section's result (or why it failed) and how long it took."""

    result: Result
    seconds: float

    def to_json(self) -> dict[str, object]:
        """The result's JSON with ``section_s``."""
        return {**self.result.to_json(), "section_s": self.seconds}


@dataclass
class Run:
    """Everything one run measured."""

    options: Options
    other_cpu_before: float = field(default_factory=other_cpu_share)
    loadavg_before: tuple[float, float, float] = field(default_factory=os.getloadavg)
    proactive_reclaim: list[str] = field(default_factory=proactive_reclaim)
    sections: dict[str, SectionRun] = field(default_factory=dict)
    total_s: float = 0.0

    def rows(self) -> list[Row]:
        """Every section's rows, in the order the sections ran; goals computed."""
        rows = []
        for name, section_run in self.sections.items():
            if not isinstance(section_run.result, SectionFailed):
                rows += BY_NAME[name].rows(section_run.result)
        for row in rows:
            row.compute()
        return rows

    def report_lines(self, rows: list[Row]) -> list[str]:
        """The table and the lines below it."""
        lines = [*table_lines(rows), "", *LEGEND]
        for name, section_run in self.sections.items():
            section, result = BY_NAME[name], section_run.result
            if isinstance(result, SectionFailed):
                lines += [f"{name}: error: {result.error}"] if section.summarise_failure else []
            else:
                lines += section.summary(result)
        if self.options.rounds > 1:
            lines.append(
                f"local, HTTP and S3 figures: the median of {self.options.rounds} rounds, every"
                " tool measured in each round (each round's figures are in the JSON)"
            )
        lines.append(f"CPU busy before the run (other processes): {self.other_cpu_before}")
        lines += [
            f"NOTE: the kernel reclaims memory proactively here: {scheme}"
            for scheme in self.proactive_reclaim
        ]
        for name, section_run in self.sections.items():
            if not isinstance(section_run.result, SectionFailed):
                lines += BY_NAME[name].notes(section_run.result)
        return lines

    def to_json(self, rows: list[Row]) -> dict[str, object]:
        """Every figure and ratio, as ``--json`` writes them."""
        document: dict[str, object] = {
            "scale": self.options.scale,
            "budget_s": self.options.budget,
            "rounds": self.options.rounds,
            "cpus": os.cpu_count(),
            "other_cpu_before": self.other_cpu_before,
            "loadavg_before": self.loadavg_before,
            "proactive_reclaim": self.proactive_reclaim,
        }
        document.update({name: run.to_json() for name, run in self.sections.items()})
        document["total_s"] = self.total_s
        document["table"] = [row.to_json() for row in rows]
        return document


def run_sections(names: list[str], options: Options) -> Run:
    """Generate the data and run the sections ``names`` in turn, in a scratch directory that is
    removed afterwards (and everything in it unmounted)."""
    run = Run(options)
    started = time.perf_counter()
    fusectl_mounted = mount_fusectl()
    with tempfile.TemporaryDirectory(prefix="refmount-bench-") as tmp:
        workdir = Path(tmp)
        scale = options.scale
        data = DataSet(workdir, max(8, int(512 * scale)), max(16, int(200_000 * scale)))
        log(f"generating data ({data.big_chunks} x 1 MiB, {data.many_chunks} x 4 KiB)")
        data.generate()
        os.sync()  # the generated files' writeback would otherwise overlap the first section
        context = Context(data, workdir, options)
        try:
            for name in names:
                run.sections[name] = run_one(name, context)
        finally:
            unmount_all(workdir)
            if fusectl_mounted:
                unmount_fusectl()
    run.total_s = time.perf_counter() - started
    return run


def run_one(name: str, context: Context) -> SectionRun:
    """Run one section; a section that raises is recorded as failed."""
    log(f"section {name}")
    begun = time.perf_counter()
    result: Any
    try:
        result = BY_NAME[name].run(context)
    except Exception as error:
        log(f"section {name} failed: {error!r}")
        result = SectionFailed(f"{type(error).__name__}: {error}"[:500])
    return SectionRun(result, time.perf_counter() - begun)
