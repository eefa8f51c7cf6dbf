"""Tests of recording targets' versions and comparing them with a pins file."""

from __future__ import annotations

import math

from refmount.check.summary import Summary, TargetInfo
from refmount.check.versions import compare_with_pins, record_versions
from refmount.errors import TargetReadError
from refmount.store.pins import Pin

NOW = {
    "s3://b/a.nc": Pin('"a2"', None, 10, 0.0),
    "s3://b/b.nc": Pin('"b1"', None, 20, 0.0),
    "s3://b/c.nc": Pin('"c1"', None, 30, 0.0),
}


def _summary() -> Summary:
    summary = Summary("refs.json", "json")
    for url in (*NOW, "s3://b/gone.nc"):
        summary.targets[url] = TargetInfo(url, f"k/{url[-4]}")
    return summary


async def _version_of(url: str) -> Pin:
    if url not in NOW:
        raise TargetReadError(url, "404 not found")
    return NOW[url]


async def test_versions_are_recorded_for_every_target_that_answers() -> None:
    summary = _summary()
    assert await record_versions(summary, _version_of) == NOW
    assert [problem.key for problem in summary.problems] == ["k/e"]


async def test_a_target_changed_since_the_record_is_a_problem_naming_both_versions() -> None:
    summary = _summary()
    recorded = {
        "s3://b/a.nc": Pin('"a1"', None, 10, -math.inf),
        "s3://b/b.nc": Pin('"b1"', None, 20, -math.inf),
        "s3://b/gone.nc": Pin('"g1"', None, 5, -math.inf),
    }
    await compare_with_pins(summary, recorded, "pins.json", _version_of)
    assert [str(problem) for problem in summary.problems] == [
        "key 'k/e': cannot get the version of s3://b/gone.nc: s3://b/gone.nc: 404 not found",
        "key 'k/a': s3://b/a.nc changed since pins.json was recorded: recorded ETag \"a1\", "
        'now ETag "a2"',
    ]
    assert summary.warnings == [
        "1 of 4 targets are not in pins.json: a mount pins them at their first use"
    ]
