"""The run's figures: percentiles, rates and the JSON document ``--json`` writes."""

from __future__ import annotations

import json
from pathlib import Path

from soak.summary import Latency, Summary, percentile
from soak.tally import Failure, Kind
from soak.units import MIB
from tests.soak.builders import key, observed, settings, tally


def test_percentiles_are_the_nearest_rank_from_below():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 51.0
    assert percentile(values, 99) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) == 0.0


def test_latency_is_rounded_to_a_tenth_of_a_millisecond():
    assert Latency.of([0.123456, 0.2, 0.3]) == Latency(0.2, 0.3, 0.3)
    assert Latency.of([]) == Latency(0.0, 0.0, 0.0)


def test_rates_are_per_second_of_the_run_and_zero_without_time():
    run = tally(http=150, s3=50)
    summary = Summary.of(settings(), observed(tally=run, elapsed=40.004))
    assert (summary.elapsed_s, summary.reads_per_s, summary.mib_per_s) == (40.0, 5.0, 5.0)
    idle = Summary.of(settings(), observed(elapsed=0.0))
    assert (idle.reads_per_s, idle.mib_per_s) == (0.0, 0.0)


def test_the_json_has_the_settings_figures_checks_and_verdict():
    summary = Summary.of(settings("--fault-share", "0", "--log", "d.log"), observed())
    document = json.loads(json.dumps(summary.to_json()))
    assert document["settings"]["targets"] == ["http", "s3"]
    assert document["settings"]["keys"] == 2016
    assert document["reads"] == 200
    assert document["latency_s"] == {"p50": 0.01, "p99": 0.01, "max": 0.01}
    assert document["daemon"]["start"] == {"fds": 20, "rss": 100 * MIB, "threads": 10}
    assert document["daemon"]["peak_rss"] == 130 * MIB
    assert document["daemon_stats"]["retries"] == 3
    assert document["daemon_stats"]["fetches"] is None
    assert document["checks"][0] == {
        "name": "reads done",
        "ok": True,
        "value": 200,
        "limit": "> 0 per target",
    }
    assert (document["ok"], document["log"]) == (True, str(Path("d.log")))


def test_the_json_lists_the_first_20_failures_and_counts_them_all():
    run = tally(http=100, s3=100)
    run.failures += [Failure(key(), Kind.WRONG, 0.0, 0.0, f"read {i}") for i in range(25)]
    document = Summary.of(settings(), observed(tally=run)).to_json()
    assert document["wrong_reads"] == 25
    assert document["failures"] == [
        {"key": "http/k0", "kind": "wrong", "detail": f"read {i}"} for i in range(20)
    ]
    assert document["ok"] is False
