"""The table: how values, missing values, errors, ratios and verdicts are shown."""

from __future__ import annotations

from bench.goals import Row, at_least
from bench.report import HEADER, cell, met_cell, ratio_cell, table_lines
from bench.tools import Tool


def test_cells_show_numbers_missing_values_and_errors():
    assert cell(None) == "-"
    assert cell(1234.5) == "1,234"
    assert cell(100) == "100"
    assert cell(0.012345) == "0.0123"
    assert cell(True) == "True"
    assert cell("did not finish in 60 s because it was slow") == "did not finish in 60 s becau"


def test_ratio_cells():
    assert ratio_cell(None) == "-"
    assert ratio_cell(2.0) == "2.00x"
    assert ratio_cell(0.456) == "0.46x"


def verdict(values: dict[Tool, float | str | None], goal: str = "vs cat ≥ 1x") -> str:
    row = Row("f", "MiB/s", values, True, goal, at_least(Tool.CAT, 1.0) if goal else None)
    row.compute()
    return met_cell(row)


def test_verdicts():
    assert verdict({Tool.REFMOUNT: 2.0, Tool.CAT: 1.0}) == "met"
    assert verdict({Tool.REFMOUNT: 0.5, Tool.CAT: 1.0}) == "MISSED"
    assert verdict({Tool.REFMOUNT: 0.5, Tool.CAT: 1.0, Tool.FLOOR: 0.6}) == "MISSED, floor too"
    assert verdict({Tool.REFMOUNT: 0.5, Tool.CAT: 1.0, Tool.FLOOR: 2.0}) == "MISSED"
    assert verdict({Tool.REFMOUNT: 2.0, Tool.CAT: "RuntimeError: x"}) == "n/a"
    assert verdict({Tool.REFMOUNT: 2.0}, goal="") == "-"


def test_the_table_aligns_columns_and_shows_errors_and_gaps():
    row = Row(
        "local: seq 1 MiB, 1 reader",
        "MiB/s",
        {Tool.REFMOUNT: 500.0, Tool.CAT: 250.0, Tool.FUSE: "OSError: no fusepy"},
        True,
        "vs cat ≥ 1x",
        at_least(Tool.CAT, 1.0),
    )
    row.compute()
    header, rule, line = table_lines([row])
    assert header.split()[:3] == ["figure", "unit", "refmount"]
    assert len(HEADER) == 17
    assert len(header) == len(rule) == len(line)
    columns = [text.strip() for text in _split(line, rule)]
    assert columns == [
        "local: seq 1 MiB, 1 reader",
        "MiB/s",
        "500",
        "250",
        "OSError: no fusepy",
        "-",
        "-",
        "-",
        "-",
        "-",
        "2.00x",
        "-",
        "-",
        "-",
        "-",
        "vs cat ≥ 1x",
        "met",
    ]


def _split(line: str, rule: str) -> list[str]:
    """Cut ``line`` at the column positions of the rule of dashes."""
    columns, start = [], 0
    for dashes in rule.split("  "):
        columns.append(line[start : start + len(dashes)])
        start += len(dashes) + 2
    return columns
