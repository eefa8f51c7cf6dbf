"""Tests of local target files: kept-open descriptors, page-cache reads, safe closing."""

from __future__ import annotations

import errno
import logging
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from refmount.store import local_files
from refmount.store.local_files import LocalFiles
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


@pytest.fixture
def special_files(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A FIFO with no writer, a listening socket's path, a character device, a directory."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    (tmp_path / "dir").mkdir()
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(sock_path))
        listener.listen()
        yield {
            "a FIFO": str(fifo),
            "a socket": str(sock_path),
            "a character device": "/dev/zero",
            "a directory": str(tmp_path / "dir"),
        }


async def test_only_regular_files_are_read_and_nothing_blocks_on_open(
    special_files: dict[str, str],
) -> None:
    files = LocalFiles(trio.CapacityLimiter(2))
    for kind, path in special_files.items():
        # a socket cannot be opened at all (ENXIO); the others open and are refused
        expected = "No such device" if kind == "a socket" else f"not a regular file \\({kind}\\)"
        with trio.fail_after(10), pytest.raises(OSError, match=expected) as caught:
            await files.read(path, 0, 10)
        assert caught.value.errno == (errno.ENXIO if kind == "a socket" else errno.EINVAL)
        with trio.fail_after(10), pytest.raises(OSError, match=expected):
            await files.status(path)  # a whole-file size is never a device's 0
    assert files.open_count == 0
    assert files.abandoned == 0


async def test_status_describes_the_open_file(tmp_path: Path) -> None:
    path = write(tmp_path / "a.bin")
    files = LocalFiles(trio.CapacityLimiter(2))
    assert (await files.status(path)).st_size == len(DATA)
    assert files.open_count == 1


async def test_targets_inside_a_forbidden_directory_are_refused(tmp_path: Path) -> None:
    mount = tmp_path / "mnt"
    (mount / "sub").mkdir(parents=True)
    inside = write(mount / "sub" / "a.bin")
    (tmp_path / "link").symlink_to(mount / "sub")
    outside = write(tmp_path / "b.bin")
    files = LocalFiles(trio.CapacityLimiter(2), forbidden=[str(mount)])
    relative = os.path.relpath(inside)  # noqa: ASYNC240 - no I/O
    for path in (
        inside,
        str(tmp_path / "link" / "a.bin"),
        relative,
        str(mount / "sub/../sub/a.bin"),
    ):
        with pytest.raises(OSError, match="inside the mount itself") as caught:
            await files.read(path, 0, 4)
        assert caught.value.errno == errno.EINVAL
    assert (await files.read(outside, 0, 4))[0] == DATA[:4]


@pytest.fixture
def stuck_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Make reads of files named ``stuck*`` block in their thread until the event is set."""
    monkeypatch.setattr(local_files, "NOWAIT", 0)  # every read goes to a thread
    original = local_files._read_and_stat
    release = threading.Event()

    def maybe_stuck(fd: int, start: int, end: int) -> tuple[bytes, os.stat_result]:
        if os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1].startswith("stuck"):
            release.wait(30)
        return original(fd, start, end)

    monkeypatch.setattr(local_files, "_read_and_stat", maybe_stuck)
    yield release
    release.set()


async def test_a_stuck_read_is_abandoned_and_holds_only_its_targets_threads(
    tmp_path: Path, stuck_reads: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="refmount.store.local_files")
    stuck = write(tmp_path / "stuck.bin")
    other = write(tmp_path / "other.bin")
    shared = trio.CapacityLimiter(3)
    files = LocalFiles(shared, per_target=2)
    threads_before = threading.active_count()
    for _ in range(4):  # the first two start a thread each; the last two wait for a slot
        with pytest.raises(trio.TooSlowError):
            with trio.fail_after(0.3):
                await files.read(stuck, 0, 10)
    assert files.abandoned == 2
    left_behind = [r for r in caplog.records if "left behind" in r.getMessage()]
    assert len(left_behind) == 1  # one line per stuck file, not per read
    assert stuck in left_behind[0].getMessage()
    assert threading.active_count() - threads_before <= 2
    assert shared.borrowed_tokens == 0  # abandoned threads leave the shared limiter
    for _ in range(5):  # another file still gets threads
        with trio.fail_after(10):
            assert (await files.read(other, 0, 10))[0] == DATA[:10]
    files.forget(stuck)
    stuck_reads.set()
    await until_returned(files)
    assert f"{stuck}: every thread left behind has returned" in caplog.text
    assert (await files.read(stuck, 5, 10))[0] == DATA[5:10]  # opened again, readable


async def test_an_abandoned_thread_keeps_its_descriptor_open_until_it_returns(
    tmp_path: Path, stuck_reads: threading.Event
) -> None:
    stuck = write(tmp_path / "stuck.bin")
    files = LocalFiles(trio.CapacityLimiter(2))
    with pytest.raises(trio.TooSlowError), trio.fail_after(0.3):
        await files.read(stuck, 0, 10)
    fds = [fd for fd in os.listdir("/proc/self/fd") if _names(fd, stuck)]
    assert len(fds) == 1
    files.close()
    assert os.fstat(int(fds[0]))  # the abandoned read still holds it
    stuck_reads.set()
    await until_returned(files)
    assert not [fd for fd in os.listdir("/proc/self/fd") if _names(fd, stuck)]


async def until_returned(files: LocalFiles) -> None:
    """Wait until every abandoned thread of ``files`` has returned."""
    with trio.fail_after(10):
        while files.abandoned:  # noqa: ASYNC110 - a count kept on the loop's thread
            await trio.sleep(0.01)


def _names(fd: str, name: str) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").endswith(name)
    except OSError:
        return False


def test_real_path_is_realpath_and_never_looks_inside_what_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = str(tmp_path)
    os.makedirs(f"{top}/a/b/c")
    os.symlink("../..", f"{top}/a/b/c/up")
    os.symlink(f"{top}/a/b", f"{top}/abs")
    os.symlink("b/c/up/b", f"{top}/a/rel")
    monkeypatch.chdir(tmp_path / "a")
    for path in (
        top,
        f"{top}/a/b/c/up",
        f"{top}/a/b/c/up/b/c/../../x/y",
        f"{top}/abs/c/up/rel/c",
        f"{top}/a/rel/../b",
        f"{top}/missing/../a",
        f"{top}//a/./b/",
        "/",
        "/..",
        "rel/c/../..",
        "b/c/up/b/c/up/b/c/up",
    ):
        assert local_files.real_path(path) == os.path.realpath(path), path
    looked: list[str] = []
    original = os.lstat

    def lstat(path: str) -> os.stat_result:
        looked.append(path)
        return original(path)

    monkeypatch.setattr(os, "lstat", lstat)
    with pytest.raises(OSError, match="inside the mount itself") as caught:
        local_files.real_path(f"{top}/abs/c/x", (f"{top}/a/b",))
    assert caught.value.errno == errno.EINVAL
    assert not [path for path in looked if path.startswith(f"{top}/a/b")]
