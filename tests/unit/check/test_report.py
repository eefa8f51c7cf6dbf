"""Tests of the readable report of a check: a set that cannot be read, a malformed one, and
the counts of one that loaded."""

from __future__ import annotations

from refmount.check.report import format_summary
from refmount.check.summary import UNREADABLE, Summary
from refmount.model import Range, Whole


def test_an_unreadable_set_says_so_and_lists_its_problem() -> None:
    summary = Summary("refs.json", UNREADABLE, malformed=True)
    summary.problem(None, "cannot read: gone")
    lines = format_summary(summary).splitlines()
    assert lines[0] == "refs.json: cannot be read, so it cannot be mounted"
    assert "malformed" not in "\n".join(lines)
    assert lines[-2:] == ["problems    1", "  cannot read: gone"]


def test_a_malformed_set_cannot_be_mounted() -> None:
    summary = Summary("refs.parq", "parquet", malformed=True)
    assert format_summary(summary).splitlines()[:2] == [
        "refs.parq: Parquet reference set",
        "malformed: it cannot be mounted",
    ]


def test_a_loaded_set_counts_keys_targets_and_bytes() -> None:
    summary = Summary("refs.json", "json", explicit_keys=3, chunk_keys=2)
    summary.add("a/0", Range("/t", 0, 2048))
    summary.add("a/1", Whole("/w"))
    text = format_summary(summary)
    assert "keys        3 explicit, of which 2 are array chunks" in text
    assert "targets     2" in text
    assert "1 whole-target (size unknown; --sizes asks the targets)" in text
    assert "+ whole targets of unknown size" in text
    assert text.endswith("problems    none")
