"""The report: the table of rows with their ratios and goals, the lines below it, and the JSON
document of every figure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bench.figures import Cell
from bench.goals import Row
from bench.tools import Tool

COLUMNS = {
    Tool.REFMOUNT: "refmount",
    Tool.CAT: "fsspec cat",
    Tool.FUSE: "fsspec.fuse",
    Tool.RAW: "raw",
    Tool.PLAIN: "plain",
    Tool.FLOOR: "floor",
    Tool.CFLOOR: "C floor",
    Tool.CFLOOR_MT: "C floor (mt)",
}
"""The value columns, in order: one per tool."""
RATIO_COLUMNS = {
    Tool.CAT: "x cat",
    Tool.FUSE: "x fuse",
    Tool.RAW: "x raw",
    Tool.FLOOR: "x floor",
    Tool.CFLOOR: "x C floor",
}
"""The ratio columns, in order: one per baseline."""
HEADER = ["figure", "unit", *COLUMNS.values(), *RATIO_COLUMNS.values(), "goal", "met"]
LEGEND = [
    "x columns: how many times better refmount is than that column "
    "(rate ratio for MiB/s and files/s, inverse for times and memory).",
    "floor: the same 1 MiB chunks served from memory by the least pyfuse3 filesystem"
    " (bench/fuse_floor.py), and on ls and local 4 KiB rows as many 4 KiB files as 'many';"
    " on remote first-byte rows, plus the raw first byte."
    " 'MISSED, floor too': the floor misses the goal as well, so no pyfuse3 daemon"
    " meets it here.",
]


def cell(value: Cell | bool | int) -> str:
    """A value as the table shows it: "-" for nothing, 3 significant digits or thousands."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        if value >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)[:28]


def ratio_cell(value: float | None) -> str:
    """A ratio as the table shows it: "2.50x", or "-" when unknown."""
    return "-" if value is None else f"{value:.2f}x"


def met_cell(row: Row) -> str:
    """Whether the row meets its goal: met, MISSED (and whether the floor does), "n/a" when a
    figure it needs is missing, "-" without a goal."""
    met = {True: "met", False: "MISSED", None: "-" if not row.goal else "n/a"}[row.met]
    if row.met is False and row.floor_met is False:
        met = "MISSED, floor too"
    return met


def table_lines(rows: Sequence[Row]) -> list[str]:
    """The table: a header, a rule, and one line per row, columns padded to their widest."""
    table = [HEADER]
    for row in rows:
        table.append(
            [
                row.figure,
                row.unit,
                *(cell(row.values.get(tool)) for tool in COLUMNS),
                *(ratio_cell(row.ratios.get(tool)) for tool in RATIO_COLUMNS),
                row.goal,
                met_cell(row),
            ]
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    lines = []
    for number, line in enumerate(table):
        lines.append("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)))
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    return lines


def write_json(path: Path, document: dict[str, object]) -> None:
    """Write every figure and ratio to ``path``."""
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
