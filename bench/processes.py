"""Child processes and what /proc says about them: stopping, memory, CPU time, free ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_process(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop a child this benchmark started, by its PID; SIGKILL it if it does not go."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


def wait_for_port(port: int, process: subprocess.Popen[bytes], log_path: Path) -> None:
    """Wait until something listens on ``port``; raise if ``process`` exits or 30 s pass."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise RuntimeError(f"server exited with {process.returncode}: {tail}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after 30 s")


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MiB (empty when it is gone)."""
    fields: dict[str, float] = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
    return fields


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU time ``pid`` has used so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> list[int]:
    """The PIDs of ``pid``'s direct children (nginx's workers of its master), from /proc."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)
