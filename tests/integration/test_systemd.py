"""Running under systemd: the unit file, sd_notify readiness, journald logs and SIGUSR1."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.datasets import json_v0
from tests.support.mounting import is_mounted, mounted, refmount_command, requires_fuse, unmount

UNIT = Path(__file__).parents[2] / "systemd" / "refmount@.service"
INSTALLED_BINARY = "/usr/local/bin/refmount"

NAMESPACE_DIRECTIVES = frozenset(
    {
        "PrivateMounts",
        "MountFlags",
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "PrivateDevices",
        "ReadWritePaths",
        "ReadOnlyPaths",
        "InaccessiblePaths",
        "ExecPaths",
        "NoExecPaths",
        "BindPaths",
        "BindReadOnlyPaths",
        "TemporaryFileSystem",
        "ProtectKernelTunables",
        "ProtectKernelModules",
        "ProtectKernelLogs",
        "ProtectControlGroups",
        "ProtectProc",
        "ProcSubset",
        "RootDirectory",
        "RootImage",
        "MountAPIVFS",
    }
)
"""Settings that give a unit its own mount namespace, which would hide the FUSE mount."""

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")
PRIORITIES = {"DEBUG": 7, "INFO": 6, "WARNING": 4, "ERROR": 3, "CRITICAL": 2}


def unit_settings(text: str) -> dict[str, list[str]]:
    """Return every ``Name=value`` of a unit file (sections ignored), in order per name."""
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            name, _, value = line.partition("=")
            settings.setdefault(name.strip(), []).append(value.strip())
    return settings


def verify(unit_text: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """Run ``systemd-analyze verify`` on an instance of the template ``unit_text``."""
    directory.mkdir()
    (directory / "refmount@.service").write_text(unit_text)
    return subprocess.run(
        ["systemd-analyze", "verify", str(directory / "refmount@data.service")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def installed_unit_text() -> str:
    """The unit, pointing at this environment's ``refmount`` instead of the install path."""
    binary = Path(sys.executable).parent / "refmount"
    if not binary.exists():
        pytest.skip(f"no refmount script next to {sys.executable}")
    text = UNIT.read_text()
    assert INSTALLED_BINARY in text
    return text.replace(INSTALLED_BINARY, str(binary))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    text = installed_unit_text()
    result = verify(text, tmp_path / "good")
    assert result.returncode == 0, result.stderr
    assert result.stdout + result.stderr == ""
    # The check is not blind: systemd-analyze reports what it only warns about, too.
    broken = verify(text.replace("NotifyAccess=main", "NotifyAccess=mian"), tmp_path / "bad")
    assert "mian" in broken.stderr
    missing = verify(UNIT.read_text().replace(INSTALLED_BINARY, "/nonexistent/rm"), tmp_path / "x")
    assert missing.returncode != 0


def test_unit_reports_readiness_and_never_leaves_a_stale_mount() -> None:
    settings = unit_settings(UNIT.read_text())
    assert settings["Type"] == ["notify"]
    assert settings["NotifyAccess"] == ["main"]
    assert settings["EnvironmentFile"] == ["/etc/refmount/%i.conf"]
    [start] = settings["ExecStart"]
    assert start.split() == [INSTALLED_BINARY, "-f", "$OPTIONS", "${REFS}", "${MOUNTPOINT}"]
    [stop_post] = settings["ExecStopPost"]
    assert stop_post.startswith("-")  # the daemon has usually unmounted already
    assert stop_post[1:].split()[1:] == ["-u", "-z", "${MOUNTPOINT}"]
    assert stop_post[1:].split()[0].endswith("/fusermount3")
    assert settings["Restart"] == ["on-failure"]
    assert settings["DeviceAllow"] == ["/dev/fuse rw"]


def test_unit_has_no_mount_namespace_that_would_hide_the_mount() -> None:
    settings = unit_settings(UNIT.read_text())
    assert NAMESPACE_DIRECTIVES.isdisjoint(settings), NAMESPACE_DIRECTIVES & settings.keys()


def test_example_configuration_defines_what_the_unit_uses() -> None:
    example = unit_settings((UNIT.parent / "refmount.conf.example").read_text())
    assert set(example) == {"REFS", "MOUNTPOINT", "OPTIONS"}
    assert example["MOUNTPOINT"][0].startswith("/")
    assert "-f" not in example["OPTIONS"][0].split()


@pytest.fixture
def notify_socket() -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket standing in for systemd's, at a short path (108-byte limit)."""
    with tempfile.TemporaryDirectory(prefix="rmn-") as directory:
        path = os.path.join(directory, "notify")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            yield sock, path


