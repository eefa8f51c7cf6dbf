"""Retrying a target request: the per-request deadline, which failures are worth another
attempt (the error says: ``TargetError.retryable``), the backoff between attempts, and the
last error, saying what failed and how many attempts were made."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from refmount.config import RetryConfig
from refmount.errors import TargetError, TargetReadError

log = logging.getLogger(__name__)

T = TypeVar("T")


def _accept(answer: object) -> None:
    """Take any answer (the check of a request that has none)."""


class Retrier:
    """Runs requests under ``policy`` (timeout, retries, backoff) and counts what happened.

    ``jitter(limit)`` picks each delay below the backoff limit (full jitter; tests pass a
    fixed one). Retryable: errors the store marks so, timeouts and short bodies; a target
    that changed since it was pinned, or that this mount may not read, never is.
    """

    def __init__(self, policy: RetryConfig, jitter: Callable[[float], float]) -> None:
        self._policy = policy
        self._jitter = jitter
        self.retries = 0
        """How many attempts were made again."""
        self.failures = 0
        """How many requests failed after their last attempt."""

    async def run(
        self,
        url: str,
        request: Callable[[], Awaitable[T]],
        what: str,
        check: Callable[[T], None] = _accept,
    ) -> T:
        """Return ``request()``'s answer once ``check`` accepts it, trying again as the
        policy allows; raise the ``TargetError`` of the last attempt otherwise.

        The request's errors (the store's) are introduced by ``what`` (``read failed: ...``);
        those of ``check`` (the read path's own: a short or overlong answer) stand as they are.
        """
        policy = self._policy
        attempt = 0
        while True:
            error: TargetError
            try:
                with trio.fail_after(policy.timeout):
                    answer = await request()
            except trio.TooSlowError:
                error = TargetReadError(
                    url, f"{what}: no answer within {policy.timeout:g} s", retryable=True
                )
            except TargetError as failed:
                error = failed.during(what)
            else:
                try:
                    check(answer)
                    return answer
                except TargetError as refused:
                    error = refused
            if not error.retryable or attempt >= policy.retries:
                self.failures += 1
                raise error.after_attempts(attempt + 1)
            self.retries += 1
            delay = self._jitter(policy.backoff_limit(attempt))
            log.debug("retrying %s in %.2f s: %s", url, delay, error)
            attempt += 1
            await trio.sleep(delay)
