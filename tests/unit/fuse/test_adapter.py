"""Tests of the FUSE boundary: errors become errnos, and every call is timed and counted."""

from __future__ import annotations

import errno
import inspect
import os
from typing import cast

import pyfuse3
import pytest
import trio

from refmount.config import RetryConfig
from refmount.fuse.adapter import FuseOperations, InFlight
from refmount.fuse.stats import STATS_FILE
from refmount.model import Inline, Whole
from tests.fakes import DictReferences, MemoryTarget
from tests.unit.fuse.conftest import wire

CONTEXT = cast(pyfuse3.RequestContext, None)


def operations(*, xattrs: bool = True) -> FuseOperations:
    fs = wire(DictReferences(explicit={"a": Inline(b"hello")}), retry=RetryConfig(), mtime_ns=0).fs
    return FuseOperations(fs, timeout=1.0, xattrs=xattrs)


async def test_every_handler_call_is_counted_with_its_errno() -> None:
    ops = operations()
    await ops.getattr(pyfuse3.InodeT(1), CONTEXT)
    await ops.getattr(pyfuse3.InodeT(1), CONTEXT)
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.getattr(pyfuse3.InodeT(99), CONTEXT)
    assert raised.value.errno == errno.ENOENT
    with pytest.raises(pyfuse3.FUSEError):
        await ops.write(pyfuse3.FileHandleT(1), 0, b"x")
    statistics = ops._fs.statistics.operations
    assert statistics["getattr"].count == 3
    assert statistics["getattr"].errnos == {errno.ENOENT: 1}
    assert statistics["write"].errnos == {errno.EROFS: 1}


