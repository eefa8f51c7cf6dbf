"""What the command shows: log lines (stderr, syslog, journal, a file) and progress."""

from __future__ import annotations

import logging
import logging.handlers
import os
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, TextIO

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""Lines on a terminal and in a log file: with their time, level and logger."""


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
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("fsspec", "s3fs", "aiobotocore", "botocore", "urllib3", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


SYSLOG_SOCKET_VARIABLE = "REFMOUNT_SYSLOG_SOCKET"
JOURNAL_SOCKET_VARIABLE = "REFMOUNT_JOURNAL_SOCKET"
"""Environment variables that say where to look for the syslog and journal sockets (a chroot
or container that has them elsewhere; a path that does not exist turns that sink off)."""

LOG_FILE_MAX_BYTES = 10 * 1024 * 1024
LOG_FILE_BACKUPS = 3
"""The fallback log file is rotated at 10 MiB, keeping three old files: at most 40 MiB."""

JOURNAL_MESSAGE_MAX_BYTES = 48 * 1024
"""A longer message is cut: journald refuses datagrams beyond the socket's buffer."""


@dataclass(frozen=True)
class LogPlaces:
    """Where a daemon in the background looks for somewhere to log (injected by tests)."""

    syslog_socket: str
    journal_socket: str
    system_directory: str
    """Used when running as root and writable: ``/var/log/refmount``."""
    user_directory: str
    """Used otherwise: ``$XDG_STATE_HOME/refmount``, by default ``~/.local/state/refmount``."""
    is_root: bool

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> LogPlaces:
        """Return the usual places, unless ``environ`` moves the sockets or the state home."""
        state_home = environ.get("XDG_STATE_HOME") or os.path.join(
            os.path.expanduser("~"), ".local", "state"
        )
        return cls(
            syslog_socket=environ.get(SYSLOG_SOCKET_VARIABLE, "/dev/log"),
            journal_socket=environ.get(JOURNAL_SOCKET_VARIABLE, "/run/systemd/journal/socket"),
            system_directory="/var/log/refmount",
            user_directory=os.path.join(state_home, "refmount"),
            is_root=os.geteuid() == 0,
        )


@dataclass(frozen=True)
class LogSink:
    """Where the daemon logs once in the background: ``kind`` is one of ``file`` (the
    ``--log-file`` given), ``syslog``, ``journal`` (its native socket) or ``fallback`` (a
    rotated file refmount chose, whose path the command prints)."""

    kind: Literal["file", "syslog", "journal", "fallback"]
    path: str


def choose_log_sink(log_file: str | None, mountpoint: str, places: LogPlaces) -> LogSink:
    """Return where to log: ``log_file`` if given, else syslog, else the journal, else a file.

    The file is named after the mountpoint (``/mnt/data`` gives ``mnt-data.log``) in the
    system directory when root can write there, else in the user's state directory; the
    directory is created if need be.
    """
    if log_file:
        return LogSink("file", log_file)
    if _is_socket(places.syslog_socket):
        return LogSink("syslog", places.syslog_socket)
    if _is_socket(places.journal_socket):
        return LogSink("journal", places.journal_socket)
    name = escape_mountpoint(mountpoint) + ".log"
    if places.is_root and _writable_directory(places.system_directory):
        return LogSink("fallback", os.path.join(places.system_directory, name))
    os.makedirs(places.user_directory, mode=0o700, exist_ok=True)
    return LogSink("fallback", os.path.join(places.user_directory, name))


