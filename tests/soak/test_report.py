"""The printed report: aligned tables of figures and checks, the first failures, the verdict."""

from __future__ import annotations

from soak.report import over_the_run, report, table
from soak.summary import Summary
from soak.tally import Failure, Kind
from soak.units import MIB
from tests.soak.builders import daemon, figures, key, observed, settings, tally


def test_tables_pad_columns_to_the_widest_cell_and_trim_the_end():
    assert table([("a", "bb", "c"), ("ccc", "d", "")]) == "a    bb  c\nccc  d"


def test_a_daemon_figure_is_shown_at_start_warm_up_end_and_peak():
    run = daemon(figures(100), figures(120), figures(130), figures(150))
    assert over_the_run(run, lambda f: f.rss, lambda v: f"{v / MIB:.0f}") == "100/120/130/150"
    assert over_the_run(run, lambda f: f.fds, str) == "20/20/20/20"


def test_a_passing_run_reports_its_figures_and_checks_and_says_so():
    text = report(Summary.of(settings("--fault-share", "0"), observed()))
    lines = text.splitlines()
    assert lines[0].split() == ["figure", "value"]
    assert "duration                     20.0 s, 64 readers" in lines
    assert "read latency                 p50 0.01 s, p99 0.01 s, max 0.01 s" in lines
    assert "RSS MiB start/warm/end/peak  100/120/130/130" in lines
    assert "ok  wrong bytes                           0      0" in lines
    assert lines[-2:] == ["", "soak passed"]


def test_a_failing_run_shows_its_first_five_failures_and_fails():
    run = tally(http=100, s3=100)
    run.failures += [Failure(key(), Kind.WRONG, 0.0, 0.0, f"read {i}") for i in range(7)]
    text = report(Summary.of(settings("--fault-share", "0"), observed(tally=run)))
    shown = [line for line in text.splitlines() if line.startswith("  wrong: ")]
    assert shown == [f"  wrong: http/k0: read {i}" for i in range(5)]
    assert "FAIL  wrong bytes" in text
    assert text.endswith("\nsoak FAILED")