async def test_unexpected_exceptions_count_as_eio(monkeypatch: pytest.MonkeyPatch) -> None:
    ops = operations()

    async def broken(inode: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(ops._fs, "getattr", broken)
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.getattr(pyfuse3.InodeT(1), CONTEXT)
    assert raised.value.errno == errno.EIO
    assert ops._fs.statistics.operations["getattr"].errnos == {errno.EIO: 1}


async def test_the_stats_file_is_read_with_direct_io_and_never_cached() -> None:
    ops = operations()
    await ops.getattr(pyfuse3.InodeT(1), CONTEXT)
    entry = await ops.lookup(pyfuse3.InodeT(1), pyfuse3.FileNameT(STATS_FILE.encode()), CONTEXT)
    assert entry.st_ino != 0
    assert entry.st_size == 0
    info = await ops.open(entry.st_ino, os.O_RDONLY, CONTEXT)
    assert info.direct_io
    assert not info.keep_cache
    data = await ops.read(info.fh, 0, 1 << 16)
    await ops.release(info.fh)
    assert b'"getattr":{"count":1' in data
    file = await ops.open(pyfuse3.InodeT(2), os.O_RDONLY, CONTEXT)
    assert file.keep_cache
    assert not file.direct_io


async def test_without_xattrs_the_kernel_is_told_never_to_ask_again() -> None:
    ops = operations(xattrs=False)
    file = pyfuse3.InodeT(2)
    for call in (
        ops.getxattr(file, pyfuse3.XAttrNameT(b"security.selinux"), CONTEXT),
        ops.getxattr(file, pyfuse3.XAttrNameT(b"user.refmount.kind"), CONTEXT),
        ops.listxattr(file, CONTEXT),
    ):
        with pytest.raises(pyfuse3.FUSEError) as raised:
            await call
        assert raised.value.errno == errno.ENOSYS
    statistics = ops._fs.statistics.operations  # a chosen answer, not an error
    assert (statistics["getxattr"].count, statistics["getxattr"].errors) == (2, 0)
    assert (statistics["listxattr"].count, statistics["listxattr"].errors) == (1, 0)


async def test_with_xattrs_files_have_theirs_and_others_are_enodata() -> None:
    ops = operations(xattrs=True)
    file = pyfuse3.InodeT(2)
    kind = await ops.getxattr(file, pyfuse3.XAttrNameT(b"user.refmount.kind"), CONTEXT)
    assert kind == b"inline"
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.getxattr(file, pyfuse3.XAttrNameT(b"security.selinux"), CONTEXT)
    assert raised.value.errno == errno.ENODATA
    assert await ops.listxattr(pyfuse3.InodeT(1), CONTEXT) == []


async def test_listed_attributes_are_those_getattr_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # one reply object serves every entry: a field left over from the entry before would show
    refs = DictReferences(
        explicit={
            "d/a": Inline(b"x" * 700),
            "d/b": Inline(b""),
            "d/c/k": Inline(b"k"),
            "d/e": Inline(b"y" * 3),
            "d/f/k": Inline(b"k"),
            "d/g": Inline(b"z" * 513),
        }
    )
    fs = wire(refs, retry=RetryConfig(), mtime_ns=7).fs
    ops = FuseOperations(fs, timeout=1.0)
    fields = ("st_ino", "st_mode", "st_nlink", "st_size", "st_blocks", "st_mtime_ns", "st_uid")
    listed: dict[bytes, tuple[int, ...]] = {}

    def readdir_reply(token: object, name: bytes, attributes: object, next_id: int) -> bool:
        listed[name] = tuple(getattr(attributes, field) for field in fields)
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", readdir_reply)
    directory = (await ops.lookup(pyfuse3.InodeT(1), pyfuse3.FileNameT(b"d"), CONTEXT)).st_ino
    await ops.readdir(pyfuse3.FileHandleT(directory), 0, cast(pyfuse3.ReaddirToken, None))
    assert sorted(listed) == [b".", b"..", b"a", b"b", b"c", b"e", b"f", b"g"]
    for name, got in listed.items():
        if name in (b".", b".."):
            continue
        entry = await ops.lookup(directory, pyfuse3.FileNameT(name), CONTEXT)
        assert got == tuple(getattr(entry, field) for field in fields), name
    assert listed[b"g"][3:5] == (513, 2)
    assert listed[b"c"][1] != listed[b"e"][1]


async def test_an_entry_of_unknown_size_is_listed_for_the_kernel_not_to_keep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refs = DictReferences(
        explicit={"d/gone": Whole("mem://gone"), "d/good": Whole("mem://d"), "d/i": Inline(b"i")}
    )
    target = MemoryTarget(objects={"mem://d": b"data"}, failing={"mem://gone"})
    fs = wire(refs, target, retry=RetryConfig(), mtime_ns=7).fs
    ops = FuseOperations(fs, timeout=5.0)
    listed: dict[bytes, tuple[int, float, float]] = {}

    def readdir_reply(token: object, name: bytes, attributes: object, next_id: int) -> bool:
        entry = cast(pyfuse3.EntryAttributes, attributes)
        listed[name] = (entry.st_size, entry.entry_timeout, entry.attr_timeout)
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", readdir_reply)
    directory = (await ops.lookup(pyfuse3.InodeT(1), pyfuse3.FileNameT(b"d"), CONTEXT)).st_ino
    await ops.readdir(pyfuse3.FileHandleT(directory), 0, cast(pyfuse3.ReaddirToken, None))
    assert listed[b"gone"] == (0, 0.0, 0.0)
    assert listed[b"good"] == (4, 5.0, 5.0)
    assert listed[b"i"] == (1, 5.0, 5.0)  # the reply object is not left with zero timeouts
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.lookup(directory, pyfuse3.FileNameT(b"gone"), CONTEXT)
    assert raised.value.errno == errno.EIO


async def test_flush_is_declined_once_for_the_whole_connection() -> None:
    ops = operations()
    info = await ops.open(pyfuse3.InodeT(2), os.O_RDONLY, CONTEXT)
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.flush(info.fh)
    assert raised.value.errno == errno.ENOSYS
    flush = ops._fs.statistics.operations["flush"]
    assert (flush.count, flush.errors, flush.errnos) == (1, 0, {})
    assert await ops.read(info.fh, 0, 10) == b"hello"  # the file stays open and readable
    await ops.release(info.fh)


# ------------------------------------------------- injected exceptions: EIO, and no harm done

INJECTED = [
    RuntimeError("bug"),
    KeyError("missing"),
    ValueError("bad value"),
    TypeError("bad type"),
    AssertionError("broken invariant"),
    OSError(errno.ENOSPC, "not a refmount error"),
    ZeroDivisionError("division by zero"),
]


async def call(ops: FuseOperations, handler: str, inode: pyfuse3.InodeT) -> object:
    """Call one of the reading handlers of ``ops`` with valid arguments for the file ``inode``
    (the key ``a``)."""
    root = pyfuse3.InodeT(1)
    if handler == "lookup":
        return await ops.lookup(root, pyfuse3.FileNameT(b"a"), CONTEXT)
    if handler == "getattr":
        return await ops.getattr(inode, CONTEXT)
    if handler == "opendir":
        return await ops.opendir(root, CONTEXT)
    if handler == "readdir":
        await ops.readdir(pyfuse3.FileHandleT(root), 0, cast(pyfuse3.ReaddirToken, None))
        return None
    if handler in ("open", "read", "release"):
        info = await ops.open(inode, os.O_RDONLY, CONTEXT)
        if handler == "open":
            await ops.release(info.fh)
            return info
        if handler == "read":
            try:
                return await ops.read(info.fh, 0, 4096)
            finally:
                await ops.release(info.fh)
        await ops.release(info.fh)
        return None
    if handler == "getxattr":
        return await ops.getxattr(inode, pyfuse3.XAttrNameT(b"user.refmount.kind"), CONTEXT)
    if handler == "listxattr":
        return await ops.listxattr(inode, CONTEXT)
    if handler == "statfs":
        return await ops.statfs(CONTEXT)
    if handler == "access":
        return await ops.access(inode, pyfuse3.ModeT(os.R_OK), CONTEXT)
    raise AssertionError(handler)


# the adapter handler and the filesystem method it relies on
HANDLERS = [
    ("lookup", "lookup"),
    ("getattr", "getattr"),
    ("opendir", "opendir"),
    ("readdir", "readdir"),
    ("open", "open"),
    ("read", "read"),
    ("release", "release"),
    ("getxattr", "getxattr"),
    ("listxattr", "listxattr"),
    ("statfs", "statfs"),
    ("access", "getattr"),
]


@pytest.mark.parametrize(("handler", "method"), HANDLERS)
@pytest.mark.parametrize("exception", INJECTED, ids=lambda error: type(error).__name__)
async def test_an_exception_in_any_handler_is_eio_and_later_calls_work(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    handler: str,
    method: str,
    exception: Exception,
) -> None:
    replies: list[bytes] = []

    def readdir_reply(token: object, name: bytes, attributes: object, next_id: int) -> bool:
        replies.append(name)
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", readdir_reply)
    ops = operations()
    inode = (await ops.lookup(pyfuse3.InodeT(1), pyfuse3.FileNameT(b"a"), CONTEXT)).st_ino
    healthy = await call(ops, handler, inode)
    original = getattr(ops._fs, method)

    async def broken_async(*args: object, **kwargs: object) -> object:
        raise exception

    def broken(*args: object, **kwargs: object) -> object:
        raise exception

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            ops._fs, method, broken_async if inspect.iscoroutinefunction(original) else broken
        )
        for _ in range(2):  # the same failure again: still EIO, nothing left in a bad state
            with pytest.raises(pyfuse3.FUSEError) as raised:
                await call(ops, handler, inode)
            assert raised.value.errno == errno.EIO
    assert f"unexpected error in {handler}" in caplog.text
    assert type(exception).__name__ in caplog.text  # the traceback is logged
    assert ops._fs.statistics.operations[handler].errnos == {errno.EIO: 2}
    again = await call(ops, handler, inode)  # the next call works as before
    if handler == "read":
        assert again == healthy == b"hello"
    if handler in ("getattr", "lookup"):
        assert isinstance(again, pyfuse3.EntryAttributes)
        assert isinstance(healthy, pyfuse3.EntryAttributes)
        assert (
            (again.st_ino, again.st_size)
            == (healthy.st_ino, healthy.st_size)
            == (
                again.st_ino,
                5,
            )
        )
    # no handle leaked by the failures (but a failed release leaves its handle open)
    assert ops._fs.open_files == (2 if handler == "release" else 0)
    if handler == "readdir":
        assert replies == [b".", b"..", b"a"] * 2  # before and after the failures
    assert await call(ops, "read", inode) == b"hello"  # other operations never affected


async def test_abort_answers_every_request_in_flight_with_eio_and_then_new_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests = InFlight()
    ops = FuseOperations(operations()._fs, timeout=1.0, requests=requests)
    started = trio.Event()

    async def forever(inode: object) -> None:
        started.set()
        await trio.sleep_forever()

    monkeypatch.setattr(ops._fs, "getattr", forever)
    errnos: list[int] = []

    async def ask() -> None:
        with pytest.raises(pyfuse3.FUSEError) as raised:
            await ops.getattr(pyfuse3.InodeT(1), CONTEXT)
        errnos.append(raised.value.errno)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await started.wait()
            assert len(requests) == 1
            assert requests.abort() == 1
        await ask()  # after abort, a new request is answered at once
    assert errnos == [errno.EIO, errno.EIO]
    assert len(requests) == 0
    assert ops._fs.statistics.operations["getattr"].errnos == {errno.EIO: 2}
