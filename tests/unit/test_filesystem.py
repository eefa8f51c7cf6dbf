"""Tests of FUSE semantics by calling the filesystem core directly (no kernel)."""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest

from refmount.config import ReadConfig
from refmount.errors import (
    FilesystemError,
    ReferenceFormatError,
    TargetAccessError,
    TargetReadError,
)
from refmount.filesystem import READDIR_BATCH, Owner, RefFilesystem
from refmount.model import ROOT_INODE, ChunkGrid, Inline, Inode, Range, Reference, Whole
from refmount.reader import Reader
from refmount.stats import STATS_XATTR, Statistics
from refmount.tree import Tree
from tests.fakes import DictReferences, MemoryTarget

DATA = b"HELLO WORLD 0123456789abcdefghijklmnopqrstuvwxyz"
MTIME_NS = 1_700_000_000_000_000_000


def make_fs(
    references: DictReferences, target: MemoryTarget | None = None
) -> tuple[RefFilesystem, MemoryTarget]:
    target = target or MemoryTarget(objects={"mem://d": DATA})
    tree = Tree.build(references.keys(), references.grids, source=references.source)
    reader = Reader(target, ReadConfig())
    owner = Owner(uid=1234, gid=5678)
    return RefFilesystem(tree, references, reader, owner=owner, mtime_ns=MTIME_NS), target


@pytest.fixture
def simple() -> RefFilesystem:
    refs = DictReferences(
        explicit={
            "text": Inline("héllo☃".encode()),
            "dir/range": Range("mem://d", 6, 5),
            "dir/whole": Whole("mem://d"),
            "dir/empty": Range("mem://d", 5, 0),
            "dir/sub/gone": Range("mem://missing", 0, 3),
        }
    )
    return make_fs(refs)[0]


async def path_inode(fs: RefFilesystem, path: str) -> Inode:
    inode = ROOT_INODE
    for part in path.split("/"):
        attributes = await fs.lookup(inode, part)
        assert attributes is not None, path
        inode = attributes.inode
    return inode


async def read_all(fs: RefFilesystem, path: str) -> bytes:
    handle = await fs.open(await path_inode(fs, path), os.O_RDONLY)
    try:
        return await fs.read(handle, 0, 1 << 20)
    finally:
        fs.release(handle)


async def test_sizes_are_the_bytes_a_read_returns(simple: RefFilesystem) -> None:
    for path, expected in [
        ("text", "héllo☃".encode()),
        ("dir/range", b"WORLD"),
        ("dir/whole", DATA),
        ("dir/empty", b""),
    ]:
        attributes = await simple.getattr(await path_inode(simple, path))
        assert attributes.size == len(expected), path
        assert await read_all(simple, path) == expected


async def test_attributes_of_files_and_directories(simple: RefFilesystem) -> None:
    root = await simple.getattr(ROOT_INODE)
    assert root.is_dir
    assert stat.S_ISDIR(root.mode)
    assert root.mode & 0o777 == 0o555
    text = await simple.getattr(await path_inode(simple, "text"))
    assert stat.S_ISREG(text.mode)
    assert text.mode & 0o777 == 0o444
    assert (text.uid, text.gid, text.mtime_ns, text.nlink) == (1234, 5678, MTIME_NS, 1)
    assert text.blocks == 1


async def test_lookup_of_a_missing_name_is_none(simple: RefFilesystem) -> None:
    assert await simple.lookup(ROOT_INODE, "nope") is None
    with pytest.raises(FilesystemError) as caught:
        await simple.lookup(await path_inode(simple, "text"), "x")
    assert caught.value.errno == errno.ENOTDIR


async def test_unknown_inode_is_enoent(simple: RefFilesystem) -> None:
    with pytest.raises(FilesystemError) as caught:
        await simple.getattr(Inode(10_000))
    assert caught.value.errno == errno.ENOENT


