"""Tests of a mount's lifecycle helpers: a detached mount stops serving, the resident set kept
within its bound."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pyfuse3
import pytest
import trio

from refmount.daemon.serve import (
    HEAP_CHECK,
    HEAP_CHECK_MAX,
    _keep_resident_within,
    _stop_when_detached,
)
from refmount.fuse.adapter import InFlight


async def test_a_detached_mount_stops_serving_after_answering_what_is_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device = os.makedev(0, 4242)
    line = "77 1 0:4242 / /mnt rw,nosuid - fuse.refmount refmount ro\n"
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n" + line)
    terminated: list[int] = []
    requests = InFlight()
    monkeypatch.setattr(pyfuse3, "terminate", lambda: terminated.append(len(requests)))
    errnos: list[int] = []

    async def in_flight() -> None:
        try:
            await requests.run(trio.sleep_forever)
        except pyfuse3.FUSEError as error:
            errnos.append(error.errno)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(in_flight)
            nursery.start_soon(_stop_when_detached, device, requests, mountinfo, 0.01)
            await trio.sleep(0.1)
            assert not terminated  # still mounted: serving goes on
            mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    assert errnos == [errno.EIO]
    assert terminated == [0]  # after the request in flight was answered


class OverBound:
    """A resident bound that records when it is looked at and says whether it trimmed."""

    def __init__(self, clock: trio.testing.MockClock, answers: list[bool]) -> None:
        self.clock = clock
        self.answers = answers
        self.times: list[float] = []

    def enforce(self) -> bool:  # called in a worker thread
        self.times.append(self.clock.current_time())
        return self.answers.pop(0) if self.answers else False


async def test_the_resident_set_is_looked_at_less_often_while_trimming_does_not_help(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0.05  # real seconds: a worker thread's call ends first
    bound = OverBound(mock_clock, [True] * 6 + [False, False])
    with trio.move_on_after(HEAP_CHECK * (1 + 2 + 4 + 8 + 16) + 2 * HEAP_CHECK_MAX + 1):
        await _keep_resident_within(bound)  # type: ignore[arg-type]
    gaps = [round(b - a, 3) for a, b in zip(bound.times, bound.times[1:], strict=False)]
    # 0.5 s apart at first; doubled after each trim, up to 8 s; back to 0.5 s when under
    assert bound.times[0] == HEAP_CHECK
    assert gaps[:7] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 0.5]
