"""Tests of prefetch: blocks ahead of sequential reads, neighbour runs claimed and settled,
within half the byte budget, never surfacing a failure to a read."""

from __future__ import annotations

import functools

import pytest
import trio
import trio.testing

from refmount.config import ReadConfig, RetryConfig
from refmount.errors import TargetError
from refmount.model import Range
from refmount.read import prefetch
from refmount.read.path import NeighbourPrefetch
from refmount.read.reader import Reader
from tests.fakes import MemoryTarget
from tests.unit.read.conftest import DATA, reader_for

BIG = bytes(range(253)) * 130  # 32890 bytes: 33 blocks of 1 KiB, no two alike


def blocks_requested(target: MemoryTarget) -> list[int]:
    return sorted(start // 1024 for _, start, _ in target.ranges)


async def read_block(reader: Reader, number: int, *, settle: bool = True) -> bytes:
    data = bytes(await reader.read("big", Range("mem://big", 0, len(BIG)), number * 1024, 1024))
    if settle:
        await trio.testing.wait_all_tasks_blocked()
    assert data == BIG[number * 1024 : (number + 1) * 1024]
    return data


def big_reader(**config: int) -> tuple[Reader, MemoryTarget]:
    target = MemoryTarget(objects={"mem://big": BIG})
    settings = {"whole_fetch_limit": 512, "block_size": 1024, **config}
    return Reader(target, ReadConfig(**settings), RetryConfig(retries=0)), target


async def test_the_block_window_grows_on_sequential_reads_and_resets_on_a_jump() -> None:
    reader, target = big_reader(prefetch_blocks=8)
    async with reader.running():
        seen: list[list[int]] = []
        for number in (0, 1, 2, 3, 4, 5, 20, 21, 22):
            await read_block(reader, number)
            seen.append(blocks_requested(target))
    assert seen[0] == [0, 1]  # window 1
    assert seen[1] == [0, 1, 2, 3]  # 2
    assert seen[2] == list(range(7))  # 4: blocks 3 to 6
    assert seen[3] == list(range(12))  # 8: blocks 4 to 11
    assert seen[4] == list(range(13))  # 8 is the cap: one more
    assert seen[5] == list(range(14))
    assert seen[6] == [*range(14), 20]  # a jump: no prefetch, the window is reset
    assert seen[7] == [*range(14), 20, 21, 22]  # window 1 again
    assert seen[8] == [*range(14), 20, 21, 22, 23, 24]  # 2
    assert len(target.ranges) == len(set(target.ranges))  # nothing fetched twice


async def test_a_full_block_window_that_reads_still_wait_for_grows_further() -> None:
    for late_growth, expected in ((1, [0, 1, 2, 3]), (4, [0, 1, 2, 3, 4])):
        reader, target = big_reader(prefetch_blocks=1, late_growth=late_growth)
        async with reader.running(), trio.open_nursery() as nursery:
            target.gate = gate = trio.Event()
            nursery.start_soon(functools.partial(read_block, reader, 0, settle=False))
            await trio.testing.wait_all_tasks_blocked()
            gate.set()  # block 0 arrives; the prefetch of block 1 waits at the new gate
            target.gate = gate = trio.Event()
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(functools.partial(read_block, reader, 1, settle=False))
            await trio.testing.wait_all_tasks_blocked()  # block 1 waits for its prefetch
            gate.set()
            target.gate = None
            await trio.testing.wait_all_tasks_blocked()
            await read_block(reader, 2)
        # the window was full (1 block) and a read still waited: it may reach 2 blocks ahead
        assert blocks_requested(target) == expected
        assert reader.statistics().prefetch_waits == 1


async def test_large_references_in_one_object_keep_windows_of_their_own() -> None:
    reader, target = big_reader(prefetch_blocks=8)
    halves = {"a": Range("mem://big", 0, 16 * 1024), "b": Range("mem://big", 16 * 1024, 16 * 1024)}
    async with reader.running():
        for number in range(3):
            for key, reference in halves.items():  # the two files' reads interleave
                await reader.read(key, reference, number * 1024, 1024)
                await trio.testing.wait_all_tasks_blocked()
    # each file's window grows on its own (1, 2, then 4 blocks) instead of the other file's
    # reads resetting it
    assert blocks_requested(target) == [*range(7), *range(16, 23)]


async def test_random_block_reads_prefetch_nothing() -> None:
    reader, target = big_reader()
    async with reader.running():
        for number in (7, 2, 30, 12, 25):
            await read_block(reader, number)
    assert blocks_requested(target) == [2, 7, 12, 25, 30]


async def test_block_prefetch_keeps_to_half_the_budget() -> None:
    reader, target = big_reader(cache_size=3 * 1024)
    async with reader.running():
        for number in range(4):
            await read_block(reader, number)
    assert blocks_requested(target) == [0, 1, 2, 3, 4]  # one block ahead at most
    reader, target = big_reader(cache_size=1024)
    async with reader.running():
        for number in range(4):
            await read_block(reader, number)
    assert blocks_requested(target) == [0, 1, 2, 3]  # no room: no prefetch


async def test_a_failed_block_prefetch_never_reaches_the_read() -> None:
    reader, target = big_reader()
    async with reader.running():
        await reader.read("big", Range("mem://big", 0, len(BIG)), 0, 1024)
        target.flaky["mem://big"] = 1  # the prefetch of block 1 fails
        await trio.testing.wait_all_tasks_blocked()
        await read_block(reader, 1)  # fetched again, by the read itself
    assert [start // 1024 for _, start, _ in target.ranges][:3] == [0, 1, 1]


async def test_a_block_read_waits_for_its_prefetch_in_flight() -> None:
    reader, target = big_reader()
    async with reader.running(), trio.open_nursery() as nursery:
        await reader.read("big", Range("mem://big", 0, len(BIG)), 0, 1024)  # block 1 queued
        target.gate = gate = trio.Event()
        nursery.start_soon(functools.partial(read_block, reader, 1, settle=False))
        await trio.testing.wait_all_tasks_blocked()
        assert blocks_requested(target) == [0, 1]  # the read waits for the prefetch
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert blocks_requested(target) == [0, 1, 2, 3]


async def test_neighbour_prefetch_says_where_asking_again_can_do_anything(
    target: MemoryTarget,
) -> None:
    reader = reader_for(target, neighbour_bytes=1000, neighbour_count=4)
    spans = [(start, start + 100) for start in range(0, 1000, 100)]
    assert reader.prefetch_neighbours("mem://obj", spans).resume_at == 0  # not running
    async with reader.running():
        first = reader.prefetch_neighbours("mem://obj", spans)
        # four spans (the count) requested; from the third on, fewer than three (three
        # quarters of the count) are ahead; the window doubles next time
        assert (first.requested, first.resume_at, first.scale) == (400, 200, 2)
        skipped = reader.prefetch_neighbours("mem://obj", spans[1:])  # nothing to do
        assert skipped == NeighbourPrefetch(0, 200, 1)
        await trio.testing.wait_all_tasks_blocked()
        again = reader.prefetch_neighbours("mem://obj", spans[2:])
        assert again == NeighbourPrefetch(200, 400, 2)  # topped up by two, quiet until 400
    assert target.ranges == [("mem://obj", 0, 400), ("mem://obj", 400, 600)]


async def test_a_neighbour_window_grows_by_its_scale_only_with_something_ahead(
    target: MemoryTarget,
) -> None:
    reader = reader_for(target, neighbour_bytes=400, neighbour_part_bytes=200)
    spans = [(start, start + 100) for start in range(0, 2000, 100)]
    async with reader.running():
        first = reader.prefetch_neighbours("mem://obj", spans, 4)
        assert (first.requested, first.scale) == (400, 2)  # nothing ahead: the first window
        await trio.testing.wait_all_tasks_blocked()
        grown = reader.prefetch_neighbours("mem://obj", spans[3:], 4)
        # one span ahead: four times the window (the most), topped up to its end
        assert (grown.requested, grown.scale) == (1500, 4)
    # the parts grow with the window
    assert sorted(target.ranges) == [
        ("mem://obj", 0, 200),
        ("mem://obj", 200, 400),
        ("mem://obj", 400, 1200),
        ("mem://obj", 1200, 1900),
    ]


async def test_a_full_neighbour_window_that_reads_still_wait_for_grows_further(
    target: MemoryTarget,
) -> None:
    reader = reader_for(
        target, neighbour_bytes=400, neighbour_part_bytes=400, neighbour_growth=1, late_growth=4
    )
    spans = [(start, start + 100) for start in range(0, 6000, 100)]
    scales, scale, position = [], 1, 0
    async with reader.running(), trio.open_nursery() as nursery:
        for waits in (True, True, True, False, True):
            target.gate = gate = trio.Event()
            answer = reader.prefetch_neighbours("mem://obj", spans[position:], scale)
            await trio.testing.wait_all_tasks_blocked()  # the run's request waits at the gate
            if waits:  # a read of the run's last span comes before the run's answer
                last = Range("mem://obj", target.ranges[-1][2] - 100, 100)
                nursery.start_soon(reader.read, "k", last, 0, 100)
                await trio.testing.wait_all_tasks_blocked()
            gate.set()
            await trio.testing.wait_all_tasks_blocked()
            scale, position = answer.scale, answer.resume_at // 100
            scales.append(scale)
    # growth 1: the window does not grow while what it fetched is ahead in time; each wait
    # doubles how far it may reach, up to late_growth times (4): 400 bytes, 800, then 1600
    assert scales == [1, 2, 4, 4, 4]
    assert reader.statistics().prefetch_waits == 4
    # the window reaches further, but its parts keep their size (larger cost more CPU)
    assert max(end - start for _, start, end in target.ranges) == 400
    assert max(end for _, _, end in target.ranges) > 1600


async def test_neighbour_spans_are_claimed_at_once_and_settled_from_one_request(
    target: MemoryTarget,
) -> None:
    reader = reader_for(target, neighbour_bytes=4096)
    spans = [(0, 1000), (1000, 2000), (2050, 3000), (3000, 3500), (3500, 5000)]
    assert reader.prefetch_neighbours("mem://obj", spans).requested == 0  # not running
    async with reader.running():
        assert reader.prefetch_neighbours("mem://obj", spans).requested == 3500  # 5000: far
        await trio.testing.wait_all_tasks_blocked()
        assert target.ranges == [("mem://obj", 0, 3500)]
        for start, end in spans[:4]:  # cached under the keys reads use
            ref = Range("mem://obj", start, end - start)
            assert await reader.read("k", ref, 0, 4096) == DATA[start:end]
        assert await reader.read("k", Range("mem://obj", 3500, 1500), 0, 4096) == DATA[3500:5000]
        assert target.ranges[1:] == [("mem://obj", 3500, 5000)]


async def test_entries_of_one_coalesced_request_share_its_memory(target: MemoryTarget) -> None:
    reader = reader_for(target, neighbour_bytes=4096)
    spans = [(0, 1000), (1000, 2000), (2050, 3000)]
    async with reader.running():
        assert reader.prefetch_neighbours("mem://obj", spans).requested == 3000
        await trio.testing.wait_all_tasks_blocked()
        assert reader.statistics().bytes_cached == 3000  # one answer, the gap included
        for start, end in spans[:2]:
            assert await reader.read("k", Range("mem://obj", start, end - start), 0, 4096)
        assert reader.statistics().bytes_cached == 3000  # the last entry keeps it alive
        assert await reader.read("k", Range("mem://obj", 2050, 950), 0, 4096) == DATA[2050:3000]
        assert reader.statistics().bytes_cached == 0
        assert target.ranges == [("mem://obj", 0, 3000)]


@pytest.mark.parametrize(("evicted", "scale"), [(False, 2), (True, 1)])
async def test_what_is_kept_of_an_object_goes_as_a_whole(
    monkeypatch: pytest.MonkeyPatch, evicted: bool, scale: int
) -> None:
    monkeypatch.setattr(prefetch, "TARGETS", 1)
    target = MemoryTarget(objects={"mem://obj": DATA, "mem://other": DATA})
    reader = reader_for(
        target, neighbour_bytes=400, neighbour_part_bytes=400, neighbour_growth=1, late_growth=4
    )
    spans = [(start, start + 100) for start in range(100, 2000, 100)]
    async with reader.running(), trio.open_nursery() as nursery:
        target.gate = gate = trio.Event()
        for _ in range(2):  # the second read waits for the first one's fetch: obj is late
            nursery.start_soon(reader.read, "k", Range("mem://obj", 0, 100), 0, 100)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
        target.gate = None
        await trio.testing.wait_all_tasks_blocked()
        assert reader.statistics().prefetch_waits == 1
        if evicted:  # a run over another object takes the one place: obj's lateness goes too
            assert reader.prefetch_neighbours("mem://other", spans).requested == 400
        # a window over obj that reads waited for may reach further, unless that was forgotten
        assert reader.prefetch_neighbours("mem://obj", spans).scale == scale


def objects_target(count: int, size: int = 100) -> tuple[MemoryTarget, list[tuple[str, int, int]]]:
    """``count`` objects of ``size`` bytes (``mem://o<i>``), and the span of each, whole."""
    objects = {f"mem://o{i}": bytes([i]) * size for i in range(count)}
    return MemoryTarget(objects=objects), [(url, 0, size) for url in objects]


async def test_objects_ahead_are_fetched_one_request_each_within_the_window() -> None:
    target, spans = objects_target(10)
    reader = reader_for(target, neighbour_bytes=1000, neighbour_count=4)
    assert reader.prefetch_objects(spans).resume_at == 0  # not running: nothing
    async with reader.running():
        first = reader.prefetch_objects(spans)
        # four objects (the count), one request each; from the third on fewer than three
        # (three quarters of the count) are ahead; the window doubles next time
        assert (first.requested, first.resume_at, first.scale) == (400, 2, 2)
        assert reader.prefetch_objects(spans[1:3]) == NeighbourPrefetch(0, 0, 1)  # all ahead
        await trio.testing.wait_all_tasks_blocked()
        again = reader.prefetch_objects(spans[1:], first.scale)
        # three ahead, scale 2: up to eight, five more sent
        assert (again.requested, again.scale) == (500, 4)
    assert sorted(target.ranges) == sorted((url, 0, 100) for url, _, _ in spans[:9])


async def test_a_read_of_an_object_being_prefetched_waits_for_it_and_is_served() -> None:
    target, spans = objects_target(3)
    reader = reader_for(target, neighbour_bytes=1000)
    async with reader.running(), trio.open_nursery() as nursery:
        target.gate = gate = trio.Event()
        reader.prefetch_objects(spans)
        got: list[bytes] = []

        async def read() -> None:
            got.append(bytes(await reader.read("k", Range("mem://o1", 0, 100), 0, 100)))

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
    assert got == [b"\x01" * 100]
    assert sorted(target.ranges) == sorted((url, 0, 100) for url, _, _ in spans)  # once each
    assert reader.statistics().prefetch_waits == 1


async def test_a_failed_object_prefetch_leaves_the_read_its_own_request_and_error() -> None:
    target, spans = objects_target(3)
    target.failing.add("mem://o1")
    reader = reader_for(target, neighbour_bytes=1000)
    async with reader.running():
        reader.prefetch_objects(spans)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(TargetError):
            await reader.read("k", Range("mem://o1", 0, 100), 0, 100)
        assert bytes(await reader.read("k", Range("mem://o2", 0, 100), 0, 100)) == b"\x02" * 100
    assert target.ranges.count(("mem://o2", 0, 100)) == 1  # served from the prefetch


async def test_object_prefetch_keeps_to_half_the_budget() -> None:
    target, spans = objects_target(10)
    reader = reader_for(target, cache_size=500, neighbour_bytes=1000)
    async with reader.running():
        first = reader.prefetch_objects(spans)
    assert first.requested == 200  # 250 bytes of room: two objects of 100