async def test_readdir_lists_with_attributes_and_resumes(simple: RefFilesystem) -> None:
    directory = await path_inode(simple, "dir")
    listing = await simple.readdir(directory, 0)
    names = [entry.name for entry, _, _ in listing]
    assert names == [".", "..", "empty", "range", "sub", "whole"]
    assert listing[0][0].inode == directory
    assert listing[1][0].inode == ROOT_INODE
    sizes = {entry.name: attributes.size for entry, attributes, _ in listing[2:]}
    assert sizes == {"empty": 0, "range": 5, "sub": 0, "whole": len(DATA)}
    assert await simple.readdir(directory, 1) == listing[1:]
    resume = listing[3][2]
    again = await simple.readdir(directory, resume)
    assert [entry.name for entry, _, _ in again] == ["sub", "whole"]
    assert await simple.readdir(directory, listing[-1][2]) == []


async def test_reads_at_odd_offsets_and_past_the_end(simple: RefFilesystem) -> None:
    handle = await simple.open(await path_inode(simple, "dir/whole"), os.O_RDONLY)
    assert await simple.read(handle, 3, 7) == DATA[3:10]
    assert await simple.read(handle, 47, 10) == DATA[47:]
    assert await simple.read(handle, 48, 10) == b""
    assert await simple.read(handle, 10_000, 10) == b""
    simple.release(handle)
    assert simple.open_files == 0


@pytest.mark.parametrize(
    "flags", [os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND]
)
async def test_opening_for_writing_is_refused(simple: RefFilesystem, flags: int) -> None:
    with pytest.raises(FilesystemError) as caught:
        await simple.open(await path_inode(simple, "text"), flags)
    assert caught.value.errno == errno.EROFS


async def test_opening_a_directory_is_eisdir(simple: RefFilesystem) -> None:
    with pytest.raises(FilesystemError) as caught:
        await simple.open(await path_inode(simple, "dir"), os.O_RDONLY)
    assert caught.value.errno == errno.EISDIR


async def test_failing_target_fails_only_that_file(simple: RefFilesystem) -> None:
    handle = await simple.open(await path_inode(simple, "dir/sub/gone"), os.O_RDONLY)
    with pytest.raises(TargetReadError) as caught:
        await simple.read(handle, 0, 10)
    assert caught.value.errno == errno.EIO
    assert caught.value.key == "dir/sub/gone"
    assert await read_all(simple, "dir/range") == b"WORLD"


async def test_extended_attributes(simple: RefFilesystem) -> None:
    rng = await path_inode(simple, "dir/range")
    assert await simple.listxattr(rng) == [
        "user.refmount.kind",
        "user.refmount.url",
        "user.refmount.offset",
        "user.refmount.length",
    ]
    assert await simple.getxattr(rng, "user.refmount.kind") == b"range"
    assert await simple.getxattr(rng, "user.refmount.url") == b"mem://d"
    assert await simple.getxattr(rng, "user.refmount.offset") == b"6"
    assert await simple.getxattr(rng, "user.refmount.length") == b"5"
    whole = await path_inode(simple, "dir/whole")
    assert await simple.getxattr(whole, "user.refmount.kind") == b"whole"
    assert await simple.getxattr(whole, "user.refmount.length") == str(len(DATA)).encode()
    text = await path_inode(simple, "text")
    assert await simple.getxattr(text, "user.refmount.kind") == b"inline"
    assert await simple.getxattr(text, "user.refmount.url") == b""
    assert await simple.getxattr(text, "user.refmount.length") == b"9"
    assert await simple.listxattr(await path_inode(simple, "dir")) == []
    with pytest.raises(FilesystemError) as caught:
        await simple.getxattr(text, "user.other")
    assert caught.value.errno == errno.ENODATA


def grid_fs(loaded: bool = True) -> tuple[RefFilesystem, DictReferences]:
    grid = ChunkGrid("x", (2, 3), ".")
    present: dict[int, Reference] = {
        0: Range("mem://d", 0, 6),
        1: Inline(b"ab"),
        4: Whole("mem://d"),
    }
    refs = DictReferences(
        explicit={"x/.zarray": Inline(b"{}")}, grid_list=[grid], chunks={0: present}, loaded=loaded
    )
    return make_fs(refs)[0], refs


