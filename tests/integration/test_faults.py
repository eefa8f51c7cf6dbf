"""Faults under a real mount: a target server killed and restarted, a slow server, a kill -9."""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from refmount.read.failures import FAILED_RANGE_SECONDS
from tests.support.datasets import target_bytes
from tests.support.mounting import Mount, mounted, requires_fuse
from tests.support.servers import RangeHTTPServer

pytestmark = [
    pytest.mark.usefixtures("each_fetcher"),
    pytest.mark.fuse,
    pytest.mark.http,
    requires_fuse,
]

SLACK = 5.0
"""Seconds allowed on top of a computed bound (process scheduling on a loaded machine)."""


def worst_case(timeout: float, retries: int) -> float:
    """The longest one request may take: every attempt times out, every delay is the longest
    (``--timeout`` x attempts plus the backoff limits, as docs/semantics.md says)."""
    delays = sum(min(2.0, 0.05 * 2.0**attempt) for attempt in range(retries))
    return timeout * (retries + 1) + delays


@pytest.fixture
def server() -> Iterator[RangeHTTPServer]:
    """A range server that the test may stop and restart (on the same port)."""
    with RangeHTTPServer() as server:
        yield server
    assert server.errors == []


def chunked_set(
    tmp_path: Path, server: RangeHTTPServer, count: int, size: int
) -> tuple[Path, dict[str, bytes]]:
    """A set of ``count`` keys of ``size`` bytes, each a range of one target on ``server``."""
    data = target_bytes(count * size + 17, 61)
    url = server.add("data/big.bin", data)
    refs: dict[str, Any] = {".zgroup": {"zarr_format": 2}}
    expected: dict[str, bytes] = {}
    for i in range(count):
        offset = 17 + i * size
        refs[f"c/{i}"] = [url, offset, size]
        expected[f"c/{i}"] = data[offset : offset + size]
    path = tmp_path / "set" / "refs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(refs))
    return path, expected


