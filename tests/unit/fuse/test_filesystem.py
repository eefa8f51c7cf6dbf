"""Tests of FUSE semantics by calling the filesystem core directly (no kernel)."""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from refmount.config import ReadConfig, RetryConfig
from refmount.errors import (
    FilesystemError,
    ReferenceFormatError,
    TargetAccessError,
    TargetError,
    TargetReadError,
)
from refmount.fuse import neighbours
from refmount.fuse.filesystem import Owner, RefFilesystem
from refmount.fuse.listing import DIRECTORY, READDIR_BATCH, UNRESOLVED
from refmount.fuse.stats import STATS_FILE, Statistics
from refmount.model import ROOT_INODE, ChunkGrid, Inline, Inode, Range, Reference, Whole
from refmount.read.path import NeighbourPrefetch
from refmount.read.reader import Reader
from tests.fakes import DictReferences, MemoryTarget
from tests.unit.fuse.conftest import MTIME_NS, wire

DATA = b"HELLO WORLD 0123456789abcdefghijklmnopqrstuvwxyz"


def make_fs(
    references: DictReferences, target: MemoryTarget | None = None
) -> tuple[RefFilesystem, MemoryTarget]:
    target = target or MemoryTarget(objects={"mem://d": DATA})
    wired = wire(references, target, retry=RetryConfig(), owner=Owner(uid=1234, gid=5678))
    return wired.fs, target


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
        return bytes(await fs.read(handle, 0, 1 << 20))
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
    names = [name for name, _, _, _ in listing]
    assert names == [b".", b"..", b"empty", b"range", b"sub", b"whole"]
    assert listing[0][1] == directory
    assert listing[1][1] == ROOT_INODE
    sizes = {name: size for name, _, size, _ in listing}
    assert sizes == {
        b".": DIRECTORY,
        b"..": DIRECTORY,
        b"empty": 0,
        b"range": 5,
        b"sub": DIRECTORY,
        b"whole": len(DATA),
    }
    for name, inode, size, _ in listing[2:]:
        found = await simple.lookup(directory, name.decode())
        assert found is not None
        assert found.inode == inode
        assert found.size == (0 if size == DIRECTORY else size)
        assert found.is_dir == (size == DIRECTORY)
    assert await simple.readdir(directory, 1) == listing[1:]
    resume = listing[3][3]
    again = await simple.readdir(directory, resume)
    assert [name for name, _, _, _ in again] == [b"sub", b"whole"]
    assert await simple.readdir(directory, listing[-1][3]) == []


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
    assert str(caught.value).startswith("key 'dir/sub/gone' (mem://missing): ")
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


async def test_the_mounts_facts_are_the_roots_extended_attributes() -> None:
    refs = DictReferences(explicit={"text": Inline(b"x")})
    wired = wire(refs, about={"snapshot": "ABC123"})
    assert await wired.fs.listxattr(ROOT_INODE) == ["user.refmount.snapshot"]
    assert await wired.fs.getxattr(ROOT_INODE, "user.refmount.snapshot") == b"ABC123"
    assert wired.fs.snapshot()["snapshot"] == "ABC123"
    plain = make_fs(refs)[0]
    assert await plain.listxattr(ROOT_INODE) == []
    assert "snapshot" not in plain.snapshot()
    with pytest.raises(FilesystemError) as caught:
        await plain.getxattr(ROOT_INODE, "user.refmount.snapshot")
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
    assert [name for name, _, _, _ in listing] == [b".zarray", b"0.0", b"0.1", b"1.1"]
    assert [size for _, _, size, _ in listing] == [2, 6, 2, len(DATA)]
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


async def test_a_corrupt_row_fails_the_listing_with_its_own_error() -> None:
    fs, refs = grid_fs()
    refs.broken.add((0, 0))
    with pytest.raises(ReferenceFormatError, match="injected corruption"):  # not a group
        await fs.readdir(await path_inode(fs, "x"), 0)


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
    names: list[bytes] = []
    position = 0
    batches = 0
    while batch := await fs.readdir(array, position):
        batches += 1
        assert len(batch) <= READDIR_BATCH
        names.extend(name for name, _, _, _ in batch)
        position = batch[-1][3]
    assert names == [b".", b"..", b".zarray"] + [b"%d" % i for i in range(count) if i % 3]
    assert batches == 2


async def test_grid_listing_takes_sizes_in_batches_not_chunk_by_chunk() -> None:
    fs, refs = grid_fs()
    array = await path_inode(fs, "x")
    listing = (await fs.readdir(array, 0))[2:]
    assert [size for _, _, size, _ in listing] == [2, 6, 2, len(DATA)]
    assert set(refs.chunk_calls) == {(0, 4)}  # only the whole file: its size takes the target


