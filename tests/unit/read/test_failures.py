"""Tests of failed reads: the errors that name the file, the ranges that failed lately."""

from __future__ import annotations

import pytest

from refmount.errors import (
    RemoteAccessError,
    RemoteChangedError,
    RemoteError,
    TargetAccessError,
    TargetChangedError,
    TargetReadError,
)
from refmount.read.failures import RecentFailures, target_error


def test_recent_failures_forget_the_oldest_and_the_expired() -> None:
    now = [0.0]
    failures = RecentFailures(1.0, 2, lambda: now[0])
    error = TargetReadError("k", "u", "boom")
    for start in range(3):
        failures.remember("u", start * 10, start * 10 + 10, error)
    assert failures.covering("u", 0, 5) is None  # the oldest went
    assert failures.covering("u", 12, 18) is error
    assert failures.covering("u", 15, 25) is None  # not inside one range
    assert failures.covering("v", 12, 18) is None
    now[0] = 1.0
    assert failures.covering("u", 22, 28) is None


@pytest.mark.parametrize(
    ("remote", "kind", "words"),
    [
        (RemoteError("s3://b/o", "timed out"), TargetReadError, "reading: timed out"),
        (RemoteAccessError("s3://b/o", "denied"), TargetAccessError, "denied"),
        (RemoteChangedError("s3://b/o", "ETag a", "ETag b"), TargetChangedError, "pinned ETag a"),
    ],
)
def test_a_remote_error_becomes_the_target_error_naming_the_key(
    remote: RemoteError, kind: type[Exception], words: str
) -> None:
    error = target_error("x/0.0", "s3://b/o", "reading", remote)
    assert type(error) is kind
    assert "x/0.0" in str(error)
    assert "s3://b/o" in str(error)
    assert words in str(error)
