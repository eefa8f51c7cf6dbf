"""Tests of the disk cache: what is fetched once is read from disk, only missing pieces are
fetched, anything wrong with the disk falls back to the network, the size bound holds."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
import trio
import trio.testing

from refmount.store.disk_cache import DiskCache, default_size, open_directory, sweep
from refmount.store.disk_entry import PIECE

SIZE = 10 * PIECE + 123
DATA = os.urandom(SIZE)


class Target:
    """The network, as the cache sees it: counts the ranges it is asked for."""

    def __init__(self, data: bytes = DATA) -> None:
        self.data = data
        self.asked: list[tuple[int, int]] = []

    async def fetch(self, start: int, end: int) -> bytes:
        self.asked.append((start, end))
        return self.data[start:end]


def cache(path: Path, max_size: int = 1 << 30) -> DiskCache:
    return DiskCache(str(path), max_size, trio.CapacityLimiter(4))


async def test_a_range_fetched_once_is_read_from_disk_by_the_next_mount(tmp_path: Path) -> None:
    target = Target()
    first = cache(tmp_path / "c")
    assert await first.read("u", "v1", SIZE, 100, 5000, target.fetch) == DATA[100:5000]
    assert target.asked == [(0, PIECE)]  # whole pieces are fetched and kept
    first.close()
    second = cache(tmp_path / "c")
    assert await second.read("u", "v1", SIZE, 10, 6000, target.fetch) == DATA[10:6000]
    assert len(target.asked) == 1
    figures = second.statistics()
    assert (figures.hits, figures.misses, figures.bytes_read) == (1, 0, PIECE)
    second.close()


async def test_another_version_is_another_entry(tmp_path: Path) -> None:
    target = Target()
    disk = cache(tmp_path / "c")
    await disk.read("u", "v1", SIZE, 0, 10, target.fetch)
    newer = Target(os.urandom(SIZE))
    assert await disk.read("u", "v2", SIZE, 0, 10, newer.fetch) == newer.data[:10]
    assert newer.asked == [(0, PIECE)]
    disk.close()


async def test_only_the_missing_runs_of_a_range_are_fetched(tmp_path: Path) -> None:
    target = Target()
    disk = cache(tmp_path / "c")
    await disk.read("u", "v", SIZE, 2 * PIECE, 3 * PIECE, target.fetch)
    await disk.read("u", "v", SIZE, 5 * PIECE, 6 * PIECE, target.fetch)
    target.asked.clear()
    got = await disk.read("u", "v", SIZE, PIECE + 5, SIZE, target.fetch)
    assert got == DATA[PIECE + 5 :]
    assert target.asked == [(PIECE, 2 * PIECE), (3 * PIECE, 5 * PIECE), (6 * PIECE, SIZE)]
    target.asked.clear()
    assert await disk.read("u", "v", SIZE, 0, SIZE, target.fetch) == DATA
    assert target.asked == [(0, PIECE)]
    disk.close()


async def test_corrupted_pieces_are_fetched_again(tmp_path: Path) -> None:
    target = Target()
    disk = cache(tmp_path / "c")
    await disk.read("u", "v", SIZE, 0, 2 * PIECE, target.fetch)
    (data_file,) = (tmp_path / "c").glob("*.data")
    data_file.write_bytes(b"\0" * 10 + data_file.read_bytes()[10:])
    target.asked.clear()
    assert await disk.read("u", "v", SIZE, 0, 2 * PIECE, target.fetch) == DATA[: 2 * PIECE]
    assert target.asked == [(0, PIECE)]
    disk.close()


async def test_a_short_answer_from_the_target_is_served_but_not_kept(tmp_path: Path) -> None:
    target = Target(DATA[: 3 * PIECE])  # shorter than the version's size says
    disk = cache(tmp_path / "c")
    assert await disk.read("u", "v", SIZE, 0, 4 * PIECE, target.fetch) == DATA[: 3 * PIECE]
    assert disk.statistics().bytes_written == 0
    disk.close()


async def test_a_directory_that_fails_serves_from_the_network_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = Target()
    disk = cache(tmp_path / "c")
    os.chmod(tmp_path / "c", 0o500)  # read-only (root writes anyway: remove it instead)
    if os.geteuid() == 0:
        os.chmod(tmp_path / "c", 0o700)
        os.rmdir(tmp_path / "c")  # vanished
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert await disk.read("u", "v", SIZE, 0, 100, target.fetch) == DATA[:100]
    assert len(target.asked) == 3
    assert disk.statistics().errors == 3
    warnings = [r.getMessage() for r in caplog.records if "disk cache" in r.getMessage()]
    assert len(warnings) == 1
    assert "reading from the network" in warnings[0]
    disk.close()


async def test_the_size_bound_holds_least_recently_used_first(tmp_path: Path) -> None:
    target = Target()
    entry_bytes = PIECE + 4096  # one piece of data, and its log's block
    disk = cache(tmp_path / "c", max_size=3 * entry_bytes)
    for name in ("a", "b", "c", "d", "e"):
        await disk.read(name, "v", SIZE, 0, PIECE, target.fetch)
        await trio.testing.wait_all_tasks_blocked()  # let a sweep under way finish
        await trio.sleep(0.01)
    await trio.sleep(0.2)
    on_disk = sum(p.stat().st_blocks * 512 for p in (tmp_path / "c").iterdir())
    assert on_disk <= disk.max_size
    assert disk.statistics().evictions >= 2
    target.asked.clear()
    await disk.read("e", "v", SIZE, 0, PIECE, target.fetch)  # the newest is still there
    assert target.asked == []
    await disk.read("a", "v", SIZE, 0, PIECE, target.fetch)  # the oldest went first
    assert target.asked == [(0, PIECE)]
    disk.close()


def test_a_sweep_of_a_directory_under_its_size_removes_nothing(tmp_path: Path) -> None:
    (tmp_path / "x.log").write_bytes(b"1")
    (tmp_path / "x.data").write_bytes(b"1")
    (tmp_path / "unrelated").write_bytes(b"1" * 100_000)  # never ours to remove
    directory = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert sweep(directory, 1 << 20) == []
        assert sweep(directory, 1) == ["x"]
    finally:
        os.close(directory)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unrelated"]


def test_the_directory_is_made_private_and_one_open_to_others_is_refused(tmp_path: Path) -> None:
    os.close(open_directory(str(tmp_path / "new")))
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    (tmp_path / "open").mkdir(mode=0o755)
    os.chmod(tmp_path / "open", 0o755)
    with pytest.raises(OSError, match="others may use it"):
        open_directory(str(tmp_path / "open"))
    if os.geteuid() == 0:
        (tmp_path / "theirs").mkdir(mode=0o700)
        os.chown(tmp_path / "theirs", 12345, 12345)
        with pytest.raises(OSError, match="belongs to uid 12345"):
            open_directory(str(tmp_path / "theirs"))
    assert PIECE <= default_size(str(tmp_path)) <= 10 * 1024**3