async def test_entries_the_kernel_had_no_room_for_are_not_prepared_again() -> None:
    fs, refs = grid_fs()
    array = await path_inode(fs, "x")
    listing = await fs.readdir(array, 0)
    fs.keep_unlisted(array, listing[2][3], listing[3:])
    refs.chunk_calls.clear()
    assert await fs.readdir(array, listing[2][3]) == listing[3:]
    assert refs.chunk_calls == []
    assert await fs.readdir(array, listing[2][3]) == listing[3:]  # kept once, then prepared
    assert refs.chunk_calls != []


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


async def test_stats_file_is_a_json_snapshot_taken_when_opened(simple: RefFilesystem) -> None:
    assert await read_all(simple, "dir/range") == b"WORLD"
    simple.statistics.record("read", 2_000_000)
    attributes = await simple.lookup(ROOT_INODE, STATS_FILE)
    assert attributes is not None
    assert not attributes.is_dir
    assert attributes.size == 0  # the contents are made at open: read with direct I/O
    assert simple.is_virtual(attributes.inode)
    assert await simple.getattr(attributes.inode) == attributes
    handle = await simple.open(attributes.inode, os.O_RDONLY)
    simple.statistics.record("read", 1_000)  # after the open: not in this snapshot
    data = bytes(await simple.read(handle, 0, 1 << 20))
    assert await simple.read(handle, 10, 5) == data[10:15]
    simple.release(handle)
    snapshot = json.loads(data)
    assert snapshot["reads"] == 1
    assert snapshot["bytes_served"] == 5
    assert snapshot["fetches"] == 1
    assert snapshot["open_files"] == 0
    assert snapshot["source"] == "refs.test"
    assert snapshot["operations"]["read"]["count"] == 1
    assert snapshot["operations"]["read"]["max_us"] == 2000
    assert snapshot == {**simple.snapshot(), "uptime_s": snapshot["uptime_s"]} | {
        "operations": snapshot["operations"]
    }


async def test_stats_file_is_not_listed_and_only_in_the_root(simple: RefFilesystem) -> None:
    names = [name for name, _, _, _ in await simple.readdir(ROOT_INODE, 0)]
    assert STATS_FILE.encode() not in names
    assert await simple.lookup(await path_inode(simple, "dir"), STATS_FILE) is None
    stats = await simple.lookup(ROOT_INODE, STATS_FILE)
    assert stats is not None
    assert await simple.listxattr(stats.inode) == []
    for flags in (os.O_WRONLY, os.O_RDWR):
        with pytest.raises(FilesystemError) as raised:
            await simple.open(stats.inode, flags)
        assert raised.value.errno == errno.EROFS
    with pytest.raises(FilesystemError) as raised:
        await simple.readdir(stats.inode, 0)
    assert raised.value.errno == errno.ENOTDIR


async def test_a_key_named_like_the_stats_file_wins() -> None:
    fs = make_fs(DictReferences(explicit={STATS_FILE: Inline(b"data")}))[0]
    assert await read_all(fs, STATS_FILE) == b"data"
    attributes = await fs.lookup(ROOT_INODE, STATS_FILE)
    assert attributes is not None
    assert not fs.is_virtual(attributes.inode)


async def test_open_files_are_counted_in_the_snapshot(simple: RefFilesystem) -> None:
    handle = await simple.open(await path_inode(simple, "text"), os.O_RDONLY)
    assert simple.snapshot()["open_files"] == 1
    simple.release(handle)
    assert simple.snapshot()["open_files"] == 0


async def test_a_given_statistics_object_is_used() -> None:
    statistics = Statistics()
    fs = wire(DictReferences(explicit={"a": Inline(b"x")}), statistics=statistics).fs
    assert fs.statistics is statistics


def test_owner_takes_uid_gid_and_umask() -> None:
    owner = Owner.current(0o027, uid=1234, gid=5678)
    assert (owner.uid, owner.gid) == (1234, 5678)
    assert (owner.file_mode, owner.dir_mode) == (0o440, 0o550)
    assert Owner.current() == Owner(os.getuid(), os.getgid(), 0o444, 0o555)
    assert Owner.current(0o022).file_mode == 0o444  # nothing to take away: read-only anyway


async def test_umask_and_owner_show_in_every_attribute() -> None:
    refs = DictReferences(explicit={"a/b": Inline(b"x")})
    fs = wire(refs, owner=Owner.current(0o077, uid=42, gid=43)).fs
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
    fs = wire(refs, target, retry=RetryConfig(), target_problem=problem).fs
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


# ---------------------------------------------------------------------- neighbour prefetch

CHUNK = 1000
CHUNKS = 12
OBJECT = bytes(range(251)) * 48  # 12048 bytes: every chunk's bytes differ from its neighbours'


