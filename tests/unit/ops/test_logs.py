"""Tests of what the command shows besides its result: log sinks, priorities and progress."""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
import socket
import struct
from pathlib import Path

import pytest

from refmount.ops.logs import (
    JournalFormatter,
    JournalHandler,
    LogPlaces,
    LogSink,
    ProgressReporter,
    choose_log_sink,
    escape_mountpoint,
    journal_datagram,
    sink_handler,
    syslog_priority,
)


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


def bound_socket(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    return sock


def places(tmp_path: Path, *, is_root: bool = False) -> LogPlaces:
    return LogPlaces(
        syslog_socket=str(tmp_path / "log"),
        journal_socket=str(tmp_path / "journal"),
        system_directory=str(tmp_path / "var-log" / "refmount"),
        user_directory=str(tmp_path / "state" / "refmount"),
        is_root=is_root,
    )


def test_a_given_log_file_wins(tmp_path: Path) -> None:
    with bound_socket(tmp_path / "log"):
        sink = choose_log_sink("/x/refmount.log", "/mnt/data", places(tmp_path))
    assert sink == LogSink("file", "/x/refmount.log")


def test_syslog_socket_first_then_journal(tmp_path: Path) -> None:
    with bound_socket(tmp_path / "journal"):
        assert choose_log_sink(None, "/mnt/data", places(tmp_path)).kind == "journal"
        with bound_socket(tmp_path / "log"):
            sink = choose_log_sink(None, "/mnt/data", places(tmp_path))
    assert sink == LogSink("syslog", str(tmp_path / "log"))


def test_a_plain_file_in_place_of_a_socket_is_no_socket(tmp_path: Path) -> None:
    (tmp_path / "log").write_bytes(b"")
    (tmp_path / "journal").mkdir()
    assert choose_log_sink(None, "/mnt/data", places(tmp_path)).kind == "fallback"


def test_without_sockets_root_logs_under_var_log(tmp_path: Path) -> None:
    sink = choose_log_sink(None, "/mnt/data", places(tmp_path, is_root=True))
    assert sink == LogSink("fallback", str(tmp_path / "var-log" / "refmount" / "mnt-data.log"))
    assert (tmp_path / "var-log" / "refmount").is_dir()


def test_without_sockets_a_user_logs_under_the_state_directory(tmp_path: Path) -> None:
    sink = choose_log_sink(None, "/mnt/data", places(tmp_path))
    assert sink == LogSink("fallback", str(tmp_path / "state" / "refmount" / "mnt-data.log"))
    assert (tmp_path / "state" / "refmount").stat().st_mode & 0o777 == 0o700


def test_root_falls_back_to_the_state_directory_when_var_log_is_not_writable(
    tmp_path: Path,
) -> None:
    (tmp_path / "var-log").write_bytes(b"")  # cannot hold a directory
    sink = choose_log_sink(None, "/mnt/data", places(tmp_path, is_root=True))
    assert sink.path == str(tmp_path / "state" / "refmount" / "mnt-data.log")


def test_default_places_follow_the_environment() -> None:
    environ = {
        "REFMOUNT_SYSLOG_SOCKET": "/nowhere/log",
        "XDG_STATE_HOME": "/home/me/state",
    }
    found = LogPlaces.from_environment(environ)
    assert found.syslog_socket == "/nowhere/log"
    assert found.journal_socket == "/run/systemd/journal/socket"
    assert found.system_directory == "/var/log/refmount"
    assert found.user_directory == "/home/me/state/refmount"
    assert found.is_root == (os.geteuid() == 0)
    home = LogPlaces.from_environment({})
    assert home.user_directory == os.path.expanduser("~/.local/state/refmount")
    assert home.syslog_socket == "/dev/log"


@pytest.mark.parametrize(
    ("mountpoint", "name"),
    [
        ("/mnt/data", "mnt-data"),
        ("/mnt/data/", "mnt-data"),
        ("/", "-"),
        ("/srv/my-data/.hidden", "srv-my\\x2ddata-.hidden"),
        ("/mnt/d\u00e9 j", "mnt-d\\xc3\\xa9\\x20j"),
    ],
)
def test_log_file_names_escape_the_mountpoint_as_systemd_does(mountpoint: str, name: str) -> None:
    assert escape_mountpoint(mountpoint) == name


def test_multi_line_journal_fields_are_length_prefixed() -> None:
    datagram = journal_datagram({"MESSAGE": b"a\nb", "PRIORITY": b"3"})
    assert datagram == b"MESSAGE\n" + struct.pack("<Q", 3) + b"a\nb\nPRIORITY=3\n"


def test_journal_handler_sends_priority_identifier_and_message(tmp_path: Path) -> None:
    with bound_socket(tmp_path / "journal") as journal:
        handler = sink_handler(LogSink("journal", str(tmp_path / "journal")))
        assert isinstance(handler, JournalHandler)
        record = logging.LogRecord(
            "refmount.read", logging.ERROR, __file__, 1, "air/0.0.0", (), None
        )
        handler.handle(record)
        handler.close()
        datagram = journal.recv(65536)
    fields = dict(line.split(b"=", 1) for line in datagram.splitlines())
    assert fields[b"MESSAGE"] == b"ERROR refmount.read: air/0.0.0"
    assert fields[b"PRIORITY"] == b"3"
    assert fields[b"SYSLOG_IDENTIFIER"] == b"refmount"


def test_fallback_file_is_capped_and_rotated(tmp_path: Path) -> None:
    path = tmp_path / "mnt-data.log"
    handler = sink_handler(LogSink("fallback", str(path)))
    assert isinstance(handler, logging.handlers.RotatingFileHandler)
    assert handler.maxBytes == 10 * 1024 * 1024
    assert handler.backupCount == 3
    handler.close()
