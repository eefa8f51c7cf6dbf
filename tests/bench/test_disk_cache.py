"""The disk cache section's arithmetic: its goals against the other readers, the medians of
the daemon's CPU, its rows and its notes."""

from __future__ import annotations

import pytest

from bench.sections.disk_cache import (
    COLD_GOAL,
    WARM_BIG_GOAL,
    WARM_MANY_GOAL,
    DiskCacheFigures,
    median_cpu,
    notes,
    ratio,
    rows,
)
from bench.sections.latency import ArrayFigures
from bench.tools import Tool


def figures(**rates: float | str) -> ArrayFigures:
    return ArrayFigures(512, dict(rates))


@pytest.mark.parametrize(
    ("warm", "met"),
    [
        (900.0, True),  # 0.9x local and 5x cold: both bounds exactly
        (899.0, False),  # under 0.9x local
        (None, None),
    ],
)
def test_the_warm_goal_takes_local_and_cold(warm: float | None, met: bool | None) -> None:
    assert WARM_BIG_GOAL(figures(local=1000.0, cold=180.0))({}, warm) is met
    assert WARM_BIG_GOAL(figures(local=1000.0, cold=191.0))({}, 950.0) is False  # under 5x cold


def test_a_cold_read_with_the_cache_may_take_a_tenth_more_time() -> None:
    check = COLD_GOAL(figures(cold=110.0))
    assert check({}, 100.0) is True  # 1.1 times the time
    assert check({}, 99.9) is False
    assert COLD_GOAL(figures(cold="RuntimeError: x"))({}, 100.0) is None


def test_the_4_kib_goal_is_nine_tenths_of_local() -> None:
    assert WARM_MANY_GOAL(figures(local=2000.0))({}, 1800.0) is True
    assert WARM_MANY_GOAL(figures(local=2000.0))({}, 1799.0) is False


def test_cpu_medians_take_the_rounds_that_measured_each_reader() -> None:
    rounds = [
        {"big": {"warm": 1.0, "local": 0.5}},
        {"big": {"warm": 3.0}},
        {"big": {"warm": 2.0, "local": 1.5}},
    ]
    assert median_cpu(rounds) == {"big": {"warm": 2.0, "local": 1.0}}


def test_rows_and_notes_show_each_reader_and_ratio() -> None:
    result = DiskCacheFigures(20.0, 1)
    result.arrays = {
        "big": figures(local=1000.0, cold=100.0, cold_cache=95.0, warm=950.0),
        "many": figures(local=2000.0, cold=1500.0, cold_cache="OSError: x", warm=1700.0),
    }
    result.cpu = {"big": {"warm": 1.5}}
    made = rows(result)
    assert [row.values[Tool.REFMOUNT] for row in made] == [950.0, 95.0, 1700.0]
    for row in made:
        row.compute()
    assert [row.met for row in made] == [True, True, False]
    assert ratio(result.arrays["big"], "warm", "local") == 0.95
    assert ratio(result.arrays["many"], "cold_cache", "cold") is None
    text = "\n".join(notes(result))
    assert "warm/local 0.95x, warm/cold 9.50x, cold_cache/cold 0.95x" in text
    assert "daemon CPU ms/chunk: warm 1.5" in text
    assert "cold_cache OSError: x" in text
    assert rows(DiskCacheFigures(20.0, 1)) == []
    result.each_round = [result.arrays]
    assert result.to_json()["each_round"] == [
        {name: figures.rates for name, figures in result.arrays.items()}
    ]