IN_ORDER = [(0, 1000), (1000, 5000), (5000, 7000), (7000, 9000), (9000, 11000), (11000, 12000)]
"""The requests of a reader of ``chunked_fs``' chunks in order: x/0 alone (nothing says "in
order" yet); from x/1 on, the window (4 chunks, the limit), then topped up (2 chunks) each
time less than three quarters of it is ahead."""


def chunked_fs(
    target: MemoryTarget | None = None, **config: int
) -> tuple[RefFilesystem, MemoryTarget, Reader]:
    """Chunks ``x/0`` … ``x/11`` of one object, back to back (names sort as 0, 1, 10, 11, 2…).

    The window does not grow unless ``neighbour_growth`` or ``late_growth`` say so: runs
    keep their first size.
    """
    refs = DictReferences(
        explicit={f"x/{i}": Range("mem://o", i * CHUNK, CHUNK) for i in range(CHUNKS)}
    )
    target = target or MemoryTarget(objects={"mem://o": OBJECT})
    settings = {
        "neighbour_bytes": 4 * CHUNK,
        "neighbour_gap": 100,
        "neighbour_growth": 1,
        "late_growth": 1,
    }
    settings.update(config)
    wired = wire(refs, target, ReadConfig(**settings))
    return wired.fs, target, wired.reader


async def read_chunk(fs: RefFilesystem, number: int, *, settle: bool = True) -> bytes:
    """Open ``x/<number>``, read it in 300-byte pieces like the kernel would, and close it;
    then (``settle``) let the background work started meanwhile run until it waits."""
    handle = await fs.open(await path_inode(fs, f"x/{number}"), os.O_RDONLY)
    try:
        pieces = [await fs.read(handle, offset, 300) for offset in range(0, CHUNK, 300)]
    finally:
        fs.release(handle)
    if settle:
        await trio.testing.wait_all_tasks_blocked()
    return b"".join(pieces)


def expected(number: int) -> bytes:
    return OBJECT[number * CHUNK : (number + 1) * CHUNK]


def spans(target: MemoryTarget) -> list[tuple[int, int]]:
    return [(start, end) for _, start, end in target.ranges]


async def test_without_a_nursery_each_chunk_is_one_request() -> None:
    fs, target, _ = chunked_fs()
    for number in range(CHUNKS):
        assert await read_chunk(fs, number) == expected(number)
    assert spans(target) == [(i * CHUNK, (i + 1) * CHUNK) for i in range(CHUNKS)]


async def test_in_order_chunks_of_one_object_are_fetched_together() -> None:
    fs, target, reader = chunked_fs()
    async with reader.running():
        for number in range(CHUNKS):
            assert await read_chunk(fs, number) == expected(number)
        assert spans(target) == IN_ORDER
        # each chunk read through left the cache (the kernel's page cache answers a second
        # pass through FUSE); a second pass here fetches as the first did
        for number in range(CHUNKS):
            assert await read_chunk(fs, number) == expected(number)
        assert spans(target)[6:] == spans(target)[:6]
        assert reader.statistics().prefetches == 10


