"""Tests of the latency histograms, per-operation counters, snapshots and their table."""

from __future__ import annotations

import errno
import json
import random

import pytest

from refmount.reader import ReaderStatistics
from refmount.stats import (
    BUCKETS,
    LatencyHistogram,
    Statistics,
    bucket_bounds,
    bucket_of,
    encode_snapshot,
    format_snapshot,
    human_bytes,
    human_duration,
)

READER = ReaderStatistics(
    reads=7,
    bytes_served=12345,
    fetches=3,
    bytes_fetched=9000,
    cache_hits=4,
    retries=1,
    errors=2,
    bytes_cached=2048,
)


def test_buckets_tile_the_latencies_without_gaps_or_overlaps() -> None:
    previous_high = 0
    for bucket in range(BUCKETS):
        low, high = bucket_bounds(bucket)
        assert low == previous_high, bucket
        assert high > low
        previous_high = high
    for micros in [*range(2000), 65_535, 65_536, 10**6, 10**9, 2**39 + 12345]:
        low, high = bucket_bounds(bucket_of(micros))
        assert low <= micros < high, micros


def test_buckets_are_at_most_an_eighth_wide_and_huge_values_share_the_last() -> None:
    for bucket in range(16, BUCKETS):
        low, high = bucket_bounds(bucket)
        assert (high - low) / low <= 0.125
    assert bucket_of(10**18) == BUCKETS - 1
    assert bucket_of(-5) == 0


def test_percentiles_are_within_an_eighth_of_the_exact_ones() -> None:
    rng = random.Random(7)
    values = [int(rng.lognormvariate(6, 1.5)) for _ in range(20_000)]
    histogram = LatencyHistogram()
    for value in values:
        histogram.record(value)
    ordered = sorted(values)
    for percent in (50, 90, 99):
        exact = ordered[-(-percent * len(values) // 100) - 1]
        estimate = histogram.percentile(percent)
        assert exact <= estimate <= max(exact * 1.125, exact + 1), percent
    assert histogram.percentile(100) == histogram.maximum == max(values)
    assert histogram.count == len(values)
    assert histogram.mean() == pytest.approx(sum(values) / len(values))


def test_percentiles_of_few_or_no_values() -> None:
    histogram = LatencyHistogram()
    assert histogram.percentile(50) == 0
    assert histogram.mean() == 0.0
    histogram.record(3)
    assert histogram.percentile(50) == histogram.percentile(99) == 3
    histogram.record(1_000_000)
    assert histogram.percentile(50) == 3
    assert histogram.percentile(99) == 1_000_000  # capped at the maximum, not the bucket top


def test_record_counts_latency_errors_and_errnos() -> None:
    statistics = Statistics()
    statistics.record("read", 250_000)
    statistics.record("read", 1_500, errno.EIO)
    statistics.record("getxattr", 900, errno.ENODATA)
    read = statistics.operations["read"]
    assert read.count == 2
    assert read.errors == 1
    assert read.errnos == {errno.EIO: 1}
    assert read.latency.maximum == 250  # microseconds
    assert set(statistics.operations) == {"read", "getxattr"}


def test_snapshot_holds_reader_counters_operations_and_uptime() -> None:
    now = [100.0]
    statistics = Statistics(clock=lambda: now[0])
    statistics.record("lookup", 40_000)
    statistics.record("lookup", 2_000_000, errno.ENOENT)
    now[0] = 112.5
    snapshot = statistics.snapshot(READER, open_files=2, source="s3://b/refs.json")
    assert snapshot["version"] == 1
    assert snapshot["source"] == "s3://b/refs.json"
    assert snapshot["uptime_s"] == 12.5
    assert snapshot["open_files"] == 2
    assert (snapshot["reads"], snapshot["bytes_served"]) == (7, 12345)
    assert (snapshot["fetches"], snapshot["bytes_fetched"]) == (3, 9000)
    assert (snapshot["cache_hits"], snapshot["retries"], snapshot["errors"]) == (4, 1, 2)
    assert snapshot["bytes_cached"] == 2048
    lookup = snapshot["operations"]["lookup"]
    assert lookup["count"] == 2
    assert lookup["errors"] == 1
    assert lookup["errnos"] == {"ENOENT": 1}
    assert 40 <= lookup["p50_us"] <= 45  # the top of the bucket that holds 40
    assert lookup["max_us"] == lookup["p99_us"] == 2000
    assert lookup["mean_us"] == 1020.0
    assert json.loads(encode_snapshot(snapshot)) == snapshot


def test_snapshot_with_every_operation_stays_small() -> None:
    statistics = Statistics()
    for number in range(40):
        for micros in (1, 100, 10**4, 10**6, 10**8):
            statistics.record(f"operation{number}", micros * 1000, errno.EIO)
    encoded = encode_snapshot(statistics.snapshot(READER, open_files=0, source="x" * 4096))
    assert len(encoded) < 16 * 1024


def test_table_shows_counters_operations_and_errnos() -> None:
    statistics = Statistics()
    statistics.record("read", 1_234_000)
    statistics.record("getxattr", 5_000, errno.ENODATA)
    text = format_snapshot(statistics.snapshot(READER, open_files=1, source="refs.json"))
    assert "refs.json" in text
    assert "bytes served    12,345 (12.1 KiB)" in text
    assert "cache hits      4" in text
    assert "bytes cached    2,048 (2.0 KiB)" in text
    header = next(line for line in text.splitlines() if line.startswith("operation"))
    assert header.split() == ["operation", "count", "errors", "p50", "p90", "p99", "max"]
    read = next(line for line in text.splitlines() if line.startswith("read "))
    assert read.split()[1:3] == ["1", "0"]
    assert "1.2 ms" in read
    assert "getxattr: ENODATA 1" in text


def test_table_of_an_empty_snapshot() -> None:
    text = format_snapshot(Statistics().snapshot(READER, open_files=0, source="r"))
    assert "operation" not in text
    assert "reads           7" in text


def test_human_units() -> None:
    assert human_bytes(999) == "999 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(3 * 1024**4) == "3.0 TiB"
    assert human_duration(5.25) == "5.2 s"
    assert human_duration(3725) == "01:02:05"
    assert human_duration(2 * 86400 + 61) == "2d 00:01:01"