async def test_absent_chunks_are_neither_listed_nor_found() -> None:
    fs, _ = grid_fs()
    array = await path_inode(fs, "x")
    listing = (await fs.readdir(array, 0))[2:]
    assert [entry.name for entry, _, _ in listing] == [".zarray", "0.0", "0.1", "1.1"]
    assert [attributes.size for _, attributes, _ in listing] == [2, 6, 2, len(DATA)]
    assert await fs.lookup(array, "0.2") is None
    assert await fs.lookup(array, "0.3") is None
    assert await read_all(fs, "x/0.0") == b"HELLO "


async def test_chunks_not_yet_loaded_are_fetched_in_a_worker_thread() -> None:
    fs, refs = grid_fs(loaded=False)
    assert await read_all(fs, "x/0.1") == b"ab"
    assert (0, 1) in refs.chunk_calls


async def test_corrupt_record_is_an_error_for_that_chunk_only() -> None:
    fs, refs = grid_fs()
    refs.broken.add((0, 0))
    array = await path_inode(fs, "x")
    with pytest.raises(ReferenceFormatError):
        await fs.lookup(array, "0.0")
    assert await read_all(fs, "x/0.1") == b"ab"


async def test_readdir_streams_in_batches() -> None:
    count = READDIR_BATCH * 2 + 5
    grid = ChunkGrid("big", (count,), ".")
    refs = DictReferences(
        explicit={"big/.zarray": Inline(b"{}")},
        grid_list=[grid],
        chunks={0: {i: Inline(b"x") for i in range(count) if i % 3}},
    )
    fs = make_fs(refs)[0]
    array = await path_inode(fs, "big")
    names: list[str] = []
    position = 0
    batches = 0
    while batch := await fs.readdir(array, position):
        batches += 1
        assert len(batch) <= READDIR_BATCH
        names.extend(entry.name for entry, _, _ in batch)
        position = batch[-1][2]
    assert names == [".", "..", ".zarray"] + [str(i) for i in range(count) if i % 3]
    assert batches == 2


def test_statfs_reports_names_and_limits(simple: RefFilesystem) -> None:
    figures = simple.statfs()
    assert figures.name_max == 255
    assert figures.files >= 7


async def test_unreadable_record_file_is_eio_naming_the_chunk() -> None:
    fs, refs = grid_fs(loaded=False)

    def unreadable(grid: int, index: int) -> Reference | None:
        raise ConnectionResetError("record store went away")

    refs.chunk = unreadable  # type: ignore[method-assign]
    array = await path_inode(fs, "x")
    with pytest.raises(TargetReadError) as caught:
        await fs.lookup(array, "0.1")
    assert caught.value.key == "x/0.1"
    assert "record store went away" in str(caught.value)


# ------------------------------------------------------------------ statistics


async def test_root_stats_attribute_is_a_json_snapshot_of_the_counters(
    simple: RefFilesystem,
) -> None:
    assert await read_all(simple, "dir/range") == b"WORLD"
    simple.statistics.record("read", 2_000_000)
    snapshot = json.loads(await simple.getxattr(ROOT_INODE, STATS_XATTR))
    assert snapshot["reads"] == 1
    assert snapshot["bytes_served"] == 5
    assert snapshot["fetches"] == 1
    assert snapshot["open_files"] == 0
    assert snapshot["source"] == "refs.test"
    assert snapshot["operations"]["read"]["count"] == 1
    assert snapshot["operations"]["read"]["max_us"] == 2000
    assert snapshot == {**simple.snapshot(), "uptime_s": snapshot["uptime_s"]}


async def test_stats_attribute_is_not_listed_and_only_on_the_root(simple: RefFilesystem) -> None:
    assert await simple.listxattr(ROOT_INODE) == []
    file = await path_inode(simple, "dir/range")
    assert STATS_XATTR not in await simple.listxattr(file)
    for inode in (file, await path_inode(simple, "dir")):
        with pytest.raises(FilesystemError) as raised:
            await simple.getxattr(inode, STATS_XATTR)
        assert raised.value.errno == errno.ENODATA