async def test_an_in_order_reader_asks_the_reader_once_per_run_not_once_per_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fs, target, reader = chunked_fs()
    asked_at: list[int] = []
    prefetch_neighbours = reader.prefetch_neighbours

    def spy(url: str, spans: Sequence[tuple[int, int]], scale: int) -> NeighbourPrefetch:
        asked_at.append(spans[0][0] // CHUNK)
        return prefetch_neighbours(url, spans, scale)

    monkeypatch.setattr(reader, "prefetch_neighbours", spy)
    async with reader.running():
        for number in range(CHUNKS):
            assert await read_chunk(fs, number) == expected(number)
        assert spans(target) == IN_ORDER
        # x/2 has x/2 to x/4 ahead: three quarters of the limit, nothing to ask; x/3 asks.
        # Near the end fewer spans are left than the window holds: each file asks.
        assert asked_at == [1, 3, 5, 7, 9, 10, 11]


async def test_chunks_of_a_grid_are_indexed_in_bulk_and_fetched_together() -> None:
    refs = DictReferences(
        explicit={"g/.zarray": Inline(b"{}")},
        grid_list=[ChunkGrid("g", (CHUNKS,), ".")],
        chunks={0: {i: Range("mem://o", i * CHUNK, CHUNK) for i in range(CHUNKS)}},
    )
    target = MemoryTarget(objects={"mem://o": OBJECT})
    config = ReadConfig(
        neighbour_bytes=4 * CHUNK, neighbour_gap=100, neighbour_growth=1, late_growth=1
    )
    wired = wire(refs, target, config)
    fs, reader = wired.fs, wired.reader
    async with reader.running():
        for number in range(CHUNKS):
            handle = await fs.open(await path_inode(fs, f"g/{number}"), os.O_RDONLY)
            assert await fs.read(handle, 0, CHUNK) == expected(number)
            fs.release(handle)
            await trio.testing.wait_all_tasks_blocked()
        assert spans(target) == IN_ORDER
    # one chunk() per file opened: the index took the grid's ranges in one call
    assert sorted(refs.chunk_calls) == [(0, i) for i in range(CHUNKS)]


async def test_small_chunks_in_order_are_fetched_in_runs_of_the_count_limit() -> None:
    fs, target, reader = chunked_fs(neighbour_bytes=100 * CHUNK, neighbour_count=4)
    async with reader.running():
        for number in range(CHUNKS):
            assert await read_chunk(fs, number) == expected(number)
        # the window is topped up once fewer than three quarters of the count are ahead:
        # never a request per chunk once reading is in order
        assert spans(target) == IN_ORDER


async def test_a_run_goes_out_as_parallel_parts() -> None:
    fs, target, reader = chunked_fs(neighbour_part_bytes=2 * CHUNK)
    async with reader.running():
        assert await read_chunk(fs, 0) == expected(0)
        target.gate = gate = trio.Event()
        handle = await fs.open(await path_inode(fs, "x/1"), os.O_RDONLY)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(spans(target)) == [(0, 1000), (1000, 3000), (3000, 5000)]  # both in flight
        gate.set()
        assert await fs.read(handle, 0, CHUNK) == expected(1)
        fs.release(handle)
        for number in range(2, CHUNKS):
            assert await read_chunk(fs, number) == expected(number)
        # then topped up a part at a time
        assert spans(target)[3:] == [(5000, 7000), (7000, 9000), (9000, 11000), (11000, 12000)]
        assert reader.statistics().prefetches == 6


async def test_the_window_doubles_while_reading_in_order_and_starts_small_after_a_jump() -> None:
    step = 100
    refs = DictReferences(explicit={f"y/{i}": Range("mem://o", i * step, step) for i in range(64)})
    target = MemoryTarget(objects={"mem://o": OBJECT})
    config = ReadConfig(
        neighbour_bytes=4 * step,
        neighbour_part_bytes=2 * step,
        neighbour_gap=0,
        neighbour_growth=4,
        late_growth=1,
    )
    wired = wire(refs, target, config)
    fs, reader = wired.fs, wired.reader
    async with reader.running():
        for number in [*range(25), 60, 61]:
            handle = await fs.open(await path_inode(fs, f"y/{number}"), os.O_RDONLY)
            assert await fs.read(handle, 0, 4096) == OBJECT[number * step : (number + 1) * step]
            fs.release(handle)
            await trio.testing.wait_all_tasks_blocked()
    assert sorted(spans(target)) == [
        (0, 100),  # y/0 alone
        (100, 300),  # from y/1: 4 spans in parts of 2
        (300, 500),
        (500, 900),  # from y/3, 2 spans ahead: twice the window (8 spans), topped up to
        (900, 1100),  # its end in parts of 4
        (1100, 1900),  # then four times (16 spans, the most) in parts of 8
        (1900, 2200),
        (2200, 2700),  # then topped up to 16 spans as the reader goes
        (2700, 3200),
        (3200, 3700),
        (6000, 6100),  # y/60: a jump, nothing ahead
        (6100, 6300),  # from y/61: the first window again (3 spans are left)
        (6300, 6400),
    ]


@pytest.mark.parametrize(
    ("inline", "most", "requests"),
    [
        (100, 100, 6),  # indexed at once: x/0 alone, then 4 from x/1, then topped up by 2
        (4, 100, 7),  # indexed in a thread: x/1 alone too, while the index is built
        (4, 10, 12),  # too many entries: no index, one request per chunk
    ],
)
async def test_larger_directories_are_indexed_in_a_thread_up_to_a_limit(
    monkeypatch: pytest.MonkeyPatch, inline: int, most: int, requests: int
) -> None:
    monkeypatch.setattr(neighbours, "INLINE_INDEX_LIMIT", inline)
    monkeypatch.setattr(neighbours, "SIBLING_INDEX_LIMIT", most)
    fs, target, reader = chunked_fs()
    async with reader.running():
        for number in range(CHUNKS):
            assert await read_chunk(fs, number) == expected(number)
            if number == 1 and requests < CHUNKS:
                with trio.fail_after(5):  # the index, once built, starts the first run
                    while reader.statistics().prefetches == 0:  # noqa: ASYNC110 - a thread, no event
                        await trio.sleep(0.01)
        assert len(target.ranges) == requests


async def test_random_order_prefetches_nothing() -> None:
    fs, target, reader = chunked_fs()
    order = [5, 2, 9, 0, 7, 3, 11, 1, 6, 10, 4, 8]
    async with reader.running():
        for number in order:
            assert await read_chunk(fs, number) == expected(number)
    assert spans(target) == [(i * CHUNK, (i + 1) * CHUNK) for i in order]
    assert reader.statistics().prefetches == 0


async def test_a_read_of_a_chunk_being_prefetched_waits_for_it() -> None:
    fs, target, reader = chunked_fs()
    async with reader.running(), trio.open_nursery() as nursery:
        assert await read_chunk(fs, 0) == expected(0)
        target.gate = gate = trio.Event()
        handle = await fs.open(await path_inode(fs, "x/1"), os.O_RDONLY)  # starts x/1..x/4
        await trio.testing.wait_all_tasks_blocked()
        assert spans(target) == [(0, 1000), (1000, 5000)]
        results: dict[int, bytes] = {}

        async def read(number: int) -> None:
            results[number] = await read_chunk(fs, number, settle=False)

        async def read_one() -> None:
            results[1] = b"".join([await fs.read(handle, 0, 500), await fs.read(handle, 500, 500)])

        nursery.start_soon(read, 3)
        nursery.start_soon(read_one)
        await trio.testing.wait_all_tasks_blocked()
        assert len(target.ranges) == 2  # neither read sent a request of its own
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert results == {1: expected(1), 3: expected(3)}
        assert len(target.ranges) == 2
        nursery.cancel_scope.cancel()


async def test_opens_the_kernel_answers_from_its_page_cache_prefetch_nothing() -> None:
    fs, target, reader = chunked_fs()
    async with reader.running():
        for number in range(CHUNKS):
            assert await read_chunk(fs, number) == expected(number)
        requests = len(target.ranges)
        assert reader.statistics().bytes_cached == 0  # read through: the kernel holds them
        for number in range(CHUNKS):  # a second pass from the page cache: opens, no reads
            handle = await fs.open(await path_inode(fs, f"x/{number}"), os.O_RDONLY)
            fs.release(handle)
            await trio.testing.wait_all_tasks_blocked()
        assert len(target.ranges) == requests


async def test_a_chunk_already_being_fetched_is_not_fetched_again() -> None:
    fs, target, reader = chunked_fs()

    async def read_start_of_zero() -> None:  # read in part, x/0 stays cached
        handle = await fs.open(await path_inode(fs, "x/0"), os.O_RDONLY)
        assert await fs.read(handle, 0, 300) == expected(0)[:300]
        fs.release(handle)

    async with reader.running(), trio.open_nursery() as nursery:
        await read_start_of_zero()
        target.gate = gate = trio.Event()
        result: list[bytes] = []

        async def read_three() -> None:
            result.append(await read_chunk(fs, 3, settle=False))

        nursery.start_soon(read_three)  # x/3 alone: not in order after x/0
        await trio.testing.wait_all_tasks_blocked()
        # x/0 again (cached), then x/1: the run stops before x/3, in flight
        await read_start_of_zero()
        handle = await fs.open(await path_inode(fs, "x/1"), os.O_RDONLY)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
        assert await fs.read(handle, 0, CHUNK) == expected(1)
        await trio.testing.wait_all_tasks_blocked()
        assert result == [expected(3)]
        assert spans(target) == [(0, 1000), (3000, 4000), (1000, 3000)]
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("cache_size", "requests"),
    [
        (8 * CHUNK, [(0, 1000), (1000, 5000)]),  # room for the whole run
        (4 * CHUNK, [(0, 1000), (1000, 3000)]),  # prefetch keeps to half the budget
        (2 * CHUNK, [(0, 1000), (1000, 2000)]),  # no room for two: one request per chunk
    ],
)
async def test_the_budget_shrinks_and_stops_coalescing(
    cache_size: int, requests: list[tuple[int, int]]
) -> None:
    fs, target, reader = chunked_fs(cache_size=cache_size)
    async with reader.running():
        assert await read_chunk(fs, 0) == expected(0)
        assert await read_chunk(fs, 1) == expected(1)
    assert spans(target) == requests


