"""The read figures: recording, failures, the median of rounds and the JSON they make."""

from __future__ import annotations

from bench.figures import Failure, Figure, ReadFigures, Verification, median_of_rounds, number
from bench.tools import Tool


def round_of(seq: dict[Tool, float], verified: int = 8, mismatches: int = 0) -> ReadFigures:
    figures = ReadFigures(raw_note="os.pread, one thread")
    for tool, value in seq.items():
        figures.record(Figure.SEQ_1, tool, value)
    figures.verify[Tool.REFMOUNT] = Verification(verified, mismatches)
    return figures


def test_the_median_of_three_rounds_is_the_middle_value_of_each_tool():
    rounds = [
        round_of({Tool.REFMOUNT: 300.0, Tool.CAT: 1000.0}),
        round_of({Tool.REFMOUNT: 100.0, Tool.CAT: 3000.0}),
        round_of({Tool.REFMOUNT: 200.0, Tool.CAT: 2000.0}),
    ]
    merged = median_of_rounds(rounds)
    assert merged.values[Figure.SEQ_1] == {Tool.REFMOUNT: 200.0, Tool.CAT: 2000.0}


def test_the_median_of_two_rounds_is_their_mean():
    merged = median_of_rounds([round_of({Tool.CAT: 10.0}), round_of({Tool.CAT: 20.0})])
    assert merged.values[Figure.SEQ_1][Tool.CAT] == 15.0


def test_a_tool_measured_in_some_rounds_only_gets_the_median_of_those():
    merged = median_of_rounds(
        [round_of({Tool.CAT: 10.0}), round_of({Tool.CAT: 30.0, Tool.FUSE: 7.0})]
    )
    assert merged.values[Figure.SEQ_1] == {Tool.CAT: 20.0, Tool.FUSE: 7.0}


def test_verification_counts_are_summed_over_rounds():
    merged = median_of_rounds([round_of({}, 8, 0), round_of({}, 8, 1), round_of({}, 4, 2)])
    assert merged.verify[Tool.REFMOUNT] == Verification(20, 3)


def test_a_failure_is_shown_only_where_no_round_measured_the_figure():
    failed = round_of({})
    failed.fail(Figure.SEQ_1_TUNED, Tool.REFMOUNT, Failure("RuntimeError: not tuned"))
    failed.fail("big", Tool.FUSE, Failure("RuntimeError: no fusepy"))
    measured = round_of({})
    measured.record(Figure.SEQ_1_TUNED, Tool.REFMOUNT, 500.0)
    merged = median_of_rounds([failed, measured])
    assert merged.get(Figure.SEQ_1_TUNED) == {Tool.REFMOUNT: 500.0}
    only_failed = median_of_rounds([failed])
    assert only_failed.get(Figure.SEQ_1_TUNED) == {Tool.REFMOUNT: "RuntimeError: not tuned"}
    assert merged.failures["big"] == {Tool.FUSE: Failure("RuntimeError: no fusepy")}


def test_the_json_keeps_the_figure_and_tool_names_and_errors():
    figures = round_of({Tool.REFMOUNT: 1.5})
    figures.fail("cat", Tool.CAT, Failure.of(ValueError("bad")))
    document = figures.to_json()
    assert document["seq_1mib_1_reader_mib_s"] == {"refmount": 1.5}
    assert document["cat"] == {"cat": {"error": "ValueError: bad"}}
    assert document["verify"] == {"refmount": {"verified": 8, "mismatches": 0}}
    assert document["raw_note"] == "os.pread, one thread"


def test_failure_messages_are_cut_to_300_characters():
    assert len(Failure.of(RuntimeError("x" * 1000)).message) == 300


def test_only_numbers_are_numbers():
    assert number(3) == 3.0
    assert number(2.5) == 2.5
    assert number(True) is None
    assert number("did not finish in 60 s") is None
    assert number(None) is None
