"""Tests of the sd_notify client against sockets made here (no service manager needed)."""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from refmount.ops import notify


def _fields(datagram: bytes) -> dict[str, str]:
    lines = datagram.decode().split("\n")
    return dict(line.split("=", 1) for line in lines)


@pytest.fixture
def path_socket() -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket bound to a short file path (``sun_path`` holds 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="rmn-") as directory:
        path = os.path.join(directory, "notify")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            sock.settimeout(5)
            yield sock, path


@pytest.fixture
def abstract_socket() -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket bound to a Linux abstract address, named the systemd way (``@``)."""
    name = f"refmount-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(5)
        yield sock, "@" + name


def test_unset_socket_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(notify.SOCKET_VARIABLE, raising=False)
    assert not notify.notify("READY=1")
    assert not notify.ready("x")
    assert not notify.notify("READY=1", environ={notify.SOCKET_VARIABLE: ""})


def test_ready_to_a_path_socket(path_socket: tuple[socket.socket, str]) -> None:
    sock, path = path_socket
    assert notify.ready("mounted a on b", environ={notify.SOCKET_VARIABLE: path})
    fields = _fields(sock.recv(4096))
    assert fields == {"READY": "1", "STATUS": "mounted a on b", "MAINPID": str(os.getpid())}


def test_stopping_to_an_abstract_socket(abstract_socket: tuple[socket.socket, str]) -> None:
    sock, name = abstract_socket
    assert notify.stopping("unmounting b", environ={notify.SOCKET_VARIABLE: name})
    assert _fields(sock.recv(4096)) == {"STOPPING": "1", "STATUS": "unmounting b"}


def test_status_and_main_pid_read_the_environment(
    monkeypatch: pytest.MonkeyPatch, path_socket: tuple[socket.socket, str]
) -> None:
    sock, path = path_socket
    monkeypatch.setenv(notify.SOCKET_VARIABLE, path)
    assert notify.status("line one\nline two")
    assert sock.recv(4096) == b"STATUS=line one line two"
    assert notify.main_pid(1234)
    assert sock.recv(4096) == b"MAINPID=1234"


def test_undeliverable_notifications_are_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = {notify.SOCKET_VARIABLE: str(tmp_path / "absent")}
    assert not notify.ready("x", environ=missing)
    assert "cannot notify" in caplog.text
    assert not notify.ready("x", environ={notify.SOCKET_VARIABLE: "vsock:2:1234"})
    assert "not a path or an abstract socket" in caplog.text


def test_socket_address() -> None:
    assert notify.socket_address("/run/systemd/notify") == "/run/systemd/notify"
    assert notify.socket_address("@name") == b"\0name"
    assert notify.socket_address("@") is None
    assert notify.socket_address("relative") is None