async def test_a_failed_coalesced_request_falls_back_to_single_ones() -> None:
    fs, target, reader = chunked_fs()
    async with reader.running():
        assert await read_chunk(fs, 0) == expected(0)
        target.flaky["mem://o"] = 1  # the coalesced request fails (no retries here)
        assert await read_chunk(fs, 1) == expected(1)
        assert spans(target) == [(0, 1000), (1000, 5000), (1000, 2000)]
        assert reader.statistics().errors == 1  # counted, but no read saw it


async def test_a_short_coalesced_body_never_gives_wrong_bytes() -> None:
    target = MemoryTarget(objects={"mem://o": OBJECT}, truncate={"mem://o": 2500})
    fs, target, reader = chunked_fs(target)
    async with reader.running():
        assert await read_chunk(fs, 0) == expected(0)
        assert await read_chunk(fs, 1) == expected(1)  # its own request, after the short one
        assert spans(target)[:3] == [(0, 1000), (1000, 5000), (1000, 2000)]
        with pytest.raises(TargetError):  # short: an error, as without prefetch
            await read_chunk(fs, 2)


async def test_files_opened_together_before_any_read_prefetch_nothing() -> None:
    fs, target, reader = chunked_fs()
    async with reader.running():
        handles = [
            await fs.open(await path_inode(fs, f"x/{i}"), os.O_RDONLY) for i in range(4)
        ]  # like parallel readers: each open comes before the previous file was read
        for number, handle in enumerate(handles):
            assert await fs.read(handle, 0, CHUNK) == expected(number)
    assert spans(target) == [(i * CHUNK, (i + 1) * CHUNK) for i in range(4)]


