"""Tests of the summary of a check: references counted by kind and target, problems kept once,
the JSON form."""

from __future__ import annotations

import json

from refmount.check.summary import Summary
from refmount.model import Inline, Range, Whole


def test_references_are_counted_by_kind_and_by_target() -> None:
    summary = Summary("refs.json", "json")
    summary.add("a", Inline(b"abc"))
    summary.add("b", Range("/t", 10, 5))
    summary.add("c", Range("/t", 0, 4))
    summary.add("d", Whole("/w"))
    assert (summary.inline, summary.inline_bytes) == (1, 3)
    assert (summary.ranges, summary.range_bytes) == (2, 9)
    assert summary.whole == 1
    target = summary.targets["/t"]
    assert (target.references, target.end, target.end_key, target.first_key) == (2, 15, "b", "b")
    assert summary.targets["/w"].bytes is None  # a whole target of unknown size
    assert summary.total_bytes == 12


def test_a_problem_is_kept_once_and_makes_the_set_not_ok() -> None:
    summary = Summary("refs.json", "json")
    assert summary.ok
    summary.problem("k", "bad")
    summary.problem("k", "bad")
    summary.problem(None, "worse")
    assert [str(problem) for problem in summary.problems] == ["key 'k': bad", "worse"]
    assert not summary.ok


def test_the_json_form_is_serialisable() -> None:
    summary = Summary("refs.json", "json")
    summary.add("b", Range("/t", 0, 4))
    document = json.loads(json.dumps(summary.to_json()))
    assert document["ranges"] == {"count": 1, "bytes": 4}
    assert document["targets"][0]["url"] == "/t"
    assert "served_as_stored" not in document
