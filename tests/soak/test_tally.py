"""The readers' tally: counts of reads, and failures for wrong bytes and errors."""

from __future__ import annotations

import errno

from soak.tally import Kind, Read, Tally
from tests.soak.builders import key

KEY = key(data=b"0123456789")


def test_a_read_expects_the_sources_bytes_in_its_range():
    assert Read(KEY, 2, 3, whole=False, direct=False).expected == b"234"
    assert Read(KEY, 8, 5, whole=False, direct=False).expected == b"89"
    assert Read(KEY, 0, 10, whole=True, direct=False).expected == b"0123456789"


def test_right_reads_are_counted_by_kind_and_target_with_their_latency():
    tally = Tally()
    tally.record(Read(KEY, 2, 3, whole=False, direct=True), b"234", 1.0, 1.5)
    tally.record(Read(KEY, 0, 10, whole=True, direct=True), b"0123456789", 2.0, 2.25)
    assert (tally.reads, tally.bytes_read) == (2, 13)
    assert (tally.direct_reads, tally.whole_reads) == (1, 1)  # a whole read is never direct
    assert tally.per_target == {"http": 2}
    assert tally.latencies == [0.5, 0.25]
    assert tally.failures == []


def test_wrong_bytes_are_counted_as_a_read_and_a_failure():
    tally = Tally()
    tally.record(Read(KEY, 2, 3, whole=False, direct=False), b"2x4", 1.0, 1.5)
    assert tally.reads == 1
    (failure,) = tally.failures
    assert (failure.kind, failure.started, failure.ended) == (Kind.WRONG, 1.0, 1.5)
    assert failure.detail == "offset 2 size 3: 3 bytes, not the source's"


def test_errors_are_failures_eio_apart_from_the_rest():
    tally = Tally()
    read = Read(KEY, 0, 1, whole=False, direct=False)
    tally.fail(read, OSError(errno.EIO, "Input/output error"), 1.0, 2.0)
    tally.fail(read, OSError(errno.ENOENT, "No such file"), 3.0, 4.0)
    assert [failure.kind for failure in tally.failures] == [Kind.EIO, Kind.ERROR]
    assert tally.failures[0].detail == "OSError(5, 'Input/output error')"
    assert tally.reads == 0