async def test_a_read_still_in_flight_counts_for_the_next_open() -> None:
    fs, target, reader = chunked_fs()
    async with reader.running(), trio.open_nursery() as nursery:
        target.gate = gate = trio.Event()
        results: dict[int, bytes] = {}

        async def read(number: int) -> None:
            results[number] = await read_chunk(fs, number, settle=False)

        nursery.start_soon(read, 0)  # like parallel readers: x/0's read waits for its bytes
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(read, 1)  # ...while x/1 is opened: in order all the same
        await trio.testing.wait_all_tasks_blocked()
        assert spans(target) == [(0, 1000), (1000, 5000)]
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert results == {0: expected(0), 1: expected(1)}
        nursery.cancel_scope.cancel()


async def test_local_files_are_not_coalesced(tmp_path: Path) -> None:
    path = tmp_path / "o.bin"
    target = MemoryTarget(objects={str(path): OBJECT})
    refs = DictReferences(explicit={f"x/{i}": Range(str(path), i * CHUNK, CHUNK) for i in range(4)})
    wired = wire(refs, target)
    fs, reader = wired.fs, wired.reader
    async with reader.running():
        for number in range(4):
            assert await read_chunk(fs, number) == expected(number)
    assert spans(target) == [(i * CHUNK, (i + 1) * CHUNK) for i in range(4)]


# --------------------------------------------------------------------- sparse Parquet grids

HUGE = 10**18  # chunk positions: 10**13 record files of 100 000 rows could exist


async def list_all(fs: RefFilesystem, inode: Inode) -> list[str]:
    """List a directory to the end, as the kernel would, batch after batch."""
    names: list[str] = []
    position = 0
    while batch := await fs.readdir(inode, position):
        names += [name.decode() for name, _, _, _ in batch]
        position = batch[-1][3]
    return names[2:]  # . and ..


def sparse_parquet(tmp_path: Path, chunks: dict[str, dict[int, list[object]]]) -> RefFilesystem:
    """A Parquet set with array ``flat`` (10**18 chunks, "."), ``nested`` (10**9 x 10**9,
    "/") and ``empty`` (10**18 chunks, no record file), holding the given ``chunks``."""
    from refmount.formats.options import LoadOptions
    from refmount.formats.parquet import load_parquet
    from tests.fakes import LocalSource
    from tests.unit.formats.parquet.writers import write_parquet_set, zarray

    root = tmp_path / "sparse.parq"
    metadata = {
        "flat/.zarray": zarray([HUGE], [1]),
        "nested/.zarray": zarray([10**9, 10**9], [1, 1], dimension_separator="/"),
        "empty/.zarray": zarray([HUGE], [1]),
    }
    write_parquet_set(root, metadata, chunks, 100_000)
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions())
    target = MemoryTarget(objects={"mem://d": DATA})
    return wire(references, target, retry=RetryConfig(), owner=Owner(uid=1234, gid=5678)).fs


async def test_a_sparse_grid_lists_what_is_present_not_the_grid(tmp_path: Path) -> None:
    last = HUGE - 1
    middle = 10**9 * 123_456 + 7  # nested/123456/7
    fs = sparse_parquet(
        tmp_path,
        {
            "flat": {0: ["mem://d", 0, 1], 5 * 10**11: ["mem://d", 1, 2], last: ["mem://d", 2, 3]},
            "nested": {middle: ["mem://d", 0, 4], last: ["mem://d", 0, 5]},
        },
    )
    with trio.fail_after(60):  # a listing that walked the grid would never end
        flat = await path_inode(fs, "flat")
        assert await list_all(fs, flat) == [".zarray", "0", str(5 * 10**11), str(last)]
        assert await list_all(fs, await path_inode(fs, "empty")) == [".zarray"]
        nested = await path_inode(fs, "nested")
        assert await list_all(fs, nested) == [".zarray", "123456", str(10**9 - 1)]
        directory = await path_inode(fs, "nested/123456")
        assert await list_all(fs, directory) == ["7"]
        assert await read_all(fs, "nested/123456/7") == DATA[:4]
        assert await read_all(fs, f"flat/{last}") == DATA[2:5]
        # absent names stay cheap to look up: one missing record file, no listing
        assert await fs.lookup(flat, str(10**17)) is None
        assert await fs.lookup(nested, "5") is not None  # a directory of the grid, empty
        assert await list_all(fs, await path_inode(fs, "nested/5")) == []


