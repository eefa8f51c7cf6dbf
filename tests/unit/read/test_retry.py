"""Tests of retrying a target request: what is tried again, the delays, what is counted."""

from __future__ import annotations

import errno

import pytest
import trio
import trio.testing

from refmount.config import RetryConfig
from refmount.errors import (
    ShortReadError,
    TargetAccessError,
    TargetReadError,
)
from refmount.read.retry import Retrier

POLICY = RetryConfig(retries=3, timeout=1.0, backoff_initial=0.1, backoff_max=1.0)


async def test_retryable_failures_are_tried_again_after_the_jittered_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits: list[float] = []

    def jitter(limit: float) -> float:
        limits.append(limit)
        return limit

    retrier = Retrier(POLICY, jitter)
    answers: list[Exception | bytes] = [
        TargetReadError("u", "503", retryable=True),
        ShortReadError("u", 10, 4),
        b"0123456789",
    ]
    started = trio.current_time()

    async def request() -> bytes:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert await retrier.run("u", request, "reading") == b"0123456789"
    assert limits == [0.1, 0.2]
    assert trio.current_time() - started == pytest.approx(0.3)
    assert (retrier.retries, retrier.failures) == (2, 0)


async def test_the_last_failure_names_the_url_what_failed_and_the_attempts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    retrier = Retrier(POLICY, lambda limit: 0.0)

    async def never() -> bytes:
        await trio.sleep_forever()
        raise AssertionError

    with pytest.raises(TargetReadError) as caught:
        await retrier.run("s3://b/o", never, "reading")
    message = str(caught.value)
    assert "s3://b/o" in message
    assert "reading: no answer within 1 s" in message
    assert "after 4 attempts" in message
    assert (retrier.retries, retrier.failures) == (3, 1)


async def test_a_refused_target_is_never_tried_again() -> None:
    retrier = Retrier(POLICY, lambda limit: 0.0)
    calls: list[None] = []

    async def refused() -> bytes:
        calls.append(None)
        raise TargetAccessError("/etc/x", "outside the local roots")

    with pytest.raises(TargetAccessError) as caught:
        await retrier.run("/etc/x", refused, "reading")
    assert caught.value.errno == errno.EACCES
    assert len(calls) == 1
    assert (retrier.retries, retrier.failures) == (0, 1)
