"""The goal arithmetic: ratios to each baseline, goal checks, and the floor's verdict."""

from __future__ import annotations

import pytest

from bench.figures import Cell
from bench.goals import Row, absolute, all_of, at_least, ratios_of
from bench.tools import Tool


def test_rates_are_compared_as_ratios_and_times_inversely():
    values = {Tool.REFMOUNT: 300.0, Tool.CAT: 100.0, Tool.FUSE: 600.0}
    assert ratios_of(values, Tool.REFMOUNT, higher_is_better=True)[Tool.CAT] == 3.0
    assert ratios_of(values, Tool.REFMOUNT, higher_is_better=True)[Tool.FUSE] == 0.5
    assert ratios_of(values, Tool.REFMOUNT, higher_is_better=False)[Tool.CAT] == pytest.approx(
        1 / 3
    )


def test_missing_zero_and_error_values_give_no_ratio():
    values: dict[Tool, Cell] = {
        Tool.REFMOUNT: 5.0,
        Tool.CAT: 0.0,
        Tool.FUSE: "RuntimeError: x",
        Tool.RAW: None,
    }
    ratios = ratios_of(values, Tool.REFMOUNT, higher_is_better=True)
    assert ratios == {
        Tool.CAT: None,
        Tool.FUSE: None,
        Tool.RAW: None,
        Tool.FLOOR: None,
        Tool.CFLOOR: None,
    }


def test_at_least_is_inclusive_and_unknown_without_the_baseline():
    check = at_least(Tool.CAT, 1.5)
    assert check({Tool.CAT: 1.5}, None) is True
    assert check({Tool.CAT: 1.49}, None) is False
    assert check({Tool.CAT: None}, None) is None


def test_all_of_is_missed_if_one_is_missed_even_when_another_is_unknown():
    check = all_of(at_least(Tool.CAT, 1.0), at_least(Tool.FUSE, 3.0))
    assert check({Tool.CAT: 0.5, Tool.FUSE: None}, None) is False
    assert check({Tool.CAT: 2.0, Tool.FUSE: None}, None) is None
    assert check({Tool.CAT: 2.0, Tool.FUSE: 3.0}, None) is True


def test_absolute_goals_look_at_the_rows_own_value():
    check = absolute(lambda v: v < 1.0)
    assert check({}, 0.5) is True
    assert check({}, 1.0) is False
    assert check({}, None) is None


def test_a_row_computes_its_ratios_and_whether_refmount_and_the_floor_meet_the_goal():
    row = Row(
        "local: seq 1 MiB, 1 reader",
        "MiB/s",
        {Tool.REFMOUNT: 900.0, Tool.CAT: 1000.0, Tool.FLOOR: 950.0, Tool.CFLOOR: 1000.0},
        True,
        "vs C floor ≥ 0.95x",
        at_least(Tool.CFLOOR, 0.95),
    )
    row.compute()
    assert row.ratios[Tool.CAT] == 0.9
    assert row.ratios[Tool.CFLOOR] == 0.9
    assert row.met is False
    assert row.floor_met is True


def test_a_row_without_a_goal_is_neither_met_nor_missed():
    row = Row("huge: ls -f all", "s", {Tool.REFMOUNT: 2.0}, False)
    row.compute()
    assert row.met is None
    assert row.floor_met is None
    assert row.to_json()["ratios"] == dict.fromkeys(row.ratios)