def escape_mountpoint(mountpoint: str) -> str:
    """Return a file name for ``mountpoint``, as ``systemd-escape --path`` writes it.

    Slashes become ``-``; any byte other than ASCII letters, digits, ``_`` and ``.`` (not
    leading) becomes ``\\xNN``; the root directory is ``-``.
    """
    path = os.path.normpath(os.path.abspath(mountpoint)).strip("/")
    if not path:
        return "-"
    out = []
    for index, byte in enumerate(os.fsencode(path)):
        char = chr(byte)
        if char == "/":
            out.append("-")
        elif (char.isascii() and char.isalnum()) or char == "_" or (char == "." and index):
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _writable_directory(path: str) -> bool:
    try:
        os.makedirs(path, mode=0o755, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


class JournalHandler(logging.Handler):
    """Send each record to journald's native socket, with its priority and identifier.

    The native protocol: one datagram of ``FIELD=value`` lines; a value holding a newline is
    written ``FIELD``, newline, its length as 64-bit little-endian, the value, newline.
    """

    def __init__(self, address: str, identifier: str = "refmount") -> None:
        super().__init__()
        self._address = address
        self._identifier = identifier
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)

    def emit(self, record: logging.LogRecord) -> None:
        """Send ``record`` to the journal; a failure is handled as logging handles them."""
        try:
            message = self.format(record).encode("utf-8", "replace")[:JOURNAL_MESSAGE_MAX_BYTES]
            fields = {
                "MESSAGE": message,
                "PRIORITY": str(syslog_priority(record.levelno)).encode(),
                "SYSLOG_IDENTIFIER": self._identifier.encode(),
                "LOGGER": record.name.encode(),
            }
            self._socket.sendto(journal_datagram(fields), self._address)
        except (OSError, ValueError):
            self.handleError(record)

    def close(self) -> None:
        """Close the socket."""
        self._socket.close()
        super().close()


def journal_datagram(fields: Mapping[str, bytes]) -> bytes:
    """Return the native-protocol datagram that carries ``fields``."""
    parts = []
    for name, value in fields.items():
        if b"\n" in value:
            parts.append(name.encode() + b"\n" + struct.pack("<Q", len(value)) + value + b"\n")
        else:
            parts.append(name.encode() + b"=" + value + b"\n")
    return b"".join(parts)


class RotatingLogFile(logging.handlers.RotatingFileHandler):
    """A size-capped, rotated log file that stdout and stderr follow when it rotates."""

    def __init__(self, path: str) -> None:
        super().__init__(path, maxBytes=LOG_FILE_MAX_BYTES, backupCount=LOG_FILE_BACKUPS)

    def doRollover(self) -> None:
        """Rotate, then point stdout and stderr (stack dumps) at the new file."""
        super().doRollover()
        if self.stream is not None:
            for fd in (1, 2):
                os.dup2(self.stream.fileno(), fd)


def sink_handler(sink: LogSink) -> logging.Handler:
    """Return the logging handler that writes to ``sink``."""
    handler: logging.Handler
    if sink.kind == "syslog":
        handler = logging.handlers.SysLogHandler(address=sink.path)
        handler.setFormatter(logging.Formatter("refmount[%(process)d]: %(levelname)s %(message)s"))
        return handler
    if sink.kind == "journal":
        handler = JournalHandler(sink.path)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        return handler
    handler = (
        RotatingLogFile(sink.path) if sink.kind == "fallback" else logging.FileHandler(sink.path)
    )
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler


def detach_logging(
    log_file: str | None, mountpoint: str, places: LogPlaces | None = None
) -> LogSink:
    """Once in the background: log to the sink :func:`choose_log_sink` picks; let go of the
    terminal. When that sink is a file refmount chose, its path is written to stderr first
    (still the mount command's), so that a user knows where to look."""
    if places is None:
        places = LogPlaces.from_environment(os.environ)
    sink = choose_log_sink(log_file, mountpoint, places)
    handler = sink_handler(sink)
    logging.getLogger().handlers[:] = [handler]
    if sink.kind == "fallback":
        sys.stderr.write(f"refmount: no syslog or journal socket; logging to {sink.path}\n")
        sys.stderr.flush()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    # stdout and stderr go to the log file when there is one, so that what is written to them
    # directly (SIGUSR1's stack dumps) is kept; otherwise nowhere
    to_file = sink.kind in ("file", "fallback")
    sink_fd = os.open(sink.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if to_file else null
    for fd in (1, 2):
        os.dup2(sink_fd, fd)
    for fd in {null, sink_fd}:
        os.close(fd)
    return sink


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
