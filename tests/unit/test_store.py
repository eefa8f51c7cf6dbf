"""Tests of the store: storage options, error classification, the trio↔asyncio bridge."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any

import aiohttp
import botocore.exceptions
import fsspec
import pytest
import trio
from fsspec.asyn import AsyncFileSystem

from refmount.errors import RemoteError
from refmount.store import FsspecSource, StorageOptions, Store, is_retryable


class SlowAsyncFileSystem(AsyncFileSystem):  # type: ignore[misc]
    """An async filesystem on fsspec's loop that serves ``objects`` after ``delay`` seconds."""

    protocol = "slowtest"
    objects: dict[str, bytes] = {}  # noqa: RUF012 - shared on purpose, like a server
    delay = 0.0
    cancelled = 0
    started = 0

    async def _cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        type(self).started += 1
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            type(self).cancelled += 1
            raise
        if path not in self.objects:
            raise FileNotFoundError(path)
        return self.objects[path][start:end]

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        return {"name": path, "size": len(self.objects[path]), "type": "file"}


@pytest.fixture
def slow_fs() -> type[SlowAsyncFileSystem]:
    fsspec.register_implementation("slowtest", SlowAsyncFileSystem, clobber=True)
    SlowAsyncFileSystem.objects = {"bucket/obj": bytes(range(256))}
    SlowAsyncFileSystem.delay = 0.0
    SlowAsyncFileSystem.cancelled = 0
    SlowAsyncFileSystem.started = 0
    return SlowAsyncFileSystem


def response_error(status: int) -> aiohttp.ClientResponseError:
    return aiohttp.ClientResponseError(request_info=None, history=(), status=status)  # type: ignore[arg-type]


def boto_error(status: int) -> botocore.exceptions.ClientError:
    response = {"Error": {"Code": "X"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return botocore.exceptions.ClientError(response, "GetObject")


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (response_error(503), True),
        (response_error(500), True),
        (response_error(429), True),
        (response_error(408), True),
        (response_error(404), False),
        (response_error(403), False),
        (response_error(501), False),
        (aiohttp.ServerDisconnectedError(), True),
        (aiohttp.ClientPayloadError("Response payload is not completed"), True),
        (aiohttp.ClientConnectionError("refused"), True),
        (TimeoutError(), True),
        (ConnectionResetError(errno.ECONNRESET, "reset"), True),
        (FileNotFoundError("x"), False),
        (PermissionError("x"), False),
        (OSError(errno.EIO, "io"), True),
        (boto_error(503), True),
        (boto_error(404), False),
        (botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
        (ValueError("bad"), False),
    ],
)
def test_retryable_errors(error: BaseException, retryable: bool) -> None:
    assert is_retryable(error) is retryable


def test_translated_errors_keep_the_status_of_their_cause() -> None:
    translated = OSError(errno.EIO, "slow down")
    translated.__cause__ = boto_error(503)
    assert is_retryable(translated)
    denied = OSError(errno.EIO, "denied")
    denied.__cause__ = boto_error(403)
    assert not is_retryable(denied)


def test_flat_options_apply_to_every_protocol() -> None:
    options = StorageOptions({"anon": True})
    assert options.for_protocol("s3") == {"anon": True}
    assert options.for_protocol("https") == {"anon": True}


def test_per_protocol_options() -> None:
    options = StorageOptions({"s3": {"anon": True}, "https": {"headers": {"a": "b"}}})
    assert options.for_protocol("s3") == {"anon": True}
    assert options.for_protocol("https") == {"headers": {"a": "b"}}
    assert options.for_protocol("file") == {}


def test_s3_shortcuts_merge_into_s3_options() -> None:
    options = StorageOptions(
        {"s3": {"client_kwargs": {"verify": False}, "anon": False}},
        {"endpoint_url": "http://127.0.0.1:9000", "client_kwargs": {"region_name": "eu"}},
    )
    for protocol in ("s3", "s3a"):
        s3 = options.for_protocol(protocol)
        assert s3["endpoint_url"] == "http://127.0.0.1:9000"
        assert s3["client_kwargs"]["region_name"] == "eu"
    assert options.for_protocol("s3")["client_kwargs"]["verify"] is False
    assert options.for_protocol("https") == {}


def test_chained_urls_get_options_per_protocol() -> None:
    options = StorageOptions({"s3": {"anon": True}})
    assert options.for_url("simplecache::s3://b/refs.json") == {
        "simplecache": {},
        "s3": {"anon": True},
    }
    assert options.for_url("s3://b/refs.json") == {"anon": True}


async def test_local_files_are_read_in_worker_threads(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"0123456789")
    store = Store()
    assert await store.read_range(str(path), 2, 5) == b"234"
    assert await store.read_range(f"file://{path}", 8, 20) == b"89"
    assert await store.size(str(path)) == 10
    with pytest.raises(RemoteError) as caught:
        await store.read_range(str(tmp_path / "missing"), 0, 1)
    assert not caught.value.retryable
    assert "missing" in str(caught.value)


async def test_async_filesystems_are_awaited_on_fsspec_loop(
    slow_fs: type[SlowAsyncFileSystem],
) -> None:
    store = Store()
    assert await store.read_range("slowtest://bucket/obj", 10, 14) == bytes([10, 11, 12, 13])
    assert await store.size("slowtest://bucket/obj") == 256
    with pytest.raises(RemoteError, match="FileNotFoundError"):
        await store.read_range("slowtest://bucket/none", 0, 1)


async def test_many_requests_share_the_loop_without_threads(
    slow_fs: type[SlowAsyncFileSystem],
) -> None:
    slow_fs.delay = 0.2
    store = Store(threads=1)
    results: list[bytes] = []

    async def one(i: int) -> None:
        results.append(await store.read_range("slowtest://bucket/obj", i, i + 1))

    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(one, i)
    assert sorted(results) == [bytes([i]) for i in range(20)]
    assert trio.current_time() - started < 2.0  # concurrent, not 20 * 0.2 s


async def test_cancelling_a_request_cancels_it_on_the_asyncio_side(
    slow_fs: type[SlowAsyncFileSystem],
) -> None:
    slow_fs.delay = 30.0
    store = Store()
    with trio.move_on_after(0.2):
        await store.read_range("slowtest://bucket/obj", 0, 1)
    for _ in range(500):  # the cancellation reaches fsspec's loop thread asynchronously
        if slow_fs.cancelled:
            break
        await trio.sleep(0.01)
    assert slow_fs.cancelled == 1


async def test_requests_per_host_are_bounded(slow_fs: type[SlowAsyncFileSystem]) -> None:
    slow_fs.delay = 0.1
    store = Store(connections_per_host=2)
    async with trio.open_nursery() as nursery:
        for i in range(6):
            nursery.start_soon(store.read_range, "slowtest://bucket/obj", i, i + 1)
        await trio.sleep(0.05)
        assert slow_fs.started == 2


def test_reference_source_over_local_files(tmp_path: Path) -> None:
    (tmp_path / "refs.parq").mkdir()
    (tmp_path / "refs.parq" / ".zmetadata").write_text("{}")
    source = FsspecSource(str(tmp_path / "refs.parq"))
    assert source.is_directory()
    assert source.read(".zmetadata") == b"{}"
    assert source.base_url == str(tmp_path)
    with pytest.raises(FileNotFoundError):
        source.read("x/refs.0.parq")
    assert source.mtime() == pytest.approx((tmp_path / "refs.parq" / ".zmetadata").stat().st_mtime)
