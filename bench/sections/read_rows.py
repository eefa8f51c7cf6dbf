"""The table rows of a read section and its goals, and the lines below the table that say
under which conditions it was measured."""

from __future__ import annotations

from collections.abc import Callable

from bench.common import MIB
from bench.figures import Figure, number
from bench.goals import Check, Row, absolute, all_of, at_least
from bench.report import cell
from bench.sections.reads import ReadResult
from bench.tools import Tool

FUSE_GOAL = 3.0


def rows_for(name: str) -> Callable[[ReadResult], list[Row]]:
    """The rows of the read section ``name`` ("local", "http" or "s3")."""

    def rows(result: ReadResult) -> list[Row]:
        return [*sequential_rows(name, result), *other_rows(name, result)]

    return rows


def sequential_rows(name: str, result: ReadResult) -> list[Row]:
    """Ready, and the 1 MiB chunks read in order by one reader (plain, tuned) and by 8."""
    remote = name != "local"
    figures = result.figures
    fuse3 = at_least(Tool.FUSE, FUSE_GOAL)
    seq_goal = 1.0 if remote else 0.7
    tuned = figures.get(Figure.SEQ_1)
    tuned_values = figures.get(Figure.SEQ_1_TUNED)
    for tool in (Tool.REFMOUNT, Tool.FLOOR, Tool.CFLOOR, Tool.CFLOOR_MT):
        tuned[tool] = tuned_values.get(tool)
    eight = figures.get(Figure.SEQ_8)
    eight[Tool.CAT] = figures.get(Figure.SEQ_1).get(Tool.CAT)
    eight_goal, eight_check = (
        ("vs cat(1) ≥ 1.5x, vs fuse ≥ 3x", all_of(at_least(Tool.CAT, 1.5), fuse3))
        if remote
        else ("vs fuse ≥ 3x", fuse3)
    )
    return [
        Row(f"{name}: ready (big JSON)", "s", figures.get(Figure.READY), False),
        Row(
            f"{name}: seq 1 MiB, 1 reader",
            "MiB/s",
            figures.get(Figure.SEQ_1),
            True,
            f"vs cat ≥ {seq_goal}x, vs fuse ≥ 3x",
            all_of(at_least(Tool.CAT, seq_goal), fuse3),
        ),
        Row(
            f"{name}: seq 1 MiB, 1 reader, -o tune_kernel",
            "MiB/s",
            tuned,
            True,
            "" if remote else "vs cat ≥ 1.0x",
            None if remote else at_least(Tool.CAT, 1.0),
        ),
        Row(f"{name}: seq 1 MiB, 8 readers", "MiB/s", eight, True, eight_goal, eight_check),
    ]


def many_rows(name: str, result: ReadResult) -> list[Row]:
    """The 4 KiB files of the many set in order (JSON, Parquet) and the time to mount them."""
    figures = result.figures
    many_goal = 3.0 if name == "s3" else 1.0
    fuse3 = at_least(Tool.FUSE, FUSE_GOAL)
    rows = []
    for fmt, files, ready in (
        ("json", Figure.MANY_JSON, Figure.READY_MANY_JSON),
        ("parquet", Figure.MANY_PARQUET, Figure.READY_MANY_PARQUET),
    ):
        check: Check = at_least(Tool.CAT, many_goal)
        goal = f"vs cat ≥ {many_goal}x"
        if fmt == "json":
            check, goal = all_of(check, fuse3), goal + ", vs fuse ≥ 3x"
        values = figures.get(files)
        rows.append(Row(f"{name}: 4 KiB in order ({fmt})", "files/s", values, True, goal, check))
        rows.append(Row(f"{name}: ready ({fmt} 'many')", "s", figures.get(ready), False))
    return rows


def other_rows(name: str, result: ReadResult) -> list[Row]:
    """The many set, random reads, CPU per MiB, the first byte, the re-read and memory."""
    figures = result.figures
    fuse3 = at_least(Tool.FUSE, FUSE_GOAL)
    ttfb = figures.get(Figure.TTFB)
    floor_ttfb, raw_ttfb = number(ttfb.get(Tool.FLOOR)), number(ttfb.get(Tool.RAW))
    if name != "local" and floor_ttfb is not None:
        # no daemon answers before the target does: the floor plus the raw first byte
        ttfb[Tool.FLOOR] = None if raw_ttfb is None else floor_ttfb + raw_ttfb
    reread_goal = absolute(lambda v: v >= 2e9 / MIB)
    return [
        *many_rows(name, result),
        Row(
            f"{name}: random 4 KiB pread",
            "ms/read",
            figures.get(Figure.RANDOM),
            False,
            "vs fuse ≥ 3x",
            fuse3,
        ),
        Row(f"{name}: CPU per MiB, seq 1 reader", "ms", figures.get(Figure.SEQ_CPU), False),
        Row(f"{name}: first byte, cold chunk", "ms", ttfb, False, "vs fuse ≥ 3x", fuse3),
        Row(
            f"{name}: re-read (page cache)",
            "MiB/s",
            figures.get(Figure.REREAD),
            True,
            "≥ 2 GB/s (1907 MiB/s)",
            reread_goal,
        ),
        Row(f"{name}: daemon peak RSS", "MiB", figures.get(Figure.PEAK_RSS), False),
    ]


def summary_for(name: str) -> Callable[[ReadResult], list[str]]:
    """The line below the table that says how section ``name`` was measured."""

    def summary(result: ReadResult) -> list[str]:
        residency = result.residency
        notes = [
            f"server {result.server or 'files'}",
            f"raw = {result.figures.raw_note or '-'}",
            f"resident {cell(residency.at_start)}->{cell(residency.at_end)}",
            f"CPU busy {cell(result.cpu.cpu_busy_share)}",
            f"load {cell(result.cpu.loadavg_1m_end)}",
        ]
        return [f"{name}: " + ", ".join(notes)]

    return summary


def server_note(result: ReadResult) -> list[str]:
    """The note that the S3 rows measure moto, when s3rver was missing."""
    return [] if result.server_note is None else [f"NOTE: {result.server_note}"]
