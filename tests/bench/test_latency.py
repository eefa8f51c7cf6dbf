"""The latency section's arithmetic: its goals against the other readers, the medians of rounds,
its rows and its notes table."""

from __future__ import annotations

import pytest

from bench.sections.latency import (
    BIG_GOAL,
    MANY_GOAL,
    ArrayFigures,
    LatencyFigures,
    median_figures,
    notes,
    rows,
)
from bench.tools import Tool


def big(**rates: float | str) -> ArrayFigures:
    return ArrayFigures(512, dict(rates))


@pytest.mark.parametrize(
    ("mine", "met"),
    [
        (900.0, True),  # 0.9x no delay, 1.0x zarr c64, 10x cat: every bound exactly
        (899.0, False),  # under 0.9x no delay
        (None, None),  # refmount has no figure
    ],
)
def test_the_1_mib_goal_takes_every_reader_it_names(mine: float | None, met: bool | None):
    figures = big(refmount_no_delay=1000.0, zarr_c64=900.0, cat_one_key=90.0)
    assert BIG_GOAL(figures)({}, mine) is met


def test_a_goal_is_unknown_without_a_reader_and_missed_if_another_bound_is_missed():
    check = BIG_GOAL(big(refmount_no_delay=1000.0, zarr_c64="RuntimeError: x"))
    assert check({}, 950.0) is None  # zarr failed and cat is missing: unknown
    assert check({}, 500.0) is False  # under 0.9x no delay: missed whatever the rest


def test_the_4_kib_goal_has_an_absolute_floor_too():
    figures = ArrayFigures(20_000, {"zarr_c64": 1000.0})
    assert MANY_GOAL(figures)({}, 7200.0) is True
    assert MANY_GOAL(figures)({}, 7199.0) is False  # twice zarr, but under 1.5 x 4 800
    assert MANY_GOAL(ArrayFigures(20_000, {"zarr_c64": 4000.0}))({}, 7200.0) is False


def test_medians_skip_failed_rounds_and_keep_an_error_when_every_round_failed():
    rounds = [
        {"big": ArrayFigures(8, {"refmount": 100.0, "gdal": "TimeoutError"}, 2.0, 1)},
        {"big": ArrayFigures(8, {"refmount": 300.0, "gdal": "TimeoutError"}, 4.0, 3)},
        {"big": ArrayFigures(8, {"refmount": "OSError: x", "gdal": "TimeoutError"}, None)},
    ]
    merged = median_figures(rounds)["big"]
    assert merged.rates == {"refmount": 200.0, "gdal": "TimeoutError"}
    assert (merged.daemon_cpu_ms_per_chunk, merged.prefetch_waits) == (3.0, 2)


def test_rows_count_refmount_against_cat_and_the_notes_show_every_reader():
    result = LatencyFigures(20.0, 1)
    result.targets["http"] = {
        "big": big(refmount=950.0, refmount_no_delay=1000.0, zarr_c64=900.0, cat_one_key=40.0),
        "many": ArrayFigures(100, {"refmount": 3000.0, "zarr_c64": 1000.0}),
    }
    made = rows(result)
    for row in made:
        row.compute()
    assert [row.figure for row in made] == [
        "http +20 ms: 1 MiB chunks, cat in order",
        "http +20 ms: 4 KiB chunks, cat in order",
    ]
    assert made[0].ratios[Tool.CAT] == pytest.approx(950 / 40)
    assert made[0].met is True
    assert made[1].met is False  # 3x zarr, but under 7 200 files/s
    table = notes(result)
    assert "refmount_no_delay" in table[2]
    assert "zarr_c64" in table[2]
    assert table[3].split()[:5] == ["http", "big", "(512,", "MiB/s)", "950"]
