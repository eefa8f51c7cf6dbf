"""Range reads that no server answer can inflate: HTTP(S) and S3 bodies streamed and cut one
byte past the range, never decompressed, refused before their body when the headers say the
range was ignored or the body is encoded."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from refmount.errors import TargetReadError

FileSystem = Any
"""An ``fsspec.AbstractFileSystem``; fsspec has no type hints."""

READ_PIECE = 256 * 1024
"""The most a streamed body is read by at a time."""

IDENTITY = frozenset({"", "identity"})
"""``Content-Encoding`` values that leave the bytes as they are."""


def _refused(url: str, problem: str) -> TargetReadError:
    """Return the error for an answer the store will not take (never retried)."""
    return TargetReadError(url, problem, retryable=False)


Read = Callable[[int], Awaitable[bytes]]
"""``read(n)``: up to ``n`` more bytes of a body, ``b""`` at its end."""

Stream = Callable[
    [str, FileSystem, str, int, int, Mapping[str, str]],
    AbstractAsyncContextManager[tuple[int, Read]],
]
"""Opens the answer to a range request, checked as far as its headers go: ``stream(url, fs,
path, start, end, condition)`` yields its HTTP status and its body's ``read``, and closes
the body (dropping the connection if it was not all read) on the way out."""


async def bounded_range(
    stream: Stream,
    url: str,
    fs: FileSystem,
    path: str,
    start: int,
    end: int,
    condition: Mapping[str, str] | None = None,
) -> bytes:
    """GET ``[start, end)`` of ``path`` through ``stream`` (``http_stream``, ``s3_stream``).

    A 200 (the whole object) to a range that does not start at 0 is refused before its
    body is read. The body is read up to one byte past the range (that byte proves the
    range was ignored) and no further.
    """
    expected = end - start
    async with stream(url, fs, path, start, end, condition or {}) as (status, read):
        if status == 200 and start > 0:  # the object from its byte 0: wrong bytes
            raise _refused(url, _ignored_range(200, "the object from its start", expected))
        data = await _read_at_most(read, expected + 1)
        if len(data) > expected:
            raise _refused(url, _ignored_range(status, "more bytes", expected))
        return data


@asynccontextmanager
async def http_stream(
    url: str, fs: FileSystem, path: str, start: int, end: int, condition: Mapping[str, str]
) -> AsyncIterator[tuple[int, Read]]:
    """Open ``[start, end)`` of ``path`` through the HTTP filesystem's own session.

    Asks for ``Accept-Encoding: identity`` and never inflates: an answer with another
    ``Content-Encoding`` is refused, as is one whose ``Content-Length`` exceeds the range,
    before its body is read. A body left unread is not drained: the connection is dropped.
    """
    options = dict(getattr(fs, "kwargs", {}))
    headers = {
        **options.pop("headers", {}),
        **condition,
        "Range": f"bytes={start}-{end - 1}",
        "Accept-Encoding": "identity",
    }
    options.pop("auto_decompress", None)
    session = await fs.set_session()
    expected = end - start
    async with session.get(
        fs.encode_url(path), headers=headers, auto_decompress=False, **options
    ) as response:
        if response.status == 404:
            raise FileNotFoundError(path)
        response.raise_for_status()
        encoding = response.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in IDENTITY:
            raise _refused(
                url,
                f"the server sent a body with Content-Encoding {encoding!r} (HTTP "
                f"{response.status}) for a {expected}-byte range; only identity was asked for",
            )
        announced = response.headers.get("Content-Length", "")
        if announced.isdigit() and int(announced) > expected:
            raise _refused(url, _ignored_range(response.status, f"{announced} bytes", expected))
        try:
            yield response.status, response.content.read
        except BaseException:
            response.close()  # the rest is never read: drop the connection
            raise


@asynccontextmanager
async def s3_stream(
    url: str, fs: FileSystem, path: str, start: int, end: int, condition: Mapping[str, str]
) -> AsyncIterator[tuple[int, Read]]:
    """Open ``[start, end)`` of an S3 object (``condition`` is not used: s3fs reads are
    checked against the pin afterwards).

    The object's bytes are what is read, whatever ``Content-Encoding`` it was stored with
    (botocore never inflates; s3fs does not either).
    """
    bucket, key, version = fs.split_path(path)
    versioned = {"VersionId": version} if version else {}
    answer = await fs._call_s3(
        "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **versioned
    )
    body = answer["Body"]
    try:
        yield answer.get("ResponseMetadata", {}).get("HTTPStatusCode", 206), body.read
    finally:
        body.close()


def _ignored_range(status: int, sent: str, expected: int) -> str:
    return (
        f"the server ignored the Range request: it answered HTTP {status} with {sent} "
        f"for a {expected}-byte range"
    )


async def _read_at_most(read: Read, limit: int) -> bytes:
    """Return the body ``read`` streams, stopping once ``limit`` bytes have come."""
    pieces: list[bytes] = []
    received = 0
    while received < limit:
        piece = await read(min(READ_PIECE, limit - received))
        if not piece:
            break
        pieces.append(piece)
        received += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
