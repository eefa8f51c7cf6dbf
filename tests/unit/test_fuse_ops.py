"""Tests of the FUSE boundary: errors become errnos, and every call is timed and counted."""

from __future__ import annotations

import errno
from typing import cast

import pyfuse3
import pytest

from refmount.config import ReadConfig
from refmount.filesystem import Owner, RefFilesystem
from refmount.fuse_ops import FuseOperations
from refmount.model import Inline
from refmount.reader import Reader
from refmount.tree import Tree
from tests.fakes import DictReferences, MemoryTarget

CONTEXT = cast(pyfuse3.RequestContext, None)


def operations() -> FuseOperations:
    refs = DictReferences(explicit={"a": Inline(b"hello")})
    tree = Tree.build(refs.keys(), refs.grids, source=refs.source)
    reader = Reader(MemoryTarget(), ReadConfig())
    fs = RefFilesystem(tree, refs, reader, owner=Owner(1, 1), mtime_ns=0)
    return FuseOperations(fs, timeout=1.0)


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


async def test_the_root_stats_attribute_goes_through_the_adapter() -> None:
    ops = operations()
    await ops.getattr(pyfuse3.InodeT(1), CONTEXT)
    data = await ops.getxattr(
        pyfuse3.InodeT(1), pyfuse3.XAttrNameT(b"user.refmount.stats"), CONTEXT
    )
    assert b'"getattr":{"count":1' in data
    assert await ops.listxattr(pyfuse3.InodeT(1), CONTEXT) == []
