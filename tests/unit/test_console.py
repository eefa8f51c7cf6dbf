"""Tests of what the command shows besides its result: log priorities and progress."""

from __future__ import annotations

import io
import logging

import pytest

from refmount.console import JournalFormatter, ProgressReporter, syslog_priority


@pytest.mark.parametrize(
    ("level", "priority"),
    [
        (logging.CRITICAL, 2),
        (logging.ERROR, 3),
        (logging.WARNING, 4),
        (logging.INFO, 6),
        (logging.DEBUG, 7),
    ],
)
def test_log_levels_map_to_syslog_priorities(level: int, priority: int) -> None:
    assert syslog_priority(level) == priority


def test_journal_lines_each_carry_the_priority() -> None:
    record = logging.LogRecord("refmount.x", logging.ERROR, __file__, 1, "two\nlines", None, None)
    text = JournalFormatter("%(levelname)s %(message)s").format(record)
    assert text == "<3>ERROR two\n<3>lines"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_lines_when_not_a_terminal() -> None:
    clock = Clock()
    stream = io.StringIO()
    report = ProgressReporter("refs.json", stream, clock=clock)
    for done in range(100_000, 1_000_001, 100_000):
        clock.now += 0.5
        report(done, 1_000_000)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "loading refs.json: 100,000 of 1,000,000 keys"
    assert lines[-1] == "loading refs.json: 1,000,000 of 1,000,000 keys"
    assert len(lines) == 4  # the first, one every 2 s, and the last


def test_no_progress_for_a_small_quick_load() -> None:
    clock = Clock()
    stream = io.StringIO()
    report = ProgressReporter("refs.json", stream, clock=clock)
    report(100_000, 150_000)
    report(150_000, 150_000)
    assert stream.getvalue() == ""
    clock.now = 1.5  # a small set that loads slowly is shown once it has taken a second
    report(150_000, 150_000)
    assert stream.getvalue() == "loading refs.json: 150,000 of 150,000 keys\n"


def test_progress_bar_on_a_terminal() -> None:
    clock = Clock()
    stream = Terminal()
    report = ProgressReporter("refs.json", stream, clock=clock)
    report(250_000, 1_000_000)
    report(500_000, 1_000_000)  # within 0.1 s of the last: not redrawn
    clock.now = 1.0
    report(1_000_000, 1_000_000)
    text = stream.getvalue()
    assert text.count("\r") == 2
    assert " 25% 250,000 of 1,000,000 keys" in text
    assert text.endswith("[" + "#" * 30 + "] 100% 1,000,000 of 1,000,000 keys\n")
