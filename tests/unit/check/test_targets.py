"""Tests of asking every target of a checked set: bounded concurrency, failures as problems."""

from __future__ import annotations

import trio

from refmount.check.summary import Summary, TargetInfo
from refmount.check.targets import ask_each_target
from refmount.errors import TargetReadError


def _summary(count: int) -> Summary:
    summary = Summary("refs.json", "json")
    for n in range(count):
        url = f"s3://b/{n}.nc"
        summary.targets[url] = TargetInfo(url, f"x/{n}")
    return summary


async def test_every_target_is_asked_a_few_at_a_time_with_progress() -> None:
    summary = _summary(10)
    running = peak = 0
    seen: list[tuple[int, int]] = []

    async def ask(target: TargetInfo) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.sleep(0.001)
        running -= 1
        target.size = 1

    await ask_each_target(summary, ask, "size", lambda done, total: seen.append((done, total)), 3)
    assert peak == 3
    assert all(target.size == 1 for target in summary.targets.values())
    assert seen[-1] == (10, 10)
    assert len(seen) == 10


async def test_a_target_that_cannot_answer_is_a_problem_named_by_its_first_key() -> None:
    summary = _summary(2)

    async def ask(target: TargetInfo) -> None:
        if target.url.endswith("1.nc"):
            raise TargetReadError(target.url, "404 not found")

    await ask_each_target(summary, ask, "version")
    assert [str(problem) for problem in summary.problems] == [
        "key 'x/1': cannot get the version of s3://b/1.nc: s3://b/1.nc: 404 not found"
    ]
