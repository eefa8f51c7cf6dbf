"""The rows and goals of the read sections (local, HTTP, S3) built from figures."""

from __future__ import annotations

from bench.figures import Figure, ReadFigures
from bench.goals import Row
from bench.sections.read_rows import rows_for, summary_for
from bench.sections.reads import ReadResult
from bench.system import CpuShare, Residency
from bench.tools import Tool


def result_of(values: dict[Figure, dict[Tool, float]]) -> ReadResult:
    figures = ReadFigures(raw_note="os.pread, one thread")
    for figure, tools in values.items():
        for tool, value in tools.items():
            figures.record(figure, tool, value)
    return ReadResult(figures, [figures], Residency(at_start=1.0, at_end=0.5), CpuShare(0.25, 1, 2))


def row(rows: list[Row], title: str) -> Row:
    (found,) = [r for r in rows if r.figure == title]
    found.compute()
    return found


def test_local_sequential_rows_are_measured_against_the_c_floor_and_still_show_cat():
    rows = rows_for("local")(
        result_of(
            {
                Figure.SEQ_1: {
                    Tool.REFMOUNT: 910.0,
                    Tool.CAT: 2000.0,
                    Tool.CFLOOR: 1000.0,
                    Tool.FUSE: 100.0,
                    Tool.PLAIN: 9000.0,
                },
                Figure.SEQ_8: {Tool.REFMOUNT: 800.0, Tool.CFLOOR: 1000.0, Tool.FUSE: 100.0},
            }
        )
    )
    one = row(rows, "local: seq 1 MiB, 1 reader")
    assert one.goal == "vs C floor ≥ 0.9x, vs fuse ≥ 3x"
    assert one.met is True
    assert one.values[Tool.CAT] == 2000.0
    assert one.values[Tool.PLAIN] == 9000.0
    eight = row(rows, "local: seq 1 MiB, 8 readers")
    assert eight.values[Tool.CAT] == 2000.0  # cat with one reader
    assert eight.met is False  # 0.8x the C floor


def test_http_goals():
    rows = rows_for("http")(
        result_of(
            {
                Figure.SEQ_1: {Tool.REFMOUNT: 900.0, Tool.CAT: 1000.0, Tool.FUSE: 450.0},
                Figure.SEQ_8: {Tool.REFMOUNT: 990.0, Tool.FUSE: 400.0},
            }
        )
    )
    one = row(rows, "http: seq 1 MiB, 1 reader")
    assert (one.goal, one.met) == ("vs cat ≥ 0.9x, vs fuse ≥ 2x", True)
    eight = row(rows, "http: seq 1 MiB, 8 readers")
    assert (eight.goal, eight.met) == ("vs cat(1) ≥ 1x, vs fuse ≥ 2x", False)


def test_s3_goals():
    rows = rows_for("s3")(
        result_of(
            {
                Figure.SEQ_1: {Tool.REFMOUNT: 150.0, Tool.CAT: 100.0, Tool.FUSE: 50.0},
                Figure.SEQ_8: {Tool.REFMOUNT: 199.0, Tool.FUSE: 50.0},
                Figure.MANY_JSON: {Tool.REFMOUNT: 1000.0, Tool.CAT: 100.0, Tool.FUSE: 300.0},
                Figure.MANY_PARQUET: {Tool.REFMOUNT: 999.0, Tool.CAT: 100.0},
            }
        )
    )
    assert row(rows, "s3: seq 1 MiB, 1 reader").met is True
    assert row(rows, "s3: seq 1 MiB, 8 readers").met is False  # 1.99x cat(1)
    assert row(rows, "s3: 4 KiB in order (json)").met is True
    assert row(rows, "s3: 4 KiB in order (parquet)").goal == "vs cat ≥ 10x"
    assert row(rows, "s3: 4 KiB in order (parquet)").met is False


def test_cpu_rows_of_every_party_and_no_server_row_without_a_server():
    local = rows_for("local")(
        result_of({Figure.SEQ_READER_CPU: {Tool.REFMOUNT: 0.25, Tool.PLAIN: 0.2}})
    )
    assert row(local, "local: CPU per MiB (reader), seq 1 reader").values == {
        Tool.REFMOUNT: 0.25,
        Tool.PLAIN: 0.2,
    }
    assert not [r for r in local if "(server)" in r.figure]
    http = rows_for("http")(result_of({Figure.SEQ_SERVER_CPU: {Tool.CAT: 0.4}}))
    assert row(http, "http: CPU per MiB (server), seq 1 reader").values == {Tool.CAT: 0.4}


def test_the_summary_line():
    (line,) = summary_for("local")(result_of({}))
    assert line == (
        "local: server files, raw = os.pread, one thread, resident 1->0.5, CPU busy 0.25, load 2"
    )