class TimedRead(threading.Thread):
    """Read one file whole in a daemon thread; keep the outcome and when it finished."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True, name=f"read-{path.name}")
        self.path = path
        self.outcome: bytes | OSError | None = None
        self.finished = 0.0

    def run(self) -> None:
        try:
            self.outcome = self.path.read_bytes()
        except OSError as error:
            self.outcome = error
        self.finished = time.monotonic()


def assert_alive(mount: Mount) -> None:
    """The daemon still runs and its mount answers."""
    assert mount.process.poll() is None, mount.log_text()[-3000:]
    assert "c" in os.listdir(mount.path)
    assert (mount.path / ".zgroup").read_bytes() == b'{"zarr_format": 2}'


def wait_for(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def covered(server: RangeHTTPServer, spans: list[tuple[int, int]]) -> bool:
    """Return True once GETs the server received cover every ``[start, end)`` of ``spans``."""
    received = []
    for request in server.requests:
        if request.method == "GET" and request.range and request.range.startswith("bytes="):
            first, _, last = request.range.removeprefix("bytes=").partition("-")
            if first and last:
                received.append((int(first), int(last) + 1))
    return all(any(a <= start and end <= b for a, b in received) for start, end in spans)


def test_target_killed_during_reads_then_restarted_on_the_same_port(
    tmp_path: Path, server: RangeHTTPServer
) -> None:
    timeout, retries = 2.0, 2
    bound = worst_case(timeout, retries)
    # 256 KiB keys at 256 kB/s: each transfer takes about a second, so they are in flight
    path, expected = chunked_set(tmp_path, server, 12, 256 * 1024)
    server.throttle_bytes_per_second = 256_000
    port = server.port
    options = ["--timeout", f"{timeout:g}s", "--retries", str(retries)]
    with mounted(path, tmp_path / "mnt", *options) as mount:
        readers = [TimedRead(mount.path / f"c/{i}") for i in range(6)]
        for reader in readers:
            reader.start()
        # every read's bytes asked for: its own GET, or a neighbour prefetch covering it
        asked = [(17 + i * 256 * 1024, 17 + (i + 1) * 256 * 1024) for i in range(len(readers))]
        wait_for(lambda: covered(server, asked), 20, "the reads to reach the server")
        time.sleep(0.2)
        killed = time.monotonic()
        server.stop()  # cuts every transfer short; new connections are refused
        for reader in readers:
            # a buffered read may be one request with its retries, tried twice by the kernel
            reader.join(2 * bound + SLACK)
            assert not reader.is_alive(), f"{reader.path} still reading {2 * bound + SLACK} s on"
        for reader in readers:
            assert isinstance(reader.outcome, OSError), f"{reader.path}: read during the kill"
            assert reader.outcome.errno == errno.EIO, repr(reader.outcome)
            assert reader.finished - killed < 2 * bound + SLACK
        # while the server is down: a new read fails quickly (refused), the mount answers
        started = time.monotonic()
        down = TimedRead(mount.path / "c/7")
        down.start()
        down.join(2 * bound + SLACK)
        assert isinstance(down.outcome, OSError), down.outcome
        assert down.outcome.errno == errno.EIO
        assert time.monotonic() - started < 2 * bound + SLACK
        assert_alive(mount)
        # back on the same port: every key reads right, the ones that failed included
        server.throttle_bytes_per_second = None
        server.start()
        assert server.port == port
        time.sleep(FAILED_RANGE_SECONDS)  # until then a range that just failed fails again
        for key, data in expected.items():
            assert (mount.path / key).read_bytes() == data, key
        assert_alive(mount)
    failures = [line for line in mount.log_text().splitlines() if "ERROR" in line]
    assert any("'c/0'" in line or "'c/1'" in line for line in failures), failures
    assert mount.process.returncode == 0


def test_slow_server_gives_the_right_bytes(tmp_path: Path, server: RangeHTTPServer) -> None:
    rate = 200_000  # bytes per second
    path, expected = chunked_set(tmp_path, server, 4, 100_000)
    server.throttle_bytes_per_second = rate
    with mounted(path, tmp_path / "mnt", "--timeout", "5s", "--retries", "1") as mount:
        started = time.monotonic()
        readers = [TimedRead(mount.path / key) for key in expected]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(30)
        for reader in readers:
            assert reader.outcome == expected[reader.path.relative_to(mount.path).as_posix()]
        # the server really was slow: each 100 kB key took about half a second
        assert time.monotonic() - started >= 0.4
        assert_alive(mount)


def test_a_transfer_slower_than_the_timeout_is_eio(tmp_path: Path, server: RangeHTTPServer) -> None:
    timeout, retries = 0.5, 1
    bound = worst_case(timeout, retries)
    # 400 kB at 200 kB/s takes 2 s: the headers come at once, the whole answer never in time
    path, expected = chunked_set(tmp_path, server, 2, 400_000)
    server.throttle_bytes_per_second = 200_000
    options = ["--timeout", f"{timeout:g}s", "--retries", str(retries)]
    with mounted(path, tmp_path / "mnt", *options) as mount:
        reader = TimedRead(mount.path / "c/0")
        started = time.monotonic()
        reader.start()
        reader.join(2 * bound + SLACK)
        assert isinstance(reader.outcome, OSError), "the slow transfer was not cut off"
        assert reader.outcome.errno == errno.EIO
        assert reader.finished - started < 2 * bound + SLACK
        # the retry may time out before a loaded server has recorded it: the log counts them
        assert server.count("GET") >= 1
        assert_alive(mount)
        server.throttle_bytes_per_second = None
        time.sleep(FAILED_RANGE_SECONDS)
        assert (mount.path / "c/0").read_bytes() == expected["c/0"]
    lines = [line for line in mount.log_text().splitlines() if "'c/0'" in line and "ERROR" in line]
    assert lines, mount.log_text()[-3000:]
    assert "0.5 s" in lines[0]
    assert f"after {retries + 1} attempts" in lines[0]
