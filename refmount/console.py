"""What the command shows besides its result: log lines (stderr, journald, syslog) and progress."""

from __future__ import annotations

import logging
import logging.handlers
import os
import time
from collections.abc import Callable
from typing import TextIO


class JournalFormatter(logging.Formatter):
    """Start every line with the ``<N>`` syslog priority that journald reads from stderr."""

    def format(self, record: logging.LogRecord) -> str:
        priority = syslog_priority(record.levelno)
        return "\n".join(f"<{priority}>{line}" for line in super().format(record).split("\n"))


def syslog_priority(level: int) -> int:
    """Return the syslog priority (``LOG_ERR`` = 3 ... ``LOG_DEBUG`` = 7) of a logging level."""
    if level >= logging.CRITICAL:
        return 2
    if level >= logging.ERROR:
        return 3
    if level >= logging.WARNING:
        return 4
    if level >= logging.INFO:
        return 6
    return 7


def setup_logging(level: str, *, journald: bool) -> None:
    """Log to stderr; under journald without timestamps (it adds its own) and with priorities."""
    handler = logging.StreamHandler()
    if journald:
        handler.setFormatter(JournalFormatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("fsspec", "s3fs", "aiobotocore", "botocore", "urllib3", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def detach_logging(log_file: str | None) -> None:
    """Once in the background: log to ``log_file``, else syslog, and let go of the terminal."""
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    elif os.path.exists("/dev/log"):
        handler = logging.handlers.SysLogHandler(address="/dev/log")
        handler.setFormatter(logging.Formatter("refmount[%(process)d]: %(levelname)s %(message)s"))
    else:
        handler = logging.NullHandler()
    logging.getLogger().handlers[:] = [handler]
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    # stdout and stderr go to the log file when there is one, so that what is written to them
    # directly (SIGUSR1's stack dumps) is kept; otherwise nowhere
    sink = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if log_file else null
    for fd in (1, 2):
        os.dup2(sink, fd)
    for fd in {null, sink}:
        os.close(fd)


class ProgressReporter:
    """Shows how far loading a large reference set has got, on ``stream`` (stderr).

    Called with ``(done, total)`` by the loader every 100,000 keys. Nothing is shown for a
    set of fewer than ``min_total`` keys unless loading has already taken ``delay`` seconds.
    On a terminal it draws one bar, redrawn at most ten times a second; elsewhere (a log, the
    journal) it writes a plain line at most every ``interval`` seconds, plus the last one.
    """

    BAR_WIDTH = 30

    def __init__(
        self,
        name: str,
        stream: TextIO,
        *,
        unit: str = "keys",
        verb: str = "loading",
        min_total: int = 200_000,
        delay: float = 1.0,
        interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = name
        self._stream = stream
        self._unit = unit
        self._verb = verb
        self._min_total = min_total
        self._delay = delay
        self._clock = clock
        self._started = clock()
        self._last: float | None = None
        try:
            self._tty = stream.isatty()
        except (AttributeError, ValueError):
            self._tty = False
        self._interval = 0.1 if self._tty else interval

    def __call__(self, done: int, total: int) -> None:
        """Report that ``done`` of ``total`` items are read."""
        now = self._clock()
        finished = done >= total
        if self._last is None:
            if total < self._min_total and now - self._started < self._delay:
                return
        elif not finished and now - self._last < self._interval:
            return
        self._last = now
        figures = f"{done:,} of {total:,} {self._unit}"
        if self._tty:
            filled = self.BAR_WIDTH * done // max(total, 1)
            bar = "#" * filled + "-" * (self.BAR_WIDTH - filled)
            percent = 100 * done // max(total, 1)
            end = "\n" if finished else ""
            text = f"\r{self._verb} {self._name} [{bar}] {percent:3d}% {figures}{end}"
        else:
            text = f"{self._verb} {self._name}: {figures}\n"
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            pass  # a closed or vanished stderr must never stop loading
