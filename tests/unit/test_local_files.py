"""Tests of local target files: kept-open descriptors, page-cache reads, safe closing."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from refmount import local_files
from refmount.local_files import LocalFiles
from tests.pagecache import drop_from_page_cache, skip_unless_nowait, write_synced

DATA = bytes(range(256)) * 64  # 16 KiB


def write(path: Path, data: bytes = DATA) -> str:
    return write_synced(path, data)


async def test_reads_ranges_and_reports_the_status_of_the_file_read(tmp_path: Path) -> None:
    path = write(tmp_path / "a.bin")
    files = LocalFiles(trio.CapacityLimiter(2))
    data, status = await files.read(path, 100, 300)
    assert data == DATA[100:300]
    assert status.st_size == len(DATA)
    assert (await files.read(path, len(DATA) - 10, len(DATA) + 50))[0] == DATA[-10:]
    assert (await files.read(path, len(DATA) + 5, len(DATA) + 50))[0] == b""
    assert files.open_count == 1  # one descriptor for all three reads
    with pytest.raises(FileNotFoundError):
        await files.read(str(tmp_path / "missing"), 0, 1)


async def test_read_now_answers_from_the_page_cache_only(tmp_path: Path) -> None:
    skip_unless_nowait(tmp_path)
    path = write(tmp_path / "a.bin")
    files = LocalFiles(trio.CapacityLimiter(2))
    assert files.read_now(path, 0, 10) is None  # not open yet: opening is a path look-up
    await files.read(path, 0, 10)
    found = files.read_now(path, 1000, 5000)
    assert found is not None
    assert found[0] == DATA[1000:5000]
    assert found[1].st_size == len(DATA)
    drop_from_page_cache(path)
    if files.read_now(path, 8192, 12288) is None:  # the disk would be read: not now
        assert (await files.read(path, 8192, 12288))[0] == DATA[8192:12288]
    else:  # pragma: no cover - the kernel kept the pages after all
        pytest.skip("the page cache kept the file's pages")


async def test_a_filesystem_refusing_nowait_reads_goes_to_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "a.bin")
    calls: list[int] = []

    def refuse(fd: int, buffers: Any, offset: int, flags: int = 0) -> int:
        calls.append(flags)
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(local_files, "NOWAIT", 8)
    monkeypatch.setattr(os, "preadv", refuse)
    files = LocalFiles(trio.CapacityLimiter(2))
    assert (await files.read(path, 0, 100))[0] == DATA[:100]
    assert (await files.read(path, 100, 200))[0] == DATA[100:200]
    assert files.read_now(path, 0, 100) is None
    assert calls == [8]  # asked once, then never again for this file


async def test_the_least_recently_used_descriptor_is_closed(tmp_path: Path) -> None:
    paths = [write(tmp_path / f"{i}.bin", bytes([i]) * 10) for i in range(3)]
    files = LocalFiles(trio.CapacityLimiter(2), max_open=2)
    before = len(os.listdir("/proc/self/fd"))
    for path in paths:
        await files.read(path, 0, 1)
    assert files.open_count == 2
    assert len(os.listdir("/proc/self/fd")) == before + 2
    assert (await files.read(paths[0], 0, 10))[0] == bytes([0]) * 10  # opened again
    files.close()
    assert files.open_count == 0
    assert len(os.listdir("/proc/self/fd")) == before


async def test_a_descriptor_is_not_closed_while_a_thread_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "a.bin")
    monkeypatch.setattr(local_files, "NOWAIT", 0)  # every read goes to a thread
    entered, go_on = threading.Event(), threading.Event()
    original = local_files._read_and_stat
    seen: list[int] = []

    def held(fd: int, start: int, end: int) -> tuple[bytes, os.stat_result]:
        seen.append(fd)
        entered.set()
        go_on.wait(10)
        return original(fd, start, end)

    monkeypatch.setattr(local_files, "_read_and_stat", held)
    files = LocalFiles(trio.CapacityLimiter(2))
    results: list[bytes] = []

    async def reading() -> None:
        results.append((await files.read(path, 0, 64))[0])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reading)
        await trio.to_thread.run_sync(entered.wait, 10)
        files.forget(path)  # as eviction or a replaced file does
        files.close()
        os.fstat(seen[0])  # still open: the read holds it
        go_on.set()
    assert results == [DATA[:64]]
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(seen[0])


async def test_forget_makes_the_next_read_open_the_path_again(tmp_path: Path) -> None:
    path = write(tmp_path / "a.bin")
    files = LocalFiles(trio.CapacityLimiter(2))
    await files.read(path, 0, 4)
    write(tmp_path / "new.bin", b"NEW!" * 4)
    os.replace(tmp_path / "new.bin", path)
    assert (await files.read(path, 0, 4))[0] == DATA[:4]  # the old file, still open
    files.forget(path)
    assert (await files.read(path, 0, 4))[0] == b"NEW!"
