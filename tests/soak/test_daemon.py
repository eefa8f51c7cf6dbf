"""The daemon's /proc figures, their peaks, and the peak RSS counting the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from soak.daemon import DaemonFigures, Monitor, ProcFigures, peaks
from tests.soak.builders import figures


def test_a_running_process_has_memory_threads_and_descriptors():
    mine = ProcFigures.of(os.getpid())
    assert mine.rss > 1024 * 1024
    assert mine.threads >= 1
    assert mine.fds >= 3
    assert list(mine.to_json()) == ["fds", "rss", "threads"]


def state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0]


def test_a_process_that_has_exited_has_no_figures():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while state(child.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(ProcessLookupError, match="has exited"):
        ProcFigures.of(child.pid)  # a zombie: no memory figure
    child.wait()
    with pytest.raises(FileNotFoundError):
        ProcFigures.of(child.pid)


def test_peaks_are_each_figures_largest_value():
    assert peaks([figures(100, 30, 5), figures(200, 10, 7)]) == figures(200, 30, 7)
    assert peaks([]) == ProcFigures(0, 0, 0)


def test_the_peak_rss_counts_the_end_the_other_peaks_only_the_samples():
    monitor = Monitor(os.getpid())
    monitor.samples = [(0.0, figures(150, 20, 40)), (1.0, figures(180, 25, 30))]
    end = figures(190, 30, 50)
    daemon = DaemonFigures.of(figures(), figures(), end, monitor)
    assert daemon.peak == ProcFigures(end.rss, 25, 40)
    assert daemon.samples == 2


def test_the_monitor_samples_until_stopped():
    monitor = Monitor(os.getpid())
    monitor.start()
    deadline = time.monotonic() + 10
    while not monitor.samples and time.monotonic() < deadline:
        time.sleep(0.01)
    monitor.stop()
    assert not monitor.is_alive()
    assert monitor.samples
    assert monitor.peaks().threads >= 2  # this one and the monitor
