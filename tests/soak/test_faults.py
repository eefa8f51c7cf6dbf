"""How long a request may take through the retries, and which EIO reads the injected faults
explain."""

from __future__ import annotations

import time

import pytest

from soak.faults import FAULTS, RECENT_FAILURE_SECONDS, explains, injected, worst_case
from soak.tally import Failure, Kind
from tests.soak.builders import key
from tests.soak.conftest import Recorder
from tests.support.servers import Fault

PATH = "/o0.bin"
BOUND = 10.0


def test_the_worst_case_is_every_attempt_timing_out_plus_the_capped_backoff():
    assert worst_case(10.0, 0) == 10.0
    assert worst_case(10.0, 4) == pytest.approx(50 + 0.05 + 0.1 + 0.2 + 0.4)
    assert worst_case(1.0, 8) == pytest.approx(9 + 0.05 + 0.1 + 0.2 + 0.4 + 0.8 + 1.6 + 2 + 2)


def eio(started: float, ended: float | None = None, path: str = PATH) -> Failure:
    return Failure(key(path=path), Kind.EIO, started, started if ended is None else ended, "")


def test_an_eio_is_explained_by_a_fault_for_each_attempt(recorded: Recorder):
    five = recorded(*[(PATH, Fault.ERROR_503)] * 5)
    four = recorded(*[(PATH, Fault.RESET)] * 4, (PATH, Fault.PASS))
    now = time.monotonic()
    assert explains(five, eio(now), retries=4, bound=BOUND)
    assert not explains(four, eio(now), retries=4, bound=BOUND)
    assert explains(four, eio(now), retries=3, bound=BOUND)


@pytest.mark.parametrize("fault", [Fault.HUGE_BODY, Fault.ENDLESS_BODY, Fault.GZIP_BOMB])
def test_one_answer_refused_at_once_explains_an_eio(recorded: Recorder, fault: Fault):
    assert explains(recorded((PATH, fault)), eio(time.monotonic()), retries=4, bound=BOUND)


def test_only_faults_for_the_reads_object_count(recorded: Recorder):
    log = recorded(*[("/o1.bin", Fault.ERROR_503)] * 5, ("/o1.bin", Fault.GZIP_BOMB))
    assert not explains(log, eio(time.monotonic()), retries=4, bound=BOUND)


def test_faults_count_from_the_longest_request_and_remembered_failure_before_the_read(
    recorded: Recorder,
):
    log = recorded((PATH, Fault.GZIP_BOMB))
    applied = time.monotonic()
    remembered = applied + BOUND + RECENT_FAILURE_SECONDS - 0.5
    assert explains(log, eio(remembered), retries=4, bound=BOUND)
    assert not explains(log, eio(remembered + 1.0), retries=4, bound=BOUND)


def test_faults_count_until_a_second_after_the_read(recorded: Recorder):
    before = time.monotonic()
    log = recorded((PATH, Fault.GZIP_BOMB))
    assert explains(log, eio(before - 20, before - 0.5), retries=4, bound=BOUND)
    assert not explains(log, eio(before - 20, before - 1.5), retries=4, bound=BOUND)


def test_injected_faults_are_counted_by_name_passes_left_out(recorded: Recorder):
    log = recorded((PATH, Fault.RESET), ("/o1.bin", Fault.RESET), (PATH, Fault.PASS))
    counts = injected(log)
    assert list(counts) == [fault.value for fault in FAULTS]
    assert counts["reset"] == 2
    assert sum(counts.values()) == 2
