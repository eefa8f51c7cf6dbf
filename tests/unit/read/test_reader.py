"""Tests of the read path against a counting, fault-injecting in-memory target."""

from __future__ import annotations

import errno

import pytest
import trio
import trio.testing

from refmount.config import ReadConfig, RetryConfig
from refmount.errors import (
    RecentFailureError,
    ShortReadError,
    TargetAccessError,
    TargetChangedError,
    TargetError,
    TargetReadError,
)
from refmount.model import Inline, Range, Whole
from refmount.read.failures import FAILED_RANGE_SECONDS
from refmount.read.reader import Reader
from tests.fakes import MemoryTarget, RaisingTarget
from tests.unit.read.conftest import DATA, reader_for


async def test_inline_reads_slice_without_io(target: MemoryTarget) -> None:
    reader = reader_for(target)
    ref = Inline(b"hello world")
    assert await reader.read("k", ref, 0, 5) == b"hello"
    assert await reader.read("k", ref, 6, 100) == b"world"
    assert await reader.read("k", ref, 11, 10) == b""
    assert await reader.size("k", ref) == 11
    assert target.ranges == []


async def test_small_range_is_fetched_whole_once(target: MemoryTarget) -> None:
    reader = reader_for(target)
    ref = Range("mem://obj", 100, 1000)
    assert await reader.read("k", ref, 0, 10) == DATA[100:110]
    assert await reader.read("k", ref, 990, 100) == DATA[1090:1100]
    assert await reader.read("k", ref, 1000, 100) == b""
    assert await reader.read("k", ref, 5000, 1) == b""
    assert target.ranges == [("mem://obj", 100, 1100)]
    stats = reader.statistics()
    assert (stats.fetches, stats.bytes_fetched, stats.cache_hits) == (1, 1000, 1)


async def test_an_entry_whose_bytes_were_all_served_leaves_the_cache(
    target: MemoryTarget,
) -> None:
    reader = reader_for(target)
    ref = Range("mem://obj", 100, 1000)
    for offset in (300, 0, 600):  # in any order: served bytes are counted
        assert await reader.read("k", ref, offset, 300) == DATA[100 + offset : 400 + offset]
    assert reader.statistics().bytes_cached == 1000
    assert await reader.read("k", ref, 900, 300) == DATA[1000:1100]  # the last 100 bytes
    assert reader.statistics().bytes_cached == 0
    assert target.ranges == [("mem://obj", 100, 1100)]
    # the kernel keeps what it was sent; if it asks again, the bytes are fetched again
    assert await reader.read("k", ref, 0, 4096) == DATA[100:1100]
    assert target.ranges == [("mem://obj", 100, 1100)] * 2
    assert reader.statistics().bytes_cached == 0  # all of it at once: gone at once


async def test_a_block_whose_bytes_were_all_served_leaves_the_cache(
    target: MemoryTarget,
) -> None:
    reader = reader_for(target, whole_fetch_limit=1024, block_size=4096)
    ref = Range("mem://obj", 0, 10_000)
    assert await reader.read("k", ref, 2048, 4096) == DATA[2048:6144]  # 2 blocks, in part
    assert reader.statistics().bytes_cached == 8192
    assert await reader.read("k", ref, 0, 2048) == DATA[:2048]  # block 0 is through
    assert reader.statistics().bytes_cached == 4096
    assert await reader.read("k", ref, 6144, 1000) == DATA[6144:7144]  # block 1 stays
    assert target.ranges == [("mem://obj", 0, 4096), ("mem://obj", 4096, 8192)]


MIB_OBJECT = bytes(range(256)) * 4096  # 1 MiB


async def test_first_bytes_of_a_large_cold_entry_are_fetched_alone() -> None:
    target = MemoryTarget(objects={"mem://big": MIB_OBJECT})
    reader = reader_for(target)
    ref = Range("mem://big", 4096, 512 * 1024)
    assert await reader.read("k", ref, 0, 16384) == MIB_OBJECT[4096 : 4096 + 16384]
    assert target.ranges == [("mem://big", 4096, 4096 + 16384)]
    assert reader.statistics().bytes_cached == 0
    # a reader that goes on asks beyond them: the entry is fetched whole
    assert await reader.read("k", ref, 16384, 131072) == MIB_OBJECT[4096 + 16384 : 4096 + 147456]
    assert target.ranges[1:] == [("mem://big", 4096, 4096 + 512 * 1024)]
    assert await reader.read("k", ref, 0, 16384) == MIB_OBJECT[4096 : 4096 + 16384]  # cached now
    assert len(target.ranges) == 2
    # the first bytes count as served: the entry leaves once the rest went out too
    assert (
        await reader.read("k", ref, 147456, 512 * 1024) == MIB_OBJECT[4096 + 147456 : 4096 + 524288]
    )
    assert reader.statistics().bytes_cached == 0


