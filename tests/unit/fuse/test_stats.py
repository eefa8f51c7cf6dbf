"""Tests of the latency histograms, per-operation counters, snapshots and their table."""

from __future__ import annotations

import errno
import json
import random

import pytest

from refmount.fuse.stats import (
    BUCKETS,
    EXPORT_BOUNDS_US,
    LatencyHistogram,
    Statistics,
    bucket_bounds,
    bucket_of,
    encode_snapshot,
    format_snapshot,
    human_bytes,
    human_duration,
    prometheus_text,
)
from refmount.read.path import ReaderStatistics

READER = ReaderStatistics(
    reads=7,
    bytes_served=12345,
    fetches=3,
    bytes_fetched=9000,
    cache_hits=4,
    retries=1,
    errors=2,
    bytes_prefetched=4096,
    bytes_cached=2048,
    prefetch_waits=5,
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
    assert (snapshot["bytes_prefetched"], snapshot["prefetch_waits"]) == (4096, 5)
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
    # 40 operations (twice as many as pyfuse3 has) and a source of 4 KiB: about 16 KiB
    assert len(encoded) < 17 * 1024


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


def test_an_icechunk_mounts_snapshot_is_shown() -> None:
    snapshot = Statistics().snapshot(
        READER, open_files=0, source="repo", about={"snapshot": "M7RFRYZF9M265X5YVQKG"}
    )
    assert snapshot["snapshot"] == "M7RFRYZF9M265X5YVQKG"
    lines = format_snapshot(snapshot).splitlines()
    assert lines[1] == "snapshot        M7RFRYZF9M265X5YVQKG"


def test_human_units() -> None:
    assert human_bytes(999) == "999 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(3 * 1024**4) == "3.0 TiB"
    assert human_duration(5.25) == "5.2 s"
    assert human_duration(3725) == "01:02:05"
    assert human_duration(2 * 86400 + 61) == "2d 00:01:01"


# ------------------------------------------------------------------ Prometheus


def test_export_bounds_are_bucket_edges_so_counts_below_them_are_exact() -> None:
    edges = {bucket_bounds(bucket)[0] for bucket in range(BUCKETS)}
    assert set(EXPORT_BOUNDS_US) <= edges
    histogram = LatencyHistogram()
    values = [random.Random(7).randrange(0, 10**8) for _ in range(2000)] + [15, 16, 63, 64]
    for micros in values:
        histogram.record(micros)
    below = histogram.below(EXPORT_BOUNDS_US)
    assert below == [sum(value < bound for value in values) for bound in EXPORT_BOUNDS_US]


def _prometheus_snapshot() -> dict[str, object]:
    statistics = Statistics()
    for micros in (3, 40, 40, 900, 70_000, 2_000_000):
        statistics.record("read", micros * 1000)
    statistics.record("lookup", 20_000, errno.ENOENT)
    statistics.record("lookup", 5_000)
    snapshot = statistics.snapshot(READER, open_files=2, source='s3://b/"refs".json')
    decoded: dict[str, object] = json.loads(encode_snapshot(snapshot))  # as the command reads it
    return decoded


def test_prometheus_text_parses_with_counters_and_histograms() -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    labels = {"mountpoint": '/mnt/da\\ta "x"'}
    text = prometheus_text(_prometheus_snapshot(), labels)
    families = {family.name: family for family in parser.text_string_to_metric_families(text)}
    assert families["refmount_reads"].type == "counter"
    assert families["refmount_bytes_served"].samples[0].value == 12345
    assert families["refmount_fetch_errors"].samples[0].value == 2
    assert families["refmount_cached_bytes"].type == "gauge"
    assert families["refmount_open_files"].samples[0].value == 2
    info = families["refmount_info"].samples[0]
    assert info.labels["source"] == 's3://b/"refs".json'
    operations = {s.labels["operation"]: s.value for s in families["refmount_operations"].samples}
    assert operations == {"lookup": 2, "read": 6}
    errors = families["refmount_operation_errors"].samples
    assert [(s.labels["operation"], s.labels["errno"], s.value) for s in errors] == [
        ("lookup", "ENOENT", 1)
    ]
    latency = families["refmount_operation_latency_seconds"]
    assert latency.type == "histogram"
    read = [s for s in latency.samples if s.labels["operation"] == "read"]
    buckets = {s.labels["le"]: s.value for s in read if s.name.endswith("_bucket")}
    assert len(buckets) == len(EXPORT_BOUNDS_US) + 1
    assert buckets["1.6e-05"] == 1  # 3 µs
    assert buckets["6.4e-05"] == 3  # and the two of 40 µs
    assert buckets["0.001024"] == 4
    assert buckets["0.065536"] == 4  # 70 ms is above 65.5 ms
    assert buckets["0.262144"] == 5
    assert buckets["+Inf"] == 6
    values = list(buckets.values())
    assert values == sorted(values)
    count = next(s.value for s in read if s.name.endswith("_count"))
    total = next(s.value for s in read if s.name.endswith("_sum"))
    assert count == 6
    assert total == pytest.approx((3 + 40 + 40 + 900 + 70_000 + 2_000_000) / 1e6)
    for family in families.values():
        for sample in family.samples:
            assert sample.labels["mountpoint"] == '/mnt/da\\ta "x"'


def test_prometheus_text_of_a_mount_with_no_requests_yet() -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    snapshot = json.loads(
        encode_snapshot(Statistics().snapshot(READER, open_files=0, source="refs.json"))
    )
    text = prometheus_text(snapshot, {"mountpoint": "/mnt"})
    assert text.endswith("\n")
    names = {family.name for family in parser.text_string_to_metric_families(text)}
    assert {"refmount_reads", "refmount_operation_latency_seconds"} <= names


def test_the_disk_caches_counters_are_shown_and_exported_only_with_one() -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    disk = {"hits": 5, "misses": 2, "bytes_read": 3 << 20, "bytes_written": 1 << 20}
    disk |= {"evictions": 1, "errors": 0}
    snapshot = Statistics().snapshot(READER, open_files=0, source="refs.json", disk_cache=disk)
    lines = format_snapshot(snapshot).splitlines()
    assert "disk hits       5" in lines
    assert "disk read       3,145,728 (3.0 MiB)" in lines
    families = {
        family.name: family
        for family in parser.text_string_to_metric_families(prometheus_text(snapshot, {}))
    }
    assert families["refmount_disk_cache_hits"].samples[0].value == 5
    assert families["refmount_disk_cache_bytes_written"].type == "counter"
    without = Statistics().snapshot(READER, open_files=0, source="refs.json")
    assert "disk_cache" not in without
    assert "disk" not in format_snapshot(without)
    assert "disk_cache" not in prometheus_text(without, {})
