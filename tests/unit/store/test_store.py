"""Tests of the store: storage options, error classification, the trio↔asyncio bridge."""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import math
import os
import threading
from pathlib import Path
from typing import Any

import aiohttp
import botocore.exceptions
import fsspec
import pytest
import trio
from fsspec.asyn import AsyncFileSystem

from refmount.errors import (
    ReferenceFormatError,
    TargetAccessError,
    TargetChangedError,
    TargetError,
)
from refmount.store.failures import is_retryable
from refmount.store.options import StorageOptions
from refmount.store.pins import Pin
from refmount.store.roots import LocalRoots
from refmount.store.sources import FsspecSource
from refmount.store.store import Store
from tests.pagecache import skip_unless_nowait
from tests.support.servers import Hostile, RangeHTTPServer


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


async def test_local_files_are_read_through_kept_descriptors(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"0123456789")
    store = Store()
    assert await store.read_range(str(path), 2, 5) == b"234"
    assert await store.read_range(f"file://{path}", 8, 20) == b"89"
    assert await store.size(str(path)) == 10
    with pytest.raises(TargetError) as caught:
        await store.read_range(str(tmp_path / "missing"), 0, 1)
    assert not caught.value.retryable
    assert "missing" in str(caught.value)


@pytest.mark.parametrize("pin", [False, True])
async def test_local_targets_that_are_not_regular_files_are_refused_at_once(
    tmp_path: Path, pin: bool
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    store = Store(pin=pin)
    for url in (str(fifo), "/dev/zero", f"file://{tmp_path}"):
        for request in (
            functools.partial(store.read_range, url, 0, 4),
            functools.partial(store.size, url),
        ):
            with (
                trio.fail_after(10),
                pytest.raises(TargetError, match="not a regular file") as caught,
            ):
                await request()
            assert not caught.value.retryable


async def test_local_targets_inside_the_own_mount_are_refused(tmp_path: Path) -> None:
    (tmp_path / "mnt").mkdir()
    inside = tmp_path / "mnt" / "data.bin"
    inside.write_bytes(b"0123456789")
    (tmp_path / "alias").symlink_to(tmp_path / "mnt")
    store = Store(own_mount=str(tmp_path / "mnt"))
    for url in (str(inside), f"file://{tmp_path}/alias/data.bin"):
        with pytest.raises(TargetError, match="inside the mount itself") as caught:
            await store.read_range(url, 0, 4)
        assert not caught.value.retryable
        with pytest.raises(TargetError, match="inside the mount itself"):
            await store.size(url)


async def test_async_filesystems_are_awaited_on_fsspec_loop(
    slow_fs: type[SlowAsyncFileSystem],
) -> None:
    store = Store()
    assert await store.read_range("slowtest://bucket/obj", 10, 14) == bytes([10, 11, 12, 13])
    assert await store.size("slowtest://bucket/obj") == 256
    with pytest.raises(TargetError, match="FileNotFoundError"):
        await store.read_range("slowtest://bucket/none", 0, 1)


async def test_many_requests_share_the_loop_without_threads(
    slow_fs: type[SlowAsyncFileSystem],
) -> None:
    slow_fs.delay = 0.2
    store = Store(threads=1)
    results: list[bytes] = []

    async def one(i: int) -> None:
        results.append(bytes(await store.read_range("slowtest://bucket/obj", i, i + 1)))

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
    slow_fs.delay = 2.0
    store = Store(connections_per_host=2)
    async with trio.open_nursery() as nursery:
        for i in range(6):
            nursery.start_soon(store.read_range, "slowtest://bucket/obj", i, i + 1)
        for _ in range(100):  # the first two reach fsspec's loop thread asynchronously
            if slow_fs.started >= 2:
                break
            await trio.sleep(0.01)
        await trio.sleep(0.2)  # time enough for a third to start, were it allowed to
        assert slow_fs.started == 2
        nursery.cancel_scope.cancel()


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


def test_reference_source_sizes_its_files(tmp_path: Path) -> None:
    (tmp_path / "repo" / "snapshots").mkdir(parents=True)
    (tmp_path / "repo" / "snapshots" / "S").write_bytes(b"12345")
    source = FsspecSource(str(tmp_path / "repo"))
    assert source.size("snapshots/S") == 5
    assert source.size("snapshots/missing") is None


def test_reference_source_lists_names_where_the_store_can(tmp_path: Path) -> None:
    (tmp_path / "refs.parq" / "x").mkdir(parents=True)
    (tmp_path / "refs.parq" / "x" / "refs.0.parq").write_bytes(b"")
    (tmp_path / "refs.parq" / "x" / "refs.7.parq").write_bytes(b"")
    source = FsspecSource(str(tmp_path / "refs.parq"))
    assert sorted(source.names("x") or []) == ["refs.0.parq", "refs.7.parq"]
    assert sorted(source.names() or []) == ["x"]
    assert source.names("missing") == []
    assert FsspecSource("http://127.0.0.1:9/refs.parq").names("x") is None  # never asked


# ------------------------------------------------------------------ per-host options


def test_prefix_options_win_over_protocol_options_for_their_host_only() -> None:
    options = StorageOptions(
        {
            "https": {"headers": {"User-Agent": "x"}, "timeout": 5},
            "https://data.example.org": {"headers": {"Authorization": "Bearer a"}},
            "https://data.example.org/private": {"headers": {"Authorization": "Bearer b"}},
        }
    )
    host = "https://data.example.org"
    assert options.for_target(f"{host}/x.nc") == {
        "headers": {"Authorization": "Bearer a"},
        "timeout": 5,
    }
    assert options.for_target(f"{host}/private/x.nc")["headers"] == {"Authorization": "Bearer b"}
    assert options.for_target(f"{host}/privateer/x")["headers"] == {"Authorization": "Bearer a"}
    for other in (
        "https://data.example.org.evil.com/x",
        "https://data.example.org:8443/x",
        "https://data.example.orgx/x",
        "https://evil.com/?https://data.example.org/x",
        "http://data.example.org/x",
    ):
        assert "Authorization" not in options.for_target(other).get("headers", {}), other
    assert options.prefix_of(f"{host}?sig=1") == host
    assert options.for_url(f"simplecache::{host}/x")["https"]["headers"] == {
        "Authorization": "Bearer a"
    }


def test_prefix_keys_alone_are_structured_options() -> None:
    options = StorageOptions({"s3://bucket": {"anon": True}})
    assert options.for_target("s3://bucket/k") == {"anon": True}
    assert options.for_target("s3://bucketeer/k") == {}
    assert options.for_target("s3://other/k") == {}


def test_one_filesystem_per_protocol_and_option_key() -> None:
    store = Store(
        StorageOptions(
            {"http://127.0.0.1:1": {"headers": {"Authorization": "Bearer a"}}, "http": {}}
        )
    )
    secret, _ = store.filesystem("http://127.0.0.1:1/a")
    same, _ = store.filesystem("http://127.0.0.1:1/b")
    other, _ = store.filesystem("http://127.0.0.1:2/a")
    assert secret is same
    assert other is not secret
    assert secret.kwargs["headers"] == {"Authorization": "Bearer a"}
    assert "headers" not in other.kwargs


class ImportingFileSystem(SlowAsyncFileSystem):
    """A filesystem whose creation stands for a slow first import: it notes its thread."""

    protocol = "importing"
    created_in: list[str] = []  # noqa: RUF012 - shared on purpose: the test reads it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        type(self).created_in.append(threading.current_thread().name)
        super().__init__(*args, **kwargs)


@pytest.fixture
def importing_fs(slow_fs: type[SlowAsyncFileSystem]) -> type[ImportingFileSystem]:
    fsspec.register_implementation("importing", ImportingFileSystem, clobber=True)
    ImportingFileSystem.created_in = []
    return ImportingFileSystem


async def test_a_filesystem_is_created_off_the_event_loop_once(
    importing_fs: type[ImportingFileSystem],
) -> None:
    store = Store()
    loop_thread = threading.current_thread().name
    assert await store.read_range("importing://bucket/obj", 0, 4) == bytes(range(4))
    assert await store.read_range("importing://bucket/obj", 4, 8) == bytes(range(4, 8))
    assert len(importing_fs.created_in) == 1
    assert importing_fs.created_in[0] != loop_thread


def test_prepare_creates_the_filesystems_of_urls_ahead_of_reads(
    importing_fs: type[ImportingFileSystem],
) -> None:
    store = Store()
    store.prepare(["importing://bucket/a", "importing://bucket/b", "nosuchprotocol://x"])
    assert len(importing_fs.created_in) == 1  # one per protocol; an unknown one is left
    fs, path = store.filesystem("importing://bucket/obj")
    assert isinstance(fs, ImportingFileSystem)
    assert path == "bucket/obj"
    assert len(importing_fs.created_in) == 1


# ------------------------------------------------------------------ local roots


def test_local_roots_decide_which_local_files_may_be_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.nc").write_bytes(b"x")
    outside = tmp_path / "secret"
    outside.write_bytes(b"s")
    (root / "escape").symlink_to(outside)
    (root / "inside").symlink_to(root / "sub" / "a.nc")
    roots = LocalRoots([str(root)])
    allowed = [
        str(root / "sub" / "a.nc"),
        f"file://{root}/sub/a.nc",
        f"local://{root}/sub/a.nc",
        f"file:{root}/sub/a.nc",
        f"simplecache::file://{root}/sub/a.nc",
        str(root / "inside"),
        str(root),
        "data:application/octet-stream;base64,AAAA",
        "https://host/etc/passwd",
        "s3://bucket/etc/passwd",
    ]
    for url in allowed:
        assert roots.problem(url) is None, url
    refused = [
        "/etc/passwd",
        str(outside),
        f"file://{outside}",
        f"local://{outside}",
        f"file:{outside}",
        f"{root}/../secret",
        f"file://{root}/sub/../../secret",
        str(root / "escape"),
        f"simplecache::file://{root}/escape",
        f"blockcache::simplecache::{outside}",
        f"{root}x/a.nc",
        "reference::file:///refs.json",
        "reference://a",
        "dir::s3://bucket/x",
    ]
    for url in refused:
        assert roots.problem(url) is not None, url
    assert "local-root" in (roots.problem("/etc/passwd") or "")
    assert LocalRoots([]).problem(str(root / "sub" / "a.nc")) is not None


def link_in_a_root(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A root with ``data.bin`` (``0123456789``) and ``link.bin`` to it; a secret outside."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "data.bin").write_bytes(b"0123456789")
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"SECRETSECRET")
    link = root / "link.bin"
    link.symlink_to(root / "data.bin")
    return root, link, secret


async def test_the_store_checks_local_roots_at_every_read(tmp_path: Path) -> None:
    root, link, secret = link_in_a_root(tmp_path)
    store = Store(local_roots=LocalRoots([str(root)]))
    assert await store.read_range(str(link), 0, 4) == b"0123"
    assert await store.size(str(link)) == 10
    link.unlink()
    link.symlink_to(secret)  # swapped after the set was checked
    for read in (store.read_range(str(link), 0, 4), store.size(str(link))):
        with pytest.raises(TargetAccessError) as caught:
            await read
        assert caught.value.errno == errno.EACCES
        assert not caught.value.retryable
    with pytest.raises(TargetAccessError):
        await store.read_range(f"simplecache::file://{secret}", 0, 1)


async def test_under_local_roots_every_read_resolves_links_once_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_unless_nowait(tmp_path)
    root, link, secret = link_in_a_root(tmp_path)
    roots = LocalRoots([str(root)])
    store = Store(local_roots=roots)
    loop_thread = threading.get_ident()
    resolved_in: list[int] = []
    resolve = roots.resolve

    def counted(url: str) -> str:
        resolved_in.append(threading.get_ident())
        return resolve(url)

    monkeypatch.setattr(roots, "resolve", counted)
    assert await store.read_range(str(link), 0, 4) == b"0123"
    assert store.read_now(str(link), 4, 8) is None  # no path look-up on the event loop
    assert await store.read_range(str(link), 4, 8) == b"4567"
    assert len(resolved_in) == 2
    assert loop_thread not in resolved_in
    link.unlink()
    link.symlink_to(secret)
    with pytest.raises(TargetAccessError):
        await store.read_range(str(link), 4, 8)


# ------------------------------------------------------------------ version pinning


class VersionedFileSystem(AsyncFileSystem):  # type: ignore[misc]
    """An async filesystem whose objects have ETags; counts ``_info`` and ``_cat_file``."""

    protocol = "versioned"
    objects: dict[str, tuple[bytes, str]] = {}  # noqa: RUF012 - shared on purpose
    infos = 0
    reads = 0

    async def _cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        type(self).reads += 1
        return self.objects[path][0][start:end]

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        type(self).infos += 1
        data, etag = self.objects[path]
        return {"name": path, "size": len(data), "type": "file", "ETag": etag}


@pytest.fixture
def versioned() -> type[VersionedFileSystem]:
    fsspec.register_implementation("versioned", VersionedFileSystem, clobber=True)
    VersionedFileSystem.objects = {"b/o": (b"0123456789", '"v1"')}
    VersionedFileSystem.infos = VersionedFileSystem.reads = 0
    return VersionedFileSystem


async def test_the_version_is_asked_once_per_url_and_gives_the_size(
    versioned: type[VersionedFileSystem],
) -> None:
    store = Store(pin=True)
    url = "versioned://b/o"
    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(store.read_range, url, i, i + 1)
        nursery.start_soon(store.size, url)
    assert await store.size(url) == 10
    assert versioned.infos == 1
    pin = store.pinned(url)
    assert pin is not None
    assert pin.etag == '"v1"'


async def test_a_changed_target_is_noticed_once_the_check_is_old(
    versioned: type[VersionedFileSystem],
) -> None:
    now = [0.0]
    store = Store(pin=True, recheck_after=5.0, clock=lambda: now[0])
    url = "versioned://b/o"
    assert await store.read_range(url, 0, 2) == b"01"
    versioned.objects["b/o"] = (b"abcdefghij", '"v2"')
    now[0] = 4.0
    assert await store.read_range(url, 2, 4) == b"cd"  # within the window: not asked again
    assert versioned.infos == 1
    now[0] = 6.0
    with pytest.raises(TargetChangedError) as caught:
        await store.read_range(url, 4, 6)
    assert not caught.value.retryable
    assert '"v1"' in str(caught.value)
    assert '"v2"' in str(caught.value)


async def test_an_unchanged_target_is_confirmed_and_not_asked_again_soon(
    versioned: type[VersionedFileSystem],
) -> None:
    now = [0.0]
    store = Store(pin=True, recheck_after=5.0, clock=lambda: now[0])
    url = "versioned://b/o"
    await store.read_range(url, 0, 1)
    now[0] = 6.0
    await store.read_range(url, 1, 2)
    await store.read_range(url, 2, 3)
    assert versioned.infos == 2


async def test_without_pinning_nothing_extra_is_asked(
    versioned: type[VersionedFileSystem],
) -> None:
    store = Store(pin=False)
    url = "versioned://b/o"
    await store.read_range(url, 0, 1)
    versioned.objects["b/o"] = (b"abcdefghij", '"v2"')
    assert await store.read_range(url, 1, 2) == b"b"
    assert versioned.infos == 0


async def test_local_targets_are_pinned_by_mtime_and_size(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"0123456789")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    store = Store(pin=True)
    assert await store.read_range(str(path), 0, 2) == b"01"
    assert await store.size(f"file://{path}") == 10
    path.write_bytes(b"abcdefghij")  # same size, new mtime
    with pytest.raises(TargetChangedError, match="1000000000ns"):
        await store.read_range(str(path), 2, 4)
    unpinned = Store(pin=False)
    assert await unpinned.read_range(str(path), 2, 4) == b"cd"


async def test_a_local_file_replaced_by_another_is_noticed_once_the_check_is_old(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"0123456789")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    now = [0.0]
    store = Store(pin=True, recheck_after=5.0, clock=lambda: now[0])
    assert await store.read_range(str(path), 0, 2) == b"01"
    (tmp_path / "new.bin").write_bytes(b"abcdefghij")
    os.replace(tmp_path / "new.bin", path)  # the kept descriptor still reads the old file
    now[0] = 4.0
    assert await store.read_range(str(path), 2, 4) == b"23"  # the pinned version, whole
    now[0] = 6.0
    with pytest.raises(TargetChangedError, match="1000000000ns"):
        await store.read_range(str(path), 4, 6)
    with pytest.raises(TargetChangedError):  # the new file is read now, and refused
        await store.read_range(str(path), 4, 6)


async def test_read_now_serves_local_files_already_read_from_the_page_cache(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data.bin"
    skip_unless_nowait(tmp_path)
    path.write_bytes(b"0123456789")
    now = [0.0]
    store = Store(pin=True, recheck_after=5.0, clock=lambda: now[0])
    url = str(path)
    assert store.read_now(url, 0, 2) is None  # never read: its path is not checked yet
    assert await store.read_range(url, 0, 2) == b"01"
    assert store.read_now(url, 2, 6) == b"2345"
    assert store.read_now("https://example.invalid/x", 0, 1) is None
    now[0] = 6.0
    assert store.read_now(url, 2, 6) is None  # the pin is due for a check: read_range does it
    assert await store.read_range(url, 2, 6) == b"2345"
    assert store.read_now(url, 6, 8) == b"67"
    path.write_bytes(b"abcdefghij")  # the same file, written again: a new mtime
    assert store.read_now(url, 0, 2) is None
    with pytest.raises(TargetChangedError):
        await store.read_range(url, 0, 2)
    unpinned = Store(pin=False)
    await unpinned.read_range(url, 0, 1)
    assert unpinned.read_now(url, 0, 4) == b"abcd"
    store.close()
    unpinned.close()


async def test_data_uris_are_read_whole_and_in_ranges() -> None:
    url = "data:application/octet-stream;base64,AAECAw=="
    for pin in (False, True):
        store = Store(pin=pin)
        assert await store.size(url) == 4
        assert await store.read_range(url, 1, 3) == b"\x01\x02"


# ------------------------------------------------------------------ what servers answer

RANGE_DATA = bytes(range(256)) * 4096  # 1 MiB


@pytest.fixture(params=["auto", "fsspec"])
def fetcher(request: pytest.FixtureRequest) -> str:
    """Each remote test runs on both engines: ``auto`` (obstore for HTTP and S3) and fsspec."""
    return str(request.param)


async def test_the_engine_is_chosen_once_per_url_and_names_itself(fetcher: str) -> None:
    with RangeHTTPServer({"obj": RANGE_DATA}) as server:
        store = Store(fetcher=fetcher)
        url = server.url_for("obj")
        assert bytes(await store.read_range(url, 0, 4096)) == RANGE_DATA[:4096]
        agent = server.requests[-1].header("User-Agent") or ""
        if fetcher == "auto":
            assert store.engine_of(url) == "obstore"
            assert "object_store" in agent, agent
        else:
            assert store.engine_of(url) == "fsspec"
            assert "aiohttp" in agent, agent
        assert store.engine_of("memory://x/y") == "fsspec"
        assert store.engine_of(f"simplecache::{url}") == "fsspec"


def test_options_obstore_cannot_express_keep_fsspec() -> None:
    options = StorageOptions(
        {
            "https": {"headers": {"X-Token": "t"}},
            "s3": {"client_kwargs": {"endpoint_url": "http://127.0.0.1:1"}, "anon": True},
            "https://odd.example.org": {"client_kwargs": {"trust_env": True}},
            "s3://profiled": {"profile": "work"},
        }
    )
    store = Store(options)
    assert store.engine_of("https://data.example.org/a.nc") == "obstore"
    assert store.engine_of("s3://bucket/a.nc") == "obstore"
    assert store.engine_of("https://odd.example.org/a.nc") == "fsspec"
    assert store.engine_of("s3://profiled/a.nc") == "fsspec"
    assert store.engine_of("https://data.example.org/a%20b.nc") == "fsspec"
    assert store.engine_of("s3://bucket/a.nc?versionId=3") == "fsspec"


@pytest.mark.parametrize(
    ("hostile", "problem"),
    [
        (Hostile.HUGE_BODY, "ignored the Range request: it answered HTTP 200 with 1073741824"),
        (Hostile.ENDLESS_BODY, "ignored the Range request: it answered HTTP 206 with more"),
        (Hostile.GZIP_BOMB, "Content-Encoding 'gzip' (HTTP 206) for a 65536-byte range"),
    ],
    ids=lambda value: value.value if isinstance(value, Hostile) else "",
)
async def test_a_hostile_http_answer_is_refused_without_reading_it_whole(
    hostile: Hostile, problem: str, fetcher: str
) -> None:
    with RangeHTTPServer({"obj": RANGE_DATA}, hostile=hostile) as server:
        store = Store(fetcher=fetcher)
        with trio.fail_after(20), pytest.raises(TargetError) as caught:
            await store.read_range(server.url_for("obj"), 100, 100 + 65536)
        assert problem in caught.value.problem
        assert caught.value.retryable is False
        assert caught.value.url == server.url_for("obj")


async def test_a_range_read_looks_its_route_up_once(
    fetcher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RangeHTTPServer({"obj": RANGE_DATA}) as server:
        store = Store(fetcher=fetcher)
        looked_up: list[str] = []
        route = store._route

        def counted(url: str) -> Any:
            looked_up.append(url)
            return route(url)

        monkeypatch.setattr(store, "_route", counted)
        assert await store.read_range(server.url_for("obj"), 10, 20) == RANGE_DATA[10:20]
        assert looked_up == [server.url_for("obj")]


async def test_http_ranges_ask_for_identity_and_never_inflate(fetcher: str) -> None:
    with RangeHTTPServer({"obj": RANGE_DATA}) as server:
        store = Store(fetcher=fetcher)
        assert await store.read_range(server.url_for("obj"), 10, 5000) == RANGE_DATA[10:5000]
        request = server.requests[-1]
        assert request.header("Accept-Encoding") == "identity"
        assert request.range == "bytes=10-4999"


async def test_a_whole_object_from_a_server_that_ignores_range_is_still_read(fetcher: str) -> None:
    with RangeHTTPServer({"obj": RANGE_DATA}, ignore_range=True) as server:
        store = Store(fetcher=fetcher)
        url = server.url_for("obj")
        assert await store.read_range(url, 0, len(RANGE_DATA)) == RANGE_DATA
        with pytest.raises(TargetError, match="ignored the Range request"):
            await store.read_range(url, 0, 100)
        http_server_short = RANGE_DATA[: len(RANGE_DATA) - 10]
        server.add("short", http_server_short)
        with pytest.raises(TargetError, match="answered HTTP 200 with the object from its start"):
            await store.read_range(server.url_for("short"), 10, len(RANGE_DATA))


async def test_a_body_stalled_half_way_is_ended_by_the_caller_deadline(fetcher: str) -> None:
    with RangeHTTPServer({"obj": RANGE_DATA}, hostile=Hostile.STALL_MID_BODY) as server:
        store = Store(fetcher=fetcher)
        with trio.move_on_after(1.0) as scope:
            await store.read_range(server.url_for("obj"), 0, 65536)
        assert scope.cancelled_caught


def test_reference_source_reads_at_most_its_cap(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    refs.write_bytes(b" " * 1000)
    assert FsspecSource(str(refs), max_size=1000).read() == b" " * 1000
    with pytest.raises(ReferenceFormatError) as caught:
        FsspecSource(str(refs), max_size=999).read()
    assert caught.value.source == str(refs)
    assert "is more than 999 bytes" in caught.value.problem
    with pytest.raises(FileNotFoundError):
        FsspecSource(str(tmp_path / "absent.json"), max_size=10).read()


# ---------------------------------------------------------------------- a document on stdin


def test_stream_source_holds_one_document_with_no_directory_or_mtime() -> None:
    import io

    from refmount.store.sources import STDIN_NAME, StreamSource

    source = StreamSource(io.BytesIO(b'{"a": "b"}' * 10), base="/data", max_size=1000)
    assert source.url == STDIN_NAME
    assert source.base_url == "/data"
    assert source.read() == b'{"a": "b"}' * 10
    assert not source.is_directory()
    assert source.names() is None
    assert source.mtime() is None
    with pytest.raises(FileNotFoundError):
        source.read("refs.0.parq")
    assert StreamSource(io.BytesIO(b"{}")).base_url == ""


def test_stream_source_stops_reading_past_the_cap() -> None:
    import io

    from refmount.errors import ReferenceFormatError
    from refmount.store.sources import StreamSource

    with pytest.raises(ReferenceFormatError, match="more than 100 bytes"):
        StreamSource(io.BytesIO(b" " * 101), max_size=100)


def test_an_http_source_is_a_directory_by_its_metadata_file_never_by_reading_its_body() -> None:
    from refmount.store.sources import FsspecSource

    files = {"/set/refs.json": b'{"a": "b"}', "/parq/.zmetadata": b"{}"}
    with RangeHTTPServer(files) as server:
        source = FsspecSource(server.url_for("set/refs.json"), max_size=1 << 20)
        assert not source.is_directory()
        assert not source.is_directory()  # asked of the server once
        # fsspec's own test GETs the URL and, typed text/html or untyped, reads it all
        assert [request.path for request in server.requests] == ["/set/refs.json/.zmetadata"]
        assert source.read() == b'{"a": "b"}'
        assert FsspecSource(server.url_for("parq")).is_directory()
        assert FsspecSource(server.url_for("anything") + "/").is_directory()


async def test_a_recorded_pin_is_compared_at_first_use_instead_of_taken_from_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"0123456789")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    other = tmp_path / "other.bin"
    other.write_bytes(b"abc")
    recorded = {
        str(path): Pin(None, "1000000000ns", 10, -math.inf, "pins.json was recorded"),
        f"{tmp_path}/gone.bin": Pin(None, "1ns", 1, -math.inf, "pins.json was recorded"),
    }
    store = Store(pin=True, recorded=recorded, recorded_in="pins.json")
    assert await store.read_range(str(path), 0, 2) == b"01"  # the version recorded
    assert recorded[str(path)].checked == -math.inf  # the record itself is left alone
    with caplog.at_level(logging.WARNING):
        assert await store.read_range(str(other), 0, 3) == b"abc"  # pinned at first use
    assert [r.getMessage() for r in caplog.records] == [
        f"{other} is not in the pins file pins.json: pinned at its first use instead (other "
        "targets missing from it are not named)"
    ]
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    fresh = Store(pin=True, recorded=recorded, recorded_in="pins.json")  # another node's mount
    with pytest.raises(TargetChangedError, match=r"since pins\.json was recorded: pinned mtime "):
        await fresh.read_range(str(path), 0, 2)
    assert fresh.read_now(str(path), 0, 2) is None  # its descriptor is open: still refused
    with pytest.raises(TargetChangedError):
        await fresh.read_range(str(path), 0, 2)


async def test_a_recorded_etag_that_the_target_no_longer_has_fails_the_first_read(
    versioned: type[VersionedFileSystem],
) -> None:
    url = "versioned://b/o"
    recorded = {url: Pin('"v0"', None, 10, -math.inf, "pins.json was recorded")}
    store = Store(pin=True, recorded=recorded, recorded_in="pins.json")
    with pytest.raises(TargetChangedError, match='pinned ETag "v0", now ETag'):
        await store.read_range(url, 0, 1)


async def test_version_answers_what_a_mount_would_pin(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"0123456789")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    pin = await Store().version(str(path))
    assert (pin.etag, pin.modified, pin.size) == (None, "1000000000ns", 10)