@pytest.mark.parametrize(
    ("length", "offset", "size"),
    [
        (512 * 1024, 0, 128 * 1024),  # a large first read: what sequential readers send
        (128 * 1024, 0, 4096),  # a small entry: fetching it whole costs about as much
        (512 * 1024, 4096, 4096),  # not at the start: random reads go on in the entry
    ],
)
async def test_other_first_reads_fetch_the_entry_whole(length: int, offset: int, size: int) -> None:
    target = MemoryTarget(objects={"mem://big": MIB_OBJECT})
    reader = reader_for(target)
    ref = Range("mem://big", 0, length)
    assert await reader.read("k", ref, offset, size) == MIB_OBJECT[offset : offset + size]
    assert target.ranges == [("mem://big", 0, length)]


async def test_data_at_hand_is_taken_as_asked_without_a_request_or_cache(
    target: MemoryTarget,
) -> None:
    target.at_hand.add("mem://obj")
    reader = reader_for(target)
    ref = Range("mem://obj", 100, 1000)
    assert await reader.read("k", ref, 0, 10) == DATA[100:110]
    assert await reader.read("k", ref, 10, 10) == DATA[110:120]
    assert await reader.read("k", ref, 995, 10) == DATA[1095:1100]
    assert target.immediate == [
        ("mem://obj", 100, 110),
        ("mem://obj", 110, 120),
        ("mem://obj", 1095, 1100),
    ]
    assert target.ranges == []
    stats = reader.statistics()
    assert (stats.fetches, stats.bytes_fetched, stats.cache_hits, stats.bytes_served) == (
        3,
        25,
        0,
        25,
    )
    target.truncate["mem://obj"] = 500  # what is at hand is short: the request decides
    with pytest.raises(ShortReadError):
        await reader.read("k", Range("mem://obj", 400, 200), 90, 20)
    assert target.ranges == [("mem://obj", 400, 600)]


async def test_empty_range_needs_no_request(target: MemoryTarget) -> None:
    reader = reader_for(target)
    assert await reader.read("k", Range("mem://obj", 5, 0), 0, 4096) == b""
    assert target.ranges == []


async def test_large_range_is_fetched_in_aligned_blocks(target: MemoryTarget) -> None:
    reader = reader_for(target, whole_fetch_limit=1024, block_size=4096)
    ref = Range("mem://obj", 10, 10_000)
    assert await reader.read("k", ref, 4000, 200) == DATA[4010:4210]
    assert target.ranges == [("mem://obj", 10, 4106), ("mem://obj", 4106, 8202)]
    assert await reader.read("k", ref, 9000, 5000) == DATA[9010:10010]
    assert target.ranges[-1] == ("mem://obj", 8202, 10010)
    assert len(target.ranges) == 3


async def test_whole_reference_size_is_asked_once(target: MemoryTarget) -> None:
    reader = reader_for(target)
    ref = Whole("mem://obj")
    assert reader.known_size(ref) is None
    assert await reader.size("k", ref) == len(DATA)
    assert await reader.size("k", ref) == len(DATA)
    assert reader.known_size(ref) == len(DATA)
    assert await reader.read("k", ref, 16_000, 1000) == DATA[16_000:]
    assert target.sizes == ["mem://obj"]
    assert target.ranges == [("mem://obj", 0, len(DATA))]