@contextmanager
def foreground(
    refs: Path, mountpoint: Path, environment: Mapping[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``refmount -f`` with extra environment; always unmount and reap it."""
    log = mountpoint.parent / f"{mountpoint.name}.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            refmount_command("-f", str(refs), str(mountpoint)),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **environment},
        )
    try:
        yield process
    finally:
        unmount(mountpoint)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise


def receive(sock: socket.socket, process: subprocess.Popen[bytes]) -> dict[str, str]:
    """Wait for the next notification from ``process``; return its assignments."""
    deadline = time.monotonic() + 30
    sock.settimeout(0.1)
    while time.monotonic() < deadline:
        try:
            datagram = sock.recv(4096)
        except TimeoutError:
            assert process.poll() is None, f"refmount exited with {process.returncode}"
            continue
        return dict(line.split("=", 1) for line in datagram.decode().split("\n"))
    raise AssertionError("no notification within 30 s")


@pytest.mark.fuse
@requires_fuse
def test_ready_only_once_the_mount_answers_and_stopping_on_sigterm(
    tmp_path: Path, mount_dir: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, address = notify_socket
    dataset = json_v0(tmp_path / "v0")
    parent_device = os.stat(mount_dir.parent).st_dev
    with foreground(dataset.refs, mount_dir, {"NOTIFY_SOCKET": address}) as process:
        ready = receive(sock, process)
        status = os.stat(mount_dir)  # right away: READY=1 must mean "answers now"
        assert ready["READY"] == "1"
        assert status.st_dev != parent_device
        assert status.st_ino == 1
        assert (mount_dir / "text").read_bytes() == dataset.expected["text"]
        assert ready["STATUS"] == f"mounted {dataset.refs} on {mount_dir}"
        assert ready["MAINPID"] == str(process.pid)
        process.send_signal(signal.SIGTERM)
        stopping = receive(sock, process)
        assert stopping == {"STOPPING": "1", "STATUS": f"unmounting {mount_dir}"}
        assert process.wait(timeout=15) == 0
        assert not is_mounted(mount_dir)


@pytest.mark.fuse
@requires_fuse
def test_stopping_when_unmounted_from_outside(
    tmp_path: Path, mount_dir: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, address = notify_socket
    dataset = json_v0(tmp_path / "v0")
    with foreground(dataset.refs, mount_dir, {"NOTIFY_SOCKET": address}) as process:
        assert receive(sock, process)["READY"] == "1"
        subprocess.run(["fusermount3", "-u", str(mount_dir)], check=True, timeout=30)
        assert receive(sock, process)["STOPPING"] == "1"
        assert process.wait(timeout=15) == 0


@pytest.mark.fuse
@requires_fuse
def test_journald_lines_have_no_timestamp_and_keep_the_level(
    tmp_path: Path, mount_dir: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, address = notify_socket
    dataset = json_v0(tmp_path / "v0")
    environment = {"NOTIFY_SOCKET": address, "JOURNAL_STREAM": "8:123456"}
    with foreground(dataset.refs, mount_dir, environment) as process:
        assert receive(sock, process)["READY"] == "1"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    lines = (tmp_path / "mnt.log").read_text().splitlines()
    assert any("mounted on" in line for line in lines), lines
    for line in lines:
        assert not TIMESTAMP.search(line), line
        # journald reads an optional "<N>" syslog priority; the level name stays readable.
        match = re.match(r"(?:<(\d)>)?(DEBUG|INFO|WARNING|ERROR|CRITICAL) refmount\S*: ", line)
        assert match, line
        if match[1] is not None:
            assert int(match[1]) == PRIORITIES[match[2]], line


@pytest.mark.fuse
@requires_fuse
def test_sigusr1_dumps_every_thread_and_the_mount_keeps_serving(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        assert (mount.path / "text").read_bytes() == dataset.expected["text"]
        mount.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 15
        # faulthandler writes the dump in many small writes: wait for the main thread's
        # frames (the last part written), not for the dump's first line
        while "mount_and_serve" not in mount.log_text():
            assert time.monotonic() < deadline, mount.log_text()
            time.sleep(0.05)
        log = mount.log_text()
        assert "Current thread 0x" in log
        assert "most recent call first" in log
        assert "mount_and_serve" in log  # the main thread is in the trio loop
        assert mount.process.poll() is None
        key = "x/deep/nested/c7"
        assert (mount.path / key).read_bytes() == dataset.expected[key]
        assert sorted(os.listdir(mount.path / "x")) == [".zarray", "deep"]
