"""Retrying a target request: the per-request deadline, which failures are worth another
attempt, the backoff between attempts, and the error that names the key, the URL, the last
problem and how many attempts were made."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from refmount.config import RetryConfig
from refmount.errors import (
    RemoteAccessError,
    RemoteChangedError,
    RemoteError,
    ShortReadError,
    TargetError,
    TargetReadError,
)
from refmount.read.failures import target_error

log = logging.getLogger(__name__)

T = TypeVar("T")


class Retrier:
    """Runs requests under ``policy`` (timeout, retries, backoff) and counts what happened.

    ``jitter(limit)`` picks each delay below the backoff limit (full jitter; tests pass a
    fixed one). Retryable: ``RemoteError``s the store marks so, timeouts and short bodies;
    a target that changed since it was pinned, or that this mount may not read, never is.
    """

    def __init__(self, policy: RetryConfig, jitter: Callable[[float], float]) -> None:
        self._policy = policy
        self._jitter = jitter
        self.retries = 0
        """How many attempts were made again."""
        self.failures = 0
        """How many requests failed after their last attempt."""

    async def run(self, key: str, url: str, request: Callable[[], Awaitable[T]], what: str) -> T:
        """Return ``request()``'s answer, trying again as the policy allows; raise the
        ``TargetError`` of the last attempt (naming ``key`` and ``url``) otherwise."""
        policy = self._policy
        attempt = 0
        while True:
            try:
                with trio.fail_after(policy.timeout):
                    return await request()
            except trio.TooSlowError:
                error: TargetError = TargetReadError(
                    key, url, f"{what}: no answer within {policy.timeout:g} s"
                )
                retryable = True
            except ShortReadError as short:
                error, retryable = short, True
            except TargetError as other:
                error, retryable = other, False
            except RemoteError as remote:
                error = target_error(key, url, what, remote)
                error.__cause__ = remote
                retryable = remote.retryable and not isinstance(
                    remote, RemoteAccessError | RemoteChangedError
                )
            if not retryable or attempt >= policy.retries:
                self.failures += 1
                raise error.after_attempts(attempt + 1)
            self.retries += 1
            delay = self._jitter(policy.backoff_limit(attempt))
            log.debug("retrying %s for key %r in %.2f s: %s", url, key, delay, error)
            attempt += 1
            await trio.sleep(delay)