async def test_a_grid_whose_records_are_all_null_lists_nothing(tmp_path: Path) -> None:
    rows = dict.fromkeys(range(0, 3 * 10**5, 7))  # three record files of null rows
    fs = sparse_parquet(tmp_path, {"flat": rows})  # type: ignore[dict-item]
    with trio.fail_after(60):
        assert await list_all(fs, await path_inode(fs, "flat")) == [".zarray"]


async def test_a_dense_grid_still_lists_in_full_batches(tmp_path: Path) -> None:
    rows: dict[int, list[object]] = {index: ["mem://d", index % 40, 1] for index in range(1000)}
    fs = sparse_parquet(tmp_path, {"flat": rows})
    flat = await path_inode(fs, "flat")
    first = await fs.readdir(flat, 0)
    assert len(first) == READDIR_BATCH
    assert await list_all(fs, flat) == [".zarray"] + [str(i) for i in range(1000)]


async def test_a_target_without_a_size_does_not_fail_its_listing() -> None:
    refs = DictReferences(
        explicit={
            "d/a": Whole("mem://d"),
            "d/b": Whole("mem://gone"),
            "d/c": Range("mem://d", 0, 5),
            "d/e": Whole("mem://refused"),
        }
    )
    target = MemoryTarget(objects={"mem://d": DATA}, failing={"mem://gone", "mem://refused"})
    fs, _ = make_fs(refs, target)
    directory = await path_inode(fs, "d")
    listing = (await fs.readdir(directory, 0))[2:]
    assert [(name, size) for name, _, size, _ in listing] == [
        (b"a", len(DATA)),
        (b"b", UNRESOLVED),
        (b"c", 5),
        (b"e", UNRESOLVED),
    ]
    gone = listing[1][1]
    with pytest.raises(TargetError) as caught:
        await fs.getattr(gone)
    assert caught.value.errno == errno.EIO
    with pytest.raises(TargetError):
        await fs.open(gone, os.O_RDONLY)
    assert await read_all(fs, "d/a") == DATA
    target.failing.discard("mem://gone")  # the target answers now: so does getattr
    target.objects["mem://gone"] = b"back"
    assert (await fs.getattr(gone)).size == 4


async def test_a_whole_file_chunk_without_a_size_does_not_fail_its_listing() -> None:
    grid = ChunkGrid("x", (3,), ".")
    refs = DictReferences(
        explicit={"x/.zarray": Inline(b"{}")},
        grid_list=[grid],
        chunks={0: {0: Whole("mem://gone"), 2: Whole("mem://d")}},
    )
    fs, _ = make_fs(refs, MemoryTarget(objects={"mem://d": DATA}, failing={"mem://gone"}))
    listing = (await fs.readdir(await path_inode(fs, "x"), 0))[2:]
    assert [(name, size) for name, _, size, _ in listing] == [
        (b".zarray", 2),
        (b"0", UNRESOLVED),
        (b"2", len(DATA)),
    ]


def objects_fs(present: Sequence[int], **config: int) -> tuple[RefFilesystem, MemoryTarget, Reader]:
    """Grid ``g`` of ``CHUNKS`` chunks, each present one the whole of an object of its own
    (``mem://o<i>``, as an Icechunk array's chunks are to its store)."""
    refs = DictReferences(
        explicit={"g/.zarray": Inline(b"{}")},
        grid_list=[ChunkGrid("g", (CHUNKS,), ".")],
        chunks={0: {i: Range(f"mem://o{i}", 0, CHUNK) for i in present}},
    )
    target = MemoryTarget(objects={f"mem://o{i}": expected(i) for i in present})
    settings = {"neighbour_bytes": 4 * CHUNK, "neighbour_growth": 1, "late_growth": 1, **config}
    wired = wire(refs, target, ReadConfig(**settings))
    return wired.fs, target, wired.reader


async def read_grid_chunk(fs: RefFilesystem, number: int) -> bytes:
    handle = await fs.open(await path_inode(fs, f"g/{number}"), os.O_RDONLY)
    data = bytes(await fs.read(handle, 0, CHUNK))
    fs.release(handle)
    await trio.testing.wait_all_tasks_blocked()
    return data


