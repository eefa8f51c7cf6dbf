"""The recorder: metadata kept in pages and read back, a payload placed and not kept."""

from __future__ import annotations

import pytest

from refmount.netcdf.recorder import PAGE, Recorder


def test_writes_are_kept_and_read_back_with_zeros_between() -> None:
    recorder = Recorder()
    recorder.seek(10)
    recorder.write(b"abc")
    recorder.seek(PAGE - 2)
    recorder.write(memoryview(b"spans two pages"))
    recorder.seek(0)
    assert recorder.read(13) == bytes(10) + b"abc"
    recorder.seek(PAGE - 2)
    assert recorder.read(100) == b"spans two pages"  # the end of the file
    assert recorder.size == PAGE - 2 + 15
    pages = recorder.pages()
    assert pages.numbers == [0, 1]
    assert pages.read(8, 14) == bytes(2) + b"abc" + bytes(1)
    assert pages.read(PAGE - 3, PAGE + 3) == b"\0spans"
    assert pages.read(3 * PAGE, 3 * PAGE + 2) == bytes(2)  # never written: zeros


def test_the_payload_expected_is_placed_not_kept() -> None:
    recorder = Recorder()
    recorder.write(b"header")
    recorder.expect_payload(5)
    recorder.seek(100)
    recorder.write(b"12")  # metadata of another length is kept
    recorder.write(b"chunk")
    assert recorder.take_payload() == 102
    recorder.write(b"after")  # nothing expected: kept
    pages = recorder.pages()
    assert pages.read(100, 112) == b"12" + bytes(5) + b"after"
    assert recorder.size == 112


def test_a_payload_that_never_came_is_an_error() -> None:
    recorder = Recorder()
    recorder.expect_payload(4)
    recorder.write(b"abc")
    with pytest.raises(RuntimeError, match="in one piece"):
        recorder.take_payload()


def test_truncate_sets_the_size_and_drops_pages_beyond() -> None:
    recorder = Recorder()
    recorder.seek(3 * PAGE)
    recorder.write(b"x")
    recorder.truncate(PAGE)
    assert recorder.size == PAGE
    assert recorder.pages().numbers == []
