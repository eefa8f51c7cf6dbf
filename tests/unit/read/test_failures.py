"""Tests of the ranges whose reads failed lately."""

from __future__ import annotations

from refmount.errors import TargetReadError
from refmount.read.failures import RecentFailures


def test_recent_failures_forget_the_oldest_and_the_expired() -> None:
    now = [0.0]
    failures = RecentFailures(1.0, 2, lambda: now[0])
    error = TargetReadError("u", "boom")
    for start in range(3):
        failures.remember("u", start * 10, start * 10 + 10, error)
    assert failures.covering("u", 0, 5) is None  # the oldest went
    assert failures.covering("u", 12, 18) is error
    assert failures.covering("u", 15, 25) is None  # not inside one range
    assert failures.covering("v", 12, 18) is None
    now[0] = 1.0
    assert failures.covering("u", 22, 28) is None
