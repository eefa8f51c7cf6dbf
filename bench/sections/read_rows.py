"""The table rows of a read section and its goals, and the lines below the table that say
under which conditions it was measured."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.common import MIB
from bench.figures import Figure, number
from bench.goals import Check, Row, absolute, all_of, at_least
from bench.report import cell
from bench.sections.reads import ReadResult
from bench.tools import Tool

FUSE_GOAL = 3.0
"""Every row with an fsspec.fuse value: at least this many times better."""
FUSE_GOAL_HTTP_1MIB = 2.0
"""On 1 MiB chunks over loopback HTTP, where fsspec.fuse already reaches about 0.37x of cat."""


@dataclass(frozen=True)
class Goal:
    """A row's goal: its text in the table and its check."""

    text: str
    check: Check


def sequential_goals(name: str) -> tuple[Goal, Goal]:
    """The goals of the 1 MiB rows in order, one reader and 8 readers, of target ``name``: on
    local files against the single-threaded C floor with the same reader, remotely against
    in-process cat (with one reader for the 8-reader row), and against fsspec.fuse."""
    fuse_factor = FUSE_GOAL_HTTP_1MIB if name == "http" else FUSE_GOAL
    fuse = at_least(Tool.FUSE, fuse_factor)
    fuse_text = f"vs fuse ≥ {fuse_factor:g}x"
    if name == "local":
        floor = at_least(Tool.CFLOOR, 0.9)
        text = f"vs C floor ≥ 0.9x, {fuse_text}"
        return Goal(text, all_of(floor, fuse)), Goal(text, all_of(floor, fuse))
    one, eight = {"http": (0.9, 1.0), "s3": (1.5, 2.0)}.get(name, (1.0, 1.0))
    return (
        Goal(f"vs cat ≥ {one:g}x, {fuse_text}", all_of(at_least(Tool.CAT, one), fuse)),
        Goal(f"vs cat(1) ≥ {eight:g}x, {fuse_text}", all_of(at_least(Tool.CAT, eight), fuse)),
    )


def rows_for(name: str) -> Callable[[ReadResult], list[Row]]:
    """The rows of the read section ``name`` ("local", "http" or "s3")."""

    def rows(result: ReadResult) -> list[Row]:
        return [
            *sequential_rows(name, result),
            *many_rows(name, result),
            *other_rows(name, result),
            *cpu_rows(name, result),
        ]

    return rows


def sequential_rows(name: str, result: ReadResult) -> list[Row]:
    """Ready, and the 1 MiB chunks read in order by one reader (plain, tuned) and by 8."""
    figures = result.figures
    one, eight_goal = sequential_goals(name)
    tuned = figures.get(Figure.SEQ_1)
    tuned_values = figures.get(Figure.SEQ_1_TUNED)
    for tool in (Tool.REFMOUNT, Tool.FLOOR, Tool.CFLOOR, Tool.CFLOOR_MT):
        tuned[tool] = tuned_values.get(tool)
    eight = figures.get(Figure.SEQ_8)
    eight[Tool.CAT] = figures.get(Figure.SEQ_1).get(Tool.CAT)
    return [
        Row(f"{name}: ready (big JSON)", "s", figures.get(Figure.READY), False),
        Row(f"{name}: seq 1 MiB, 1 reader", "MiB/s", figures.get(Figure.SEQ_1), True, *_goal(one)),
        Row(f"{name}: seq 1 MiB, 1 reader, -o tune_kernel", "MiB/s", tuned, True, *_goal(one)),
        Row(f"{name}: seq 1 MiB, 8 readers", "MiB/s", eight, True, *_goal(eight_goal)),
    ]


def _goal(goal: Goal) -> tuple[str, Check]:
    return goal.text, goal.check


def many_rows(name: str, result: ReadResult) -> list[Row]:
    """The 4 KiB files of the many set in order (JSON, Parquet) and the time to mount them."""
    figures = result.figures
    many_goal = 10.0 if name == "s3" else 1.0
    fuse = at_least(Tool.FUSE, FUSE_GOAL)
    rows = []
    for fmt, files, ready in (
        ("json", Figure.MANY_JSON, Figure.READY_MANY_JSON),
        ("parquet", Figure.MANY_PARQUET, Figure.READY_MANY_PARQUET),
    ):
        check: Check = at_least(Tool.CAT, many_goal)
        goal = f"vs cat ≥ {many_goal:g}x"
        if fmt == "json":  # fsspec.fuse reads the JSON set only
            check, goal = all_of(check, fuse), goal + f", vs fuse ≥ {FUSE_GOAL:g}x"
        values = figures.get(files)
        rows.append(Row(f"{name}: 4 KiB in order ({fmt})", "files/s", values, True, goal, check))
        rows.append(Row(f"{name}: ready ({fmt} 'many')", "s", figures.get(ready), False))
    return rows


def other_rows(name: str, result: ReadResult) -> list[Row]:
    """Random reads, CPU per MiB of the daemon, the first byte, the re-read and memory."""
    figures = result.figures
    fuse = at_least(Tool.FUSE, FUSE_GOAL)
    reread_fuse = FUSE_GOAL_HTTP_1MIB if name == "http" else FUSE_GOAL
    ttfb = figures.get(Figure.TTFB)
    floor_ttfb, raw_ttfb = number(ttfb.get(Tool.FLOOR)), number(ttfb.get(Tool.RAW))
    if name != "local" and floor_ttfb is not None:
        # no daemon answers before the target does: the floor plus the raw first byte
        ttfb[Tool.FLOOR] = None if raw_ttfb is None else floor_ttfb + raw_ttfb
    reread_goal = all_of(absolute(lambda v: v >= 2e9 / MIB), at_least(Tool.FUSE, reread_fuse))
    fuse_text = f"vs fuse ≥ {FUSE_GOAL:g}x"
    return [
        Row(
            f"{name}: random 4 KiB pread",
            "ms/read",
            figures.get(Figure.RANDOM),
            False,
            fuse_text,
            fuse,
        ),
        Row(f"{name}: CPU per MiB, seq 1 reader", "ms", figures.get(Figure.SEQ_CPU), False),
        Row(f"{name}: first byte, cold chunk", "ms", ttfb, False, fuse_text, fuse),
        Row(
            f"{name}: re-read (page cache)",
            "MiB/s",
            figures.get(Figure.REREAD),
            True,
            f"≥ 2 GB/s (1907 MiB/s), vs fuse ≥ {reread_fuse:g}x",
            reread_goal,
        ),
        Row(f"{name}: daemon peak RSS", "MiB", figures.get(Figure.PEAK_RSS), False),
    ]


def cpu_rows(name: str, result: ReadResult) -> list[Row]:
    """CPU per MiB of the other parties of the 1-reader loop: the reading process and (on a
    remote target whose server runs apart from the benchmark) the server."""
    figures = result.figures
    rows = [
        Row(
            f"{name}: CPU per MiB (reader), seq 1 reader",
            "ms",
            figures.get(Figure.SEQ_READER_CPU),
            False,
        ),
    ]
    server = figures.get(Figure.SEQ_SERVER_CPU)
    if server:
        rows.append(Row(f"{name}: CPU per MiB (server), seq 1 reader", "ms", server, False))
    return rows


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
