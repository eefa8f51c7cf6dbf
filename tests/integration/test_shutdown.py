"""Shutdown is prompt whatever is in flight: SIGTERM, SIGINT and a lazy unmount end the daemon.

Reads are left in flight against a stalling server, a server answering 503 (the reads wait
between retries) and a local target on a FUSE filesystem whose reads never answer
(``tests.stuckfs``, the ``stuck_target`` fixture).
"""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from multiprocessing.pool import AsyncResult, ThreadPool
from pathlib import Path
from typing import Any

import pytest

from tests.support.mounting import Mount, is_mounted, mounted, read_errno, requires_fuse
from tests.support.servers import Fault, FaultProxy, RangeHTTPServer

pytestmark = [pytest.mark.fuse, pytest.mark.http, requires_fuse]

DEADLINE = 15.0
"""Seconds within which the daemon must be gone (it aims at 5; a loaded machine)."""

READERS = 4
"""Reads left in flight per kind of trouble."""


@pytest.fixture
def retrying_proxy(http_server: RangeHTTPServer) -> Iterator[FaultProxy]:
    """A second proxy in front of ``http_server`` that answers every request 503."""
    with FaultProxy(http_server.url, stall_seconds=30.0, seed=7) as proxy:
        proxy.set_default(Fault.ERROR_503)
        yield proxy


def troubled_set(
    tmp_path: Path,
    http_server: RangeHTTPServer,
    stalling: FaultProxy,
    retrying: FaultProxy,
    stuck: Path,
) -> Path:
    """Keys whose reads cannot finish soon: stalled, retried, stuck; and one that reads."""
    http_server.add("data/a.bin", bytes(range(256)) * 64)
    refs: dict[str, Any] = {".zgroup": {"zarr_format": 2}, "fine": "fine"}
    for i in range(READERS):
        refs[f"stalled/{i}"] = [stalling.url_for("data/a.bin"), i * 1024, 512]
        refs[f"retried/{i}"] = [retrying.url_for("data/a.bin"), i * 1024, 512]
        refs[f"stuck/{i}"] = [str(stuck), i * 65536, 4096]
    path = tmp_path / "set" / "refs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(refs))
    return path


def start_reads(pool: ThreadPool, mount: Mount) -> AsyncResult[list[int | None]]:
    keys = [f"{kind}/{i}" for kind in ("stalled", "retried", "stuck") for i in range(READERS)]
    return pool.map_async(read_errno, [mount.path / key for key in keys])


def wait_until_in_flight(stalling: FaultProxy, retrying: FaultProxy) -> None:
    """Wait until a request stalls and a read waits to retry (the reads of one target share
    the first request, which asks for its version)."""
    deadline = time.monotonic() + DEADLINE
    while stalling.count_applied(Fault.STALL) < 1 or retrying.count_applied(Fault.ERROR_503) < 2:
        assert time.monotonic() < deadline, "the reads did not reach the servers"
        time.sleep(0.05)
    time.sleep(0.5)  # the stuck local reads have reached their target too


def time_to_exit(mount: Mount) -> float:
    started = time.monotonic()
    try:
        mount.process.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the daemon still runs {DEADLINE:g} s later:\n{mount.log_text()[-3000:]}")
    return time.monotonic() - started


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_daemon_promptly_with_reads_in_flight(
    tmp_path: Path,
    http_server: RangeHTTPServer,
    fault_proxy: FaultProxy,
    retrying_proxy: FaultProxy,
    stuck_target: Path,
    signum: signal.Signals,
) -> None:
    fault_proxy.set_default(Fault.STALL)
    refs = troubled_set(tmp_path, http_server, fault_proxy, retrying_proxy, stuck_target)
    options = ("--timeout", "30s", "--retries", "10")
    with mounted(refs, tmp_path / "mnt", *options) as mount, ThreadPool(3 * READERS) as pool:
        reads = start_reads(pool, mount)
        wait_until_in_flight(fault_proxy, retrying_proxy)
        assert (mount.path / "fine").read_bytes() == b"fine"
        mount.process.send_signal(signum)
        took = time_to_exit(mount)
        failures = reads.get(timeout=DEADLINE)
        assert not is_mounted(mount.path)
    print(f"exit {took:.2f} s after {signum.name} with {3 * READERS} reads in flight")
    assert mount.process.returncode == 0, mount.log_text()[-3000:]
    assert failures == [errno.EIO] * (3 * READERS)
    assert f"received {signum.name}, unmounting" in mount.log_text()


def test_a_lazy_unmount_ends_the_daemon_promptly_with_reads_in_flight(
    tmp_path: Path,
    http_server: RangeHTTPServer,
    fault_proxy: FaultProxy,
    retrying_proxy: FaultProxy,
    stuck_target: Path,
) -> None:
    fault_proxy.set_default(Fault.STALL)
    refs = troubled_set(tmp_path, http_server, fault_proxy, retrying_proxy, stuck_target)
    options = ("--timeout", "30s", "--retries", "10")
    with mounted(refs, tmp_path / "mnt", *options) as mount, ThreadPool(3 * READERS) as pool:
        reads = start_reads(pool, mount)
        wait_until_in_flight(fault_proxy, retrying_proxy)
        subprocess.run(["fusermount3", "-u", "-z", str(mount.path)], check=True)
        took = time_to_exit(mount)
        failures = reads.get(timeout=DEADLINE)
    print(f"exit {took:.2f} s after a lazy unmount with {3 * READERS} reads in flight")
    assert mount.process.returncode == 0, mount.log_text()[-3000:]
    assert failures == [errno.EIO] * (3 * READERS)
    assert "the mount was detached (lazy unmount), unmounting" in mount.log_text()
