"""Tests of one disk cache entry: pieces written and read back checked, records that survive a
crash or an attack only as far as their checksums allow, files that are not ours refused."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from refmount.store.disk_entry import (
    LOG_START,
    MAGIC,
    PIECE,
    RECORD_SIZE,
    DiskEntry,
    EntryGone,
    pieces_of,
)

SIZE = 3 * PIECE + 100
DATA = bytes(range(256)) * (SIZE // 256) + bytes(SIZE % 256)
DIGEST = hashlib.sha256(b"url\0version").digest()


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[int]:
    descriptor = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield descriptor
    os.close(descriptor)


def entry(directory: int, size: int = SIZE) -> DiskEntry:
    return DiskEntry(directory, "k", DIGEST, size)


def test_pieces_written_are_read_back_and_only_whole_pieces_are_kept(directory: int) -> None:
    first = entry(directory)
    assert first.missing(0, 3) == [(0, 4)]
    # pieces 1, 2 and the short last one (3); a partial piece is not kept
    assert first.write(1, DATA[PIECE:]) == len(DATA) - PIECE
    assert first.write(0, DATA[: PIECE - 1]) == 0
    assert first.missing(0, 3) == [(0, 1)]
    data, bad = first.read(1, 4)
    assert (data, bad) == (DATA[PIECE:], [])
    again = entry(directory)  # another mount, or this one after a restart
    assert again.missing(0, 3) == [(0, 1)]
    assert again.read(2, 3) == (DATA[2 * PIECE : 3 * PIECE], [])
    first.close()
    again.close()


def test_records_written_by_another_mount_are_seen_on_refresh(directory: int) -> None:
    reader, writer = entry(directory), entry(directory)
    writer.write(0, DATA[:PIECE])
    assert reader.missing(0, 0) == [(0, 1)]
    reader.refresh()
    assert reader.missing(0, 0) == []
    reader.close()
    writer.close()


def test_bytes_that_fail_their_checksum_are_forgotten(tmp_path: Path, directory: int) -> None:
    cached = entry(directory)
    cached.write(0, DATA[: 2 * PIECE])
    with open(tmp_path / "k.data", "r+b") as file:  # a bit flipped on disk
        file.seek(PIECE + 7)
        file.write(bytes([DATA[PIECE + 7] ^ 1]))
    data, bad = cached.read(0, 2)
    assert bad == [1]
    assert data[:PIECE] == DATA[:PIECE]
    assert cached.missing(0, 1) == [(1, 2)]
    cached.close()


def test_a_torn_or_forged_record_is_ignored(tmp_path: Path, directory: int) -> None:
    cached = entry(directory)
    cached.write(0, DATA[:PIECE])
    cached.close()
    log = tmp_path / "k.log"
    whole = log.read_bytes()
    record = whole[-RECORD_SIZE:]
    forged = bytearray(record)
    forged[0] = 2  # piece 2 claimed, the record's own checksum now wrong
    log.write_bytes(whole + bytes(forged) + record[:5])  # and a torn record at the end
    again = entry(directory)
    assert again.missing(0, 3) == [(1, 4)]
    again.close()


def test_records_after_a_torn_one_start_at_a_record_boundary(
    tmp_path: Path, directory: int
) -> None:
    cached = entry(directory)
    cached.write(0, DATA[:PIECE])
    cached.close()
    log = tmp_path / "k.log"
    os.truncate(log, log.stat().st_size - RECORD_SIZE // 2)  # a crash, a full disk
    writer = entry(directory)
    assert writer.missing(0, 3) == [(0, 4)]
    writer.write(1, DATA[PIECE : 3 * PIECE])
    writer.close()
    assert (log.stat().st_size - LOG_START) % RECORD_SIZE == 0
    again = entry(directory)
    assert again.missing(0, 3) == [(0, 1), (3, 4)]  # without the padding: all four missing
    again.close()


def test_a_log_of_another_layout_or_target_starts_the_entry_afresh(
    tmp_path: Path, directory: int
) -> None:
    cached = entry(directory)
    cached.write(0, DATA[:PIECE])
    cached.close()
    other = entry(directory, SIZE + 1)  # the same key for another size: never its pieces
    assert other.missing(0, 3) == [(0, 4)]
    other.close()
    assert (tmp_path / "k.log").read_bytes().startswith(MAGIC)
    assert (tmp_path / "k.data").stat().st_size == 0


def test_files_that_are_not_regular_files_of_ours_are_refused(
    tmp_path: Path, directory: int
) -> None:
    (tmp_path / "elsewhere").write_bytes(b"x")
    (tmp_path / "k.data").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):  # never followed
        entry(directory)
    (tmp_path / "k.data").unlink()
    os.mkfifo(tmp_path / "k.data")
    with pytest.raises(OSError, match="not a regular file"):
        entry(directory)
    (tmp_path / "k.data").unlink()
    if os.geteuid() == 0:
        (tmp_path / "k.data").write_bytes(b"")
        os.chown(tmp_path / "k.data", 12345, 12345)
        with pytest.raises(OSError, match="belongs to uid 12345"):
            entry(directory)


def test_an_entry_removed_or_closed_says_so(tmp_path: Path, directory: int) -> None:
    cached = entry(directory)
    os.unlink(tmp_path / "k.log")
    os.unlink(tmp_path / "k.data")
    with pytest.raises(EntryGone):
        cached.write(0, DATA[:PIECE])
    cached.close()
    with pytest.raises(EntryGone):
        cached.read(0, 1)
    cached.close()  # again: nothing


def test_pieces_of_a_range() -> None:
    assert pieces_of(0, 1) == (0, 0)
    assert pieces_of(PIECE - 1, PIECE + 1) == (0, 1)
    assert pieces_of(PIECE, 2 * PIECE) == (1, 1)