async def test_open_files_are_counted_in_the_snapshot(simple: RefFilesystem) -> None:
    handle = await simple.open(await path_inode(simple, "text"), os.O_RDONLY)
    assert simple.snapshot()["open_files"] == 1
    simple.release(handle)
    assert simple.snapshot()["open_files"] == 0


async def test_a_given_statistics_object_is_used() -> None:
    statistics = Statistics()
    refs = DictReferences(explicit={"a": Inline(b"x")})
    tree = Tree.build(refs.keys(), refs.grids, source=refs.source)
    fs = RefFilesystem(
        tree,
        refs,
        Reader(MemoryTarget(), ReadConfig()),
        owner=Owner(1, 1),
        mtime_ns=MTIME_NS,
        statistics=statistics,
    )
    assert fs.statistics is statistics


def test_owner_takes_uid_gid_and_umask() -> None:
    owner = Owner.current(0o027, uid=1234, gid=5678)
    assert (owner.uid, owner.gid) == (1234, 5678)
    assert (owner.file_mode, owner.dir_mode) == (0o440, 0o550)
    assert Owner.current() == Owner(os.getuid(), os.getgid(), 0o444, 0o555)
    assert Owner.current(0o022).file_mode == 0o444  # nothing to take away: read-only anyway


async def test_umask_and_owner_show_in_every_attribute() -> None:
    refs = DictReferences(explicit={"a/b": Inline(b"x")})
    tree = Tree.build(refs.keys(), refs.grids, source=refs.source)
    reader = Reader(MemoryTarget(), ReadConfig())
    owner = Owner.current(0o077, uid=42, gid=43)
    fs = RefFilesystem(tree, refs, reader, owner=owner, mtime_ns=MTIME_NS)
    for path, mode in (("a", stat.S_IFDIR | 0o500), ("a/b", stat.S_IFREG | 0o400)):
        attributes = await fs.getattr(await path_inode(fs, path))
        assert (attributes.mode, attributes.uid, attributes.gid) == (mode, 42, 43)
    root = await fs.getattr(ROOT_INODE)
    assert root.mode == stat.S_IFDIR | 0o500


async def test_a_chunk_whose_target_is_refused_cannot_be_opened() -> None:
    grid = ChunkGrid("x", (2,), ".")
    refs = DictReferences(
        explicit={"x/.zarray": Inline(b"{}"), "plain": Range("mem://secret", 0, 2)},
        grid_list=[grid],
        chunks={0: {0: Range("mem://d", 0, 5), 1: Range("mem://secret", 0, 2)}},
    )
    asked: list[str] = []

    def problem(url: str) -> str | None:
        asked.append(url)
        return "outside the local roots" if url == "mem://secret" else None

    target = MemoryTarget(objects={"mem://d": DATA, "mem://secret": b"no"})
    tree = Tree.build(refs.keys(), refs.grids, source=refs.source)
    fs = RefFilesystem(
        tree,
        refs,
        Reader(target, ReadConfig()),
        owner=Owner(1, 1),
        mtime_ns=MTIME_NS,
        target_problem=problem,
    )
    assert await read_all(fs, "x/0") == b"HELLO"
    array = await path_inode(fs, "x")
    assert await fs.lookup(array, "1") is not None  # listed and stat-able: sizes are known
    for _ in range(2):
        with pytest.raises(TargetAccessError) as caught:
            await read_all(fs, "x/1")
        assert caught.value.errno == errno.EACCES
        assert caught.value.key == "x/1"
        assert caught.value.url == "mem://secret"
    assert asked == ["mem://d", "mem://secret"]  # once per URL
    assert not any(url == "mem://secret" for url, _, _ in target.ranges)
    # explicit keys were checked when the set was loaded (daemon.check_local_targets)
    assert await read_all(fs, "plain") == b"no"
