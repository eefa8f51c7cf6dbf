"""Tests of reading a mounted snapshot's chunks through Icechunk's session: byte ranges of
native and virtual chunks, and Icechunk's refusals as the right ``TargetError``."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from refmount.errors import TargetAccessError, TargetReadError
from refmount.store.runner import Runner
from refmount.urls import icechunk_chunk_url
from tests.support.icechunk_repos import (
    BuiltRepository,
    build_repository,
    open_store,
    requires_icechunk,
    store_get,
    touch_later,
)

pytestmark = requires_icechunk


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltRepository:
    return build_repository(tmp_path_factory.mktemp("engine"))


def engine(store: Any) -> Any:
    from refmount.store.icechunk_engine import IcechunkEngine

    return IcechunkEngine(store, Runner(trio.CapacityLimiter(2), connections_per_host=4))


async def test_ranges_of_native_and_virtual_chunks(built: BuiltRepository) -> None:
    store = open_store(built, built.first, (built.container,))
    reads = engine(store)
    for key in ("obs/temp/c/1/0", "virtual/v/c/2"):
        whole = store_get(store, key)
        url = icechunk_chunk_url(built.first, key)
        assert reads.serves(url)
        assert bytes(await reads.read(url, 0, len(whole))) == whole
        assert bytes(await reads.read(url, 5, 17)) == whole[5:17]
        assert await reads.read(url, 9, 9) == b""
    assert not reads.serves("file:///data/x.nc")


async def test_an_unauthorized_container_is_eacces_naming_the_flag(built: BuiltRepository) -> None:
    reads = engine(open_store(built, built.first, (built.container,)))
    with pytest.raises(TargetAccessError) as caught:
        await reads.read(icechunk_chunk_url(built.first, "virtual/w/c/0"), 0, 10)
    assert caught.value.errno == errno.EACCES
    assert "--authorize-container" in str(caught.value)
    assert built.other_container in str(caught.value)


async def test_a_changed_virtual_target_fails_and_is_not_retried(tmp_path: Path) -> None:
    copy = build_repository(tmp_path)
    reads = engine(open_store(copy, copy.first, (copy.container,)))
    checked = icechunk_chunk_url(copy.first, "virtual/v/c/0")
    assert len(await reads.read(checked, 0, 1000)) == 1000
    touch_later(copy.data)
    with pytest.raises(TargetReadError) as caught:
        await reads.read(checked, 0, 1000)
    assert not caught.value.retryable
    assert caught.value.errno == errno.EIO
    assert str(copy.data) in str(caught.value)
    assert "changed" in str(caught.value)
    unchecked = icechunk_chunk_url(copy.first, "virtual/v/c/2")  # committed without checksum
    assert len(await reads.read(unchecked, 0, 1000)) == 1000


async def test_a_missing_native_chunk_object_is_eio(tmp_path: Path) -> None:
    copy = build_repository(tmp_path)
    reads = engine(open_store(copy, copy.first))
    shutil.rmtree(copy.path / "chunks")
    with pytest.raises(TargetReadError) as caught:
        await reads.read(icechunk_chunk_url(copy.first, "obs/temp/c/0/0"), 0, 10)
    assert caught.value.errno == errno.EIO
    assert "\n" not in str(caught.value)


def test_icechunk_errors_by_kind() -> None:
    from refmount.store.icechunk_engine import icechunk_error

    class Failure(Exception):
        def __init__(self, kind: str) -> None:
            super().__init__(f"it failed ({kind})\n\ncontext:\n  0: trace")
            self.kind = kind

    url = "icechunk://S/a/c/0"
    refused = icechunk_error(url, Failure("unauthorized-virtual-chunk-container"))
    assert isinstance(refused, TargetAccessError)
    throttled = icechunk_error(url, Failure("throttled"))
    assert throttled.retryable
    assert str(throttled) == f"{url}: it failed (throttled)"
    assert not icechunk_error(url, Failure("virtual-chunk-modified")).retryable
    assert not icechunk_error(url, KeyError("a/c/0")).retryable