async def test_in_order_chunks_of_objects_of_their_own_are_fetched_ahead_one_each() -> None:
    present = [0, 1, 2, 4, 5, 6, 7, 9, 10, 11]  # 3 and 8 were never written
    fs, target, reader = objects_fs(present)
    async with reader.running(), trio.open_nursery() as nursery:
        target.gate = gate = trio.Event()
        for number in present[:2]:
            nursery.start_soon(read_grid_chunk, fs, number)
            await trio.testing.wait_all_tasks_blocked()
        # g/1 opened after g/0 was read: g/1 and the three present chunks after it (the
        # window: four chunks) are requested at once, each on its own
        assert sorted(url for url, _, _ in target.ranges) == [
            "mem://o0",
            "mem://o1",
            "mem://o2",
            "mem://o4",
            "mem://o5",
        ]
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        for number in present[2:]:
            assert await read_grid_chunk(fs, number) == expected(number)
    # every object once, whole, though absent chunks lay between them
    assert sorted(target.ranges) == sorted((f"mem://o{i}", 0, CHUNK) for i in present)
    assert reader.statistics().prefetches == len(present) - 1  # all but g/0


async def test_chunks_of_objects_opened_out_of_order_are_not_fetched_ahead() -> None:
    fs, target, reader = objects_fs(range(CHUNKS))
    async with reader.running():
        for number in (5, 2, 9, 0, 7):
            assert await read_grid_chunk(fs, number) == expected(number)
    assert [url for url, _, _ in target.ranges] == [f"mem://o{i}" for i in (5, 2, 9, 0, 7)]
    assert reader.statistics().prefetches == 0


async def test_the_walk_along_a_chain_is_bounded_whatever_the_chunks_are() -> None:
    chunks: dict[int, Reference] = {i: Inline(expected(i)) for i in range(CHUNKS)}
    chunks.update({i: Range(f"mem://o{i}", 0, CHUNK) for i in (0, 1)})
    refs = DictReferences(
        explicit={"g/.zarray": Inline(b"{}")},
        grid_list=[ChunkGrid("g", (CHUNKS,), ".")],
        chunks={0: chunks},
    )
    target = MemoryTarget(objects={f"mem://o{i}": expected(i) for i in (0, 1)})
    wired = wire(refs, target, ReadConfig(neighbour_bytes=4 * CHUNK, neighbour_count=2))
    async with wired.reader.running():
        for number in (0, 1):
            assert await read_grid_chunk(wired.fs, number) == expected(number)
    # the chain from g/1 looked at four chunks (twice the count: g/1 to g/4), inline or not
    assert sorted(index for _, index in refs.chunk_calls if index >= 2) == [2, 3, 4]


# ---------------------------------------------------------------------- the served file


async def listed(fs: RefFilesystem, inode: Inode) -> list[tuple[bytes, Inode, int, int]]:
    """Return every entry of a listing, batch after batch as the adapter asks."""
    entries: list[tuple[bytes, Inode, int, int]] = []
    while batch := await fs.readdir(inode, entries[-1][3] if entries else 0):
        entries += batch
    return entries


class FakeServed:
    """A served file (``ServedFile``) whose size is known after ``size`` was awaited."""

    def __init__(self, data: bytes, name: str = "set.nc") -> None:
        self.data = data
        self.asked = False
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def size_now(self) -> int | None:
        return len(self.data) if self.asked else None

    async def size(self) -> int:
        self.asked = True
        return len(self.data)

    async def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]


async def test_the_served_file_is_listed_last_looked_up_and_read() -> None:
    served = FakeServed(b"CDF" * 1000)
    references = DictReferences(explicit={"a": Inline(b"x"), "dir/b": Inline(b"y")})
    fs = wire(references, served=served).fs
    listing = await listed(fs, ROOT_INODE)
    names = [entry[0] for entry in listing]
    assert names == [b".", b"..", b"a", b"dir", b"set.nc"]
    assert listing[-1][2] == UNRESOLVED  # not laid out yet: the listing does not wait
    assert await fs.readdir(ROOT_INODE, listing[-1][3]) == []
    attributes = await fs.lookup(ROOT_INODE, "set.nc")
    assert attributes is not None
    assert attributes.size == 3000
    assert (await fs.readdir(ROOT_INODE, listing[-2][3]))[0][2] == 3000
    handle = await fs.open(attributes.inode, os.O_RDONLY)
    assert not fs.is_virtual(attributes.inode)  # cached by the kernel like any file
    assert bytes(await fs.read(handle, 2998, 10)) == b"DF"
    fs.release(handle)
    assert await fs.listxattr(attributes.inode) == []
    directory = await path_inode(fs, "dir")
    assert await fs.lookup(directory, "set.nc") is None
    with pytest.raises(FilesystemError) as raised:
        await fs.opendir(attributes.inode)
    assert raised.value.errno == errno.ENOTDIR


async def test_a_key_of_the_set_wins_over_the_served_file() -> None:
    served = FakeServed(b"CDF")
    references = DictReferences(explicit={"set.nc": Inline(b"mine")})
    fs = wire(references, served=served).fs
    assert [entry[0] for entry in await listed(fs, ROOT_INODE)] == [b".", b"..", b"set.nc"]
    assert await read_all(fs, "set.nc") == b"mine"
    assert not served.asked
