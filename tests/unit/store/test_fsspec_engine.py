"""Tests of the fsspec engine: one filesystem per protocol and option prefix, made once and
kept; reads by kind of filesystem; a refused version; what a filesystem cannot be made for."""

from __future__ import annotations

import fsspec
import pytest
import trio
from fsspec.implementations.memory import MemoryFileSystem

from refmount.errors import TargetReadError
from refmount.store.fsspec_engine import FsspecEngine, VersionRefused
from refmount.store.options import StorageOptions
from refmount.store.routes import route_of
from refmount.store.runner import Runner
from tests.support.servers import RangeHTTPServer, etag_of

DATA = bytes(range(256)) * 4


def engine(options: StorageOptions | None = None) -> FsspecEngine:
    return FsspecEngine(options or StorageOptions(), Runner(trio.CapacityLimiter(2), 4))


def test_a_filesystem_is_made_once_per_protocol_and_option_prefix() -> None:
    options = StorageOptions({"http://127.0.0.1:1": {"headers": {"A": "b"}}, "http": {}})
    fsspec_engine = engine(options)
    first = "http://127.0.0.1:1/a"
    assert not fsspec_engine.has(route_of(first, options))
    one, path = fsspec_engine.filesystem(first, route_of(first, options).filesystem_key)
    assert fsspec_engine.has(route_of(first, options))
    again, _ = fsspec_engine.filesystem("http://127.0.0.1:1/b", ("http", "http://127.0.0.1:1"))
    other, _ = fsspec_engine.filesystem("http://127.0.0.1:2/a", ("http", None))
    assert (one is again, one is other, path) == (True, False, first)


def test_prepare_leaves_what_it_cannot_make_for_the_read_to_report() -> None:
    fsspec_engine = engine()
    fsspec_engine.prepare(["memory://bucket/a", "nosuchprotocol://x"])
    assert fsspec_engine.has(route_of("memory://bucket/a", StorageOptions()))
    with pytest.raises(TargetReadError, match="cannot open a filesystem"):
        fsspec_engine.filesystem("nosuchprotocol://x", ("nosuchprotocol", None))


async def test_a_blocking_filesystem_is_read_in_a_thread_and_an_empty_range_not_at_all() -> None:
    MemoryFileSystem.store.clear()
    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/obj", DATA)
    fsspec_engine = engine()
    url = "memory://bucket/obj"
    route = route_of(url, StorageOptions())
    found, path = fsspec_engine.filesystem(url, route.filesystem_key)
    assert await fsspec_engine.read(url, route, found, path, 10, 14, {}) == DATA[10:14]
    assert await fsspec_engine.read(url, route, found, path, 5, 5, {}) == b""
    assert (await fsspec_engine.info(url, route, found, path))["size"] == len(DATA)


async def test_an_http_read_carrying_another_version_is_refused() -> None:
    with RangeHTTPServer({"a.bin": DATA}) as server:
        url = server.url_for("a.bin")
        fsspec_engine = engine()
        route = route_of(url, StorageOptions())
        fs, path = await trio.to_thread.run_sync(
            fsspec_engine.filesystem, url, route.filesystem_key
        )
        pinned = {"If-Match": etag_of(DATA)}
        assert await fsspec_engine.read(url, route, fs, path, 0, 4, pinned) == DATA[:4]
        with pytest.raises(VersionRefused):
            await fsspec_engine.read(url, route, fs, path, 0, 4, {"If-Match": '"other"'})
