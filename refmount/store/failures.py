"""What a failed target read means: the ``TargetReadError`` that stands for an exception of
fsspec, aiohttp, botocore or the OS, and whether trying again may help."""

from __future__ import annotations

import errno

from refmount.errors import TargetReadError

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 509, 598, 599})
"""HTTP statuses worth trying again (5xx that are not permanent, timeouts, throttling)."""

PERMANENT_ERRNOS = frozenset(
    {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EINVAL}
)


def is_retryable(error: BaseException) -> bool:
    """Return True when ``error`` is a failure that may go away if the request is repeated."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        status = http_status(current)
        if status is not None:
            return status in RETRYABLE_STATUS
        current = current.__cause__ or current.__context__
    if isinstance(error, TimeoutError | ConnectionError):
        return True
    if isinstance(error, OSError):
        return error.errno not in PERMANENT_ERRNOS and not isinstance(
            error, FileNotFoundError | PermissionError | IsADirectoryError | NotADirectoryError
        )
    module = type(error).__module__
    # aiohttp's connection, payload and disconnect errors; botocore's endpoint and read errors
    return module.startswith(("aiohttp", "botocore", "aiobotocore", "urllib3"))


def http_status(error: BaseException) -> int | None:
    status = getattr(error, "status", None)  # aiohttp.ClientResponseError
    if isinstance(status, int):
        return status
    response = getattr(error, "response", None)  # botocore.exceptions.ClientError
    if isinstance(response, dict):
        code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(code, int):
            return code
    return None


def target_error(url: str, error: BaseException) -> TargetReadError:
    """Return the ``TargetReadError`` that stands for ``error`` raised while reading ``url``."""
    text = _describe(error)
    cause = error.__cause__
    if cause is not None and type(error).__module__ == "builtins":
        text = f"{text} ({_describe(cause)})"  # fsspec's FileNotFoundError hides an HTTP status
    return TargetReadError(url, text, retryable=is_retryable(error))


def _describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    if text != type(error).__name__:
        text = f"{type(error).__name__}: {text}"
    return text