async def test_short_target_is_an_error_never_padding(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.truncate["mem://obj"] = 1050
    reader = reader_for(target)
    ref = Range("mem://obj", 1000, 100)
    with pytest.raises(ShortReadError) as caught:
        await reader.read("x/0.0", ref, 0, 4096)
    assert caught.value.key is None  # the filesystem attaches it (for_key)
    assert caught.value.url == "mem://obj"
    assert "returned 50 bytes, expected 100" in str(caught.value)
    del target.truncate["mem://obj"]
    await trio.sleep(FAILED_RANGE_SECONDS)
    assert await reader.read("x/0.0", ref, 0, 4096) == DATA[1000:1100]  # errors are not cached


async def test_a_range_that_just_failed_fails_again_at_once_then_is_asked_again(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.flaky["mem://obj"] = 10**6
    retry = RetryConfig(timeout=5.0, retries=2, backoff_initial=0.1, backoff_max=1.0)
    reader = reader_for(target, retry, whole_fetch_limit=4096, block_size=1024)
    ref = Range("mem://obj", 0, 8192)
    with pytest.raises(TargetReadError, match="after 3 attempts"):
        await reader.read("k", ref, 0, 2048)  # two blocks: the first one fails
    assert len(target.ranges) == 3
    # the kernel asks again at once for a page of it: no new request, no second report
    with pytest.raises(RecentFailureError, match="failed a moment ago") as again:
        await reader.read("k", ref, 512, 256)
    assert again.value.errno == errno.EIO
    assert again.value.url == "mem://obj"
    assert len(target.ranges) == 3
    assert reader.statistics().errors == 2
    # another range of the same target is asked for as usual
    with pytest.raises(TargetReadError):
        await reader.read("k", ref, 4096, 100)
    assert len(target.ranges) == 6
    await trio.sleep(FAILED_RANGE_SECONDS)
    target.flaky["mem://obj"] = 0
    assert await reader.read("k", ref, 512, 256) == DATA[512:768]


async def test_a_refused_range_keeps_its_errno_when_it_fails_again_at_once() -> None:
    target = RaisingTarget(objects={"/outside/file": DATA})
    target.raises["/outside/file"] = TargetAccessError("/outside/file", "outside the roots")
    reader = Reader(target, ReadConfig(), RetryConfig(retries=0))
    ref = Range("/outside/file", 0, 10)
    with pytest.raises(TargetAccessError):
        await reader.read("k", ref, 0, 10)
    with pytest.raises(RecentFailureError) as again:
        await reader.read("k", ref, 0, 10)
    assert again.value.errno == errno.EACCES
    assert len(target.ranges) == 1


async def test_failing_target_names_the_url(target: MemoryTarget) -> None:
    target.failing.add("mem://obj")
    reader = reader_for(target)
    with pytest.raises(TargetReadError) as caught:
        await reader.read("a/b", Range("mem://obj", 0, 10), 0, 10)
    assert "mem://obj: read failed" in str(caught.value)
    with pytest.raises(TargetReadError, match="cannot get size"):
        await reader.size("w", Whole("mem://obj"))
    assert reader.statistics().errors == 2


async def test_concurrent_readers_share_one_request(target: MemoryTarget) -> None:
    gate = trio.Event()
    target.gate = gate
    reader = reader_for(target)
    ref = Range("mem://obj", 0, 4096)
    results: list[bytes] = []

    async def read(offset: int) -> None:
        results.append(bytes(await reader.read("k", ref, offset, 1024)))

    async with trio.open_nursery() as nursery:
        for offset in (0, 1024, 2048, 3072):
            nursery.start_soon(read, offset)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert sorted(results) == sorted(DATA[o : o + 1024] for o in (0, 1024, 2048, 3072))
    assert target.ranges == [("mem://obj", 0, 4096)]


async def test_concurrent_readers_share_one_failure(target: MemoryTarget) -> None:
    gate = trio.Event()
    target.gate = gate
    target.failing.add("mem://obj")
    reader = reader_for(target)
    ref = Range("mem://obj", 0, 10)
    failures: list[TargetError] = []

    async def read() -> None:
        try:
            await reader.read("k", ref, 0, 10)
        except TargetError as error:
            failures.append(error)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert len(failures) == 3
    assert len(target.ranges) == 1
    # the leader's failure is reported once; the waiters' repeat it at debug level
    assert sum(type(error) is TargetReadError for error in failures) == 1
    repeats = [error for error in failures if isinstance(error, RecentFailureError)]
    assert len(repeats) == 2
    assert all(error.errno == failures[0].errno for error in repeats)


async def test_leader_cancellation_hands_over(target: MemoryTarget) -> None:
    gate = trio.Event()
    target.gate = gate
    reader = reader_for(target)
    ref = Range("mem://obj", 0, 100)
    got: list[bytes] = []

    async with trio.open_nursery() as nursery:
        leader = trio.CancelScope()

        async def lead() -> None:
            with leader:
                await reader.read("k", ref, 0, 100)

        async def follow() -> None:
            got.append(bytes(await reader.read("k", ref, 0, 100)))

        nursery.start_soon(lead)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(follow)
        await trio.testing.wait_all_tasks_blocked()
        leader.cancel()
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert got == [DATA[:100]]
    assert len(target.ranges) == 2


async def test_budget_evicts_and_refetches(target: MemoryTarget) -> None:
    reader = reader_for(target, cache_size=1500)
    first = Range("mem://obj", 0, 1000)
    second = Range("mem://obj", 1000, 1000)
    await reader.read("a", first, 0, 10)
    await reader.read("b", second, 0, 10)
    await reader.read("a", first, 0, 10)
    assert len(target.ranges) == 3


RETRY = RetryConfig(timeout=5.0, retries=3, backoff_initial=0.1, backoff_max=1.0)


async def test_retryable_failures_are_retried_until_they_pass(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.flaky["mem://obj"] = 3
    reader = reader_for(target, RETRY)
    assert await reader.read("k", Range("mem://obj", 0, 100), 0, 100) == DATA[:100]
    assert len(target.ranges) == 4
    assert reader.statistics().retries == 3
    assert reader.statistics().errors == 0


async def test_failures_that_outlast_the_retries_name_the_attempts(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.flaky["mem://obj"] = 10
    reader = reader_for(target, RETRY)
    started = trio.current_time()
    with pytest.raises(TargetReadError) as caught:
        await reader.read("a/0", Range("mem://obj", 0, 100), 0, 100)
    assert "injected 503" in str(caught.value)
    assert "(after 4 attempts)" in str(caught.value)
    assert caught.value.attempts == 4
    assert len(target.ranges) == 4
    assert trio.current_time() - started <= RETRY.worst_case
    assert reader.statistics().errors == 1


async def test_permanent_failures_are_not_retried(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.failing.add("mem://obj")
    reader = reader_for(target, RETRY)
    with pytest.raises(TargetReadError) as caught:
        await reader.read("k", Range("mem://obj", 0, 10), 0, 10)
    assert caught.value.attempts == 1
    assert len(target.ranges) == 1


async def test_short_bodies_are_retried_then_reported(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.truncate["mem://obj"] = 50
    reader = reader_for(target, RETRY)
    with pytest.raises(ShortReadError, match=r"returned 50 bytes, expected 100 \(after 4"):
        await reader.read("k", Range("mem://obj", 0, 100), 0, 100)
    assert len(target.ranges) == 4


async def test_a_server_that_ignores_range_is_refused_at_once(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.ignore_range.add("mem://obj")
    reader = reader_for(target, RETRY)
    with pytest.raises(TargetReadError, match="ignored the Range request") as caught:
        await reader.read("k", Range("mem://obj", 10, 100), 0, 100)
    assert f"sent {len(DATA)} bytes for a 100-byte range" in str(caught.value)
    assert len(target.ranges) == 1
    # a whole-object read from the same server is still fine
    assert await reader.read("w", Whole("mem://obj"), 0, 10) == DATA[:10]


async def test_requests_that_hang_time_out_and_are_retried(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.gate = trio.Event()  # never set: every request hangs
    reader = reader_for(target, RETRY)
    started = trio.current_time()
    with pytest.raises(TargetReadError, match=r"no answer within 5 s \(after 4 attempts\)"):
        await reader.read("k", Range("mem://obj", 0, 10), 0, 10)
    elapsed = trio.current_time() - started
    assert 4 * RETRY.timeout <= elapsed <= RETRY.worst_case
    assert len(target.ranges) == 4


async def test_size_requests_are_retried_too(
    target: MemoryTarget, autojump_clock: trio.testing.MockClock
) -> None:
    target.flaky["mem://obj"] = 2
    reader = reader_for(target, RETRY)
    assert await reader.size("w", Whole("mem://obj")) == len(DATA)
    assert target.sizes == ["mem://obj"] * 3


def test_backoff_is_bounded_full_jitter() -> None:
    assert [RETRY.backoff_limit(a) for a in range(5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert RETRY.worst_case == pytest.approx(5.0 * 4 + 0.1 + 0.2 + 0.4)


async def test_a_changed_target_is_eio_and_never_retried() -> None:
    changed = TargetChangedError("mem://obj", 'ETag "a"', 'ETag "b"')
    target = RaisingTarget(objects={"mem://obj": DATA}, raises={"mem://obj": changed})
    reader = reader_for(target, RetryConfig(retries=4, backoff_initial=0.0))
    with pytest.raises(TargetChangedError) as caught:
        await reader.read("x/0", Range("mem://obj", 0, 10), 0, 10)
    assert len(target.ranges) == 1
    message = str(caught.value)
    assert "mem://obj" in message
    assert 'pinned ETag "a", now ETag "b"' in message
    assert caught.value.errno == errno.EIO
    assert "attempts" not in message


async def test_a_refused_target_is_eacces_and_never_retried() -> None:
    refused = TargetAccessError("/etc/shadow", "outside the local roots")
    target = RaisingTarget(raises={"/etc/shadow": refused})
    reader = reader_for(target, RetryConfig(retries=4, backoff_initial=0.0))
    for request in (
        reader.read("k", Range("/etc/shadow", 0, 10), 0, 10),
        reader.size("w", Whole("/etc/shadow")),
    ):
        with pytest.raises(TargetAccessError) as caught:
            await request
        assert caught.value.errno == errno.EACCES
        assert "/etc/shadow" in str(caught.value)
    assert len(target.ranges) == 1
    assert len(target.sizes) == 1
