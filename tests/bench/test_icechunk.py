"""The icechunk section's arithmetic: its goals (ready, RSS in megabytes, reads against
zarr-python), the medians of rounds, its rows and its notes."""

from __future__ import annotations

import pytest

from bench.common import MIB
from bench.sections.icechunk import (
    READY_GOAL,
    RSS_GOAL,
    IcechunkFigures,
    MountFigures,
    ReadFigures,
    median_figures,
    notes,
    rate_goal,
    rows,
)
from bench.tools import Tool


@pytest.mark.parametrize(("seconds", "met"), [(4.99, True), (5.0, False), (None, None)])
def test_ready_is_under_five_seconds(seconds: float | None, met: bool | None):
    assert READY_GOAL({}, seconds) is met


@pytest.mark.parametrize(
    ("mib", "met"),
    [
        (286.0, True),  # 299.9 MB
        (286.2, False),  # 300.1 MB: the goal is in megabytes, the figure in MiB
        (None, None),
    ],
)
def test_rss_is_under_300_megabytes(mib: float | None, met: bool | None):
    assert RSS_GOAL({}, mib) is met


@pytest.mark.parametrize(
    ("mine", "zarr", "met"),
    [
        (100.0, 100.0, True),
        (99.0, 100.0, False),
        (None, 100.0, None),
        (100.0, "RuntimeError: no", None),  # zarr-python failed: unknown, not met
    ],
)
def test_the_read_goal_is_at_least_zarr_pythons_rate(
    mine: float | None, zarr: float | str, met: bool | None
):
    figures = ReadFigures(512, {"zarr_default": zarr})
    assert rate_goal(figures)({}, mine) is met


def test_medians_take_the_rounds_that_measured():
    rounds = [
        ReadFigures(8, {"refmount": 10.0, "zarr_default": "Error"}, {"refmount": 1.0}, 2.0),
        ReadFigures(8, {"refmount": 30.0, "zarr_default": 5.0}, {"refmount": 3.0}, None, 4.0),
        ReadFigures(8, {"refmount": 20.0, "zarr_default": 7.0}, {}, 4.0, 8.0, 1.0),
    ]
    merged = median_figures(rounds)
    assert merged.rates == {"refmount": 20.0, "zarr_default": 6.0}
    assert merged.server_cpu_ms_per_chunk == {"refmount": 2.0}
    assert merged.daemon_cpu_ms_per_chunk == 3.0
    assert merged.bytes_prefetched == 6.0
    assert merged.prefetch_waits == 1.0


def test_a_reader_that_always_failed_keeps_its_error():
    merged = median_figures([ReadFigures(8, {"refmount": "RuntimeError: x"})])
    assert merged.rates == {"refmount": "RuntimeError: x"}


def figures() -> IcechunkFigures:
    result = IcechunkFigures(20.0, 1, MountFigures(1_000_000, 6.0, 2.5, 180.0, 210.0))
    result.targets["http"] = ReadFigures(
        512, {"refmount": 300.0, "zarr_default": 150.0, "refmount_own_engines": 400.0}
    )
    result.targets["http"].bytes_prefetched = 64.0 * MIB
    result.servers["http"] = "nginx"
    return result


def test_rows_are_the_mount_and_each_target():
    made = rows(figures())
    for row in made:
        row.compute()
    assert [row.figure for row in made] == [
        "Icechunk 1,000,000 virtual chunks: ready",
        "Icechunk 1,000,000 virtual chunks: daemon peak RSS",
        "icechunk http +20 ms: 1 MiB virtual chunks, cat in order",
    ]
    assert [row.values[Tool.REFMOUNT] for row in made] == [2.5, 210.0, 300.0]
    assert [row.met for row in made] == [True, True, True]


def test_a_failed_mount_is_a_row_with_its_error():
    result = IcechunkFigures(20.0, 1, "RuntimeError: exited with 1")
    made = rows(result)
    assert [row.values[Tool.REFMOUNT] for row in made] == ["RuntimeError: exited with 1"] * 2
    for row in made:
        row.compute()
    assert [row.met for row in made] == [None, None]


def test_notes_give_each_reader_and_the_ratio():
    lines = notes(figures())
    assert "refmount 300" in lines[2]
    assert "zarr_default 150" in lines[2]
    assert "refmount_own_engines 400" in lines[2]
    assert "ratio 2.00x" in lines[2]
    assert "MiB prefetched 64" in lines[2]
    assert "1,000,000 chunks" in lines[3]


def test_the_json_has_every_figure():
    document = figures().to_json()
    assert document["mount"] == {
        "chunks": 1_000_000,
        "build_s": 6.0,
        "ready_s": 2.5,
        "vmrss_mib": 180.0,
        "vmhwm_mib": 210.0,
    }
    assert document["http"] == {
        "chunks": 512,
        "refmount": 300.0,
        "zarr_default": 150.0,
        "refmount_own_engines": 400.0,
        "server_cpu_ms_per_chunk": {},
        "daemon_cpu_ms_per_chunk": None,
        "bytes_prefetched": 64.0 * MIB,
        "prefetch_waits": None,
    }
