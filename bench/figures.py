"""Typed figures of the read sections: what each tool measured for each figure, what failed,
the verification counts, and the median of several rounds."""

from __future__ import annotations

import enum
import statistics
from dataclasses import dataclass, field

from bench.tools import Tool

Cell = float | str | None
"""A value in the table: a measurement, why it is missing (an error, a timeout) or nothing."""


class Figure(enum.StrEnum):
    """A figure of a read section; its value is its key in the JSON figures."""

    READY = "ready_s"
    TTFB = "ttfb_ms"
    SEQ_1 = "seq_1mib_1_reader_mib_s"
    SEQ_1_TUNED = "seq_1mib_1_reader_tuned_mib_s"
    SEQ_8 = "seq_1mib_8_readers_mib_s"
    SEQ_CPU = "seq_cpu_ms_per_mib"
    """The daemon's CPU per MiB in the 1-reader loop (for fsspec cat: its own, in process)."""
    SEQ_READER_CPU = "seq_reader_cpu_ms_per_mib"
    """The reading process's CPU per MiB in the 1-reader loop (the benchmark's own)."""
    SEQ_SERVER_CPU = "seq_server_cpu_ms_per_mib"
    """The server's CPU per MiB in the 1-reader loop (nginx's workers, s3rver)."""
    REREAD = "reread_page_cache_mib_s"
    RANDOM = "random_4kib_ms"
    MANY_JSON = "many_4kib_json_files_s"
    MANY_PARQUET = "many_4kib_parquet_files_s"
    READY_MANY_JSON = "ready_many_json_s"
    READY_MANY_PARQUET = "ready_many_parquet_s"
    PEAK_RSS = "daemon_peak_rss_mib"


@dataclass(frozen=True)
class Failure:
    """Why a tool has no figure: the exception that ended its measurement."""

    message: str

    @classmethod
    def of(cls, error: BaseException) -> Failure:
        """The failure an exception describes, cut to 300 characters."""
        return cls(f"{type(error).__name__}: {error}"[:300])


@dataclass(frozen=True)
class Verification:
    """How many chunks read by a tool were compared with the source, and how many differed."""

    verified: int
    mismatches: int

    def __add__(self, other: Verification) -> Verification:
        return Verification(self.verified + other.verified, self.mismatches + other.mismatches)


@dataclass
class ReadFigures:
    """Everything one round of a read section measured: a value per figure and tool, the
    failures per measurement (named by a figure or a tool's group of figures) and the checks
    of the bytes read."""

    values: dict[Figure, dict[Tool, float]] = field(default_factory=dict)
    failures: dict[str, dict[Tool, Failure]] = field(default_factory=dict)
    verify: dict[Tool, Verification] = field(default_factory=dict)
    raw_note: str = ""

    def record(self, figure: Figure, tool: Tool, value: float) -> None:
        """Set ``tool``'s value of ``figure``."""
        self.values.setdefault(figure, {})[tool] = float(value)

    def fail(self, label: str, tool: Tool, failure: Failure) -> None:
        """Remember that ``tool``'s measurement ``label`` failed."""
        self.failures.setdefault(label, {})[tool] = failure

    def get(self, figure: Figure) -> dict[Tool, Cell]:
        """Each tool's value of ``figure``, or the failure of the measurement of that name."""
        cells: dict[Tool, Cell] = {
            tool: failure.message for tool, failure in self.failures.get(figure, {}).items()
        }
        cells.update(self.values.get(figure, {}))
        return cells

    def to_json(self) -> dict[str, object]:
        """The figures as the benchmark's JSON has them: figure -> tool -> value or error."""
        out: dict[str, dict[str, object]] = {}
        for label, failures in self.failures.items():
            for tool, failure in failures.items():
                out.setdefault(label, {})[tool] = {"error": failure.message}
        for figure, values in self.values.items():
            for tool, value in values.items():
                out.setdefault(figure, {})[tool] = value
        verify = {
            tool: {"verified": v.verified, "mismatches": v.mismatches}
            for tool, v in self.verify.items()
        }
        return {**out, "verify": verify, "raw_note": self.raw_note}


def median_of_rounds(rounds: list[ReadFigures]) -> ReadFigures:
    """Merge several rounds: each tool's median of the rounds that measured a figure, the sum of
    the verification counts, the first failure of a measurement and the first raw note."""
    merged = ReadFigures(raw_note=next((r.raw_note for r in rounds if r.raw_note), ""))
    figures = {f: None for r in rounds for f in r.values}
    for figure in figures:
        tools = {t: None for r in rounds for t in r.values.get(figure, {})}
        for tool in tools:
            measured = [r.values[figure][tool] for r in rounds if tool in r.values.get(figure, {})]
            merged.record(figure, tool, statistics.median(measured))
    for r in rounds:
        for label, failures in r.failures.items():
            for tool, failure in failures.items():
                merged.failures.setdefault(label, {}).setdefault(tool, failure)
        for tool, verification in r.verify.items():
            before = merged.verify.get(tool)
            merged.verify[tool] = verification if before is None else before + verification
    return merged


def number(value: object) -> float | None:
    """``value`` as a float when it is a measurement (not a bool, an error text or None)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
