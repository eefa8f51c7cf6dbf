"""Hostile servers under a real mount: whatever they send, reads end in EIO, bounded in memory.

Each server answers every GET of a target as one ``Hostile`` mode says (a range ignored with
a gigabyte body, a body that never ends, a gzip bomb, a body that stalls half-way). The
daemon runs under an address-space limit (so a regression fails the test, not the machine)
and its peak RSS (``VmHWM``) must stay within its RSS after loading + ``--cache-size`` +
64 MiB, as docs/semantics.md says.
"""

from __future__ import annotations

import errno
import json
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.datasets import target_bytes
from tests.support.mounting import Mount, mounted, read_errno, requires_fuse
from tests.support.servers import Hostile, RangeHTTPServer, gzip_member

pytestmark = [
    pytest.mark.usefixtures("each_fetcher"),
    pytest.mark.fuse,
    pytest.mark.http,
    requires_fuse,
]

MIB = 1024 * 1024
CACHE = 32 * MIB
HEADROOM = 64 * MIB
"""What the daemon may hold on top of its RSS after loading and its cache (the documented
bound)."""
ADDRESS_SPACE_ROOM = 2048 * MIB
"""The daemon's address space may grow by this much after mounting (threads reserve stack
and malloc arenas): room enough to run, too little to hold what the servers send."""
SLACK = 5.0
"""Seconds allowed on top of a computed bound (process scheduling on a loaded machine)."""
BUCKET = "hostile"
KEY_BYTES = 1 * MIB
TARGET = target_bytes(3 * MIB, 7)


def status_kib(pid: int, field: str) -> int:
    """Return a ``/proc/PID/status`` figure in KiB (``VmRSS``, ``VmHWM``, ``VmSize``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def limit_address_space(mount: Mount) -> int:
    """Cap the daemon's address space a little above its size now; return its RSS in bytes."""
    pid = mount.process.pid
    limit = status_kib(pid, "VmSize") * 1024 + ADDRESS_SPACE_ROOM
    resource.prlimit(pid, resource.RLIMIT_AS, (limit, limit))
    return status_kib(pid, "VmRSS") * 1024


def hostile_set(tmp_path: Path, targets: dict[str, tuple[str, str]]) -> Path:
    """A set with, for each name, a 1 MiB range and a whole-file reference of a target and
    a small range of another one (``warm``: read while the server is still honest)."""
    refs: dict[str, Any] = {".zgroup": {"zarr_format": 2}}
    for name, (url, warm) in targets.items():
        refs[f"{name}/range"] = [url, 4096, KEY_BYTES]
        refs[f"{name}/whole"] = [url]
        refs[f"{name}/warm"] = [warm, 0, 4096]
    path = tmp_path / "set" / "refs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(refs))
    return path


def errors_naming(mount: Mount, key: str) -> list[str]:
    return [line for line in mount.log_text().splitlines() if "ERROR" in line and key in line]


@pytest.fixture
def hostile_server() -> Iterator[RangeHTTPServer]:
    """A range server serving one 3 MiB target, honest until the test sets ``hostile``.

    The gzip bomb's member is made first: making it takes a second or more on a loaded
    machine, which would count against the first read's ``--timeout``."""
    gzip_member()
    with RangeHTTPServer(stall_seconds=60.0) as server:
        for path in ("data.bin", "warm.bin", f"{BUCKET}/data.bin", f"{BUCKET}/warm.bin"):
            server.add(path, TARGET)
        yield server
    assert server.errors == []


PROBLEMS = {
    Hostile.HUGE_BODY: "ignored the Range request: it answered HTTP 200 with 1073741824 bytes",
    Hostile.ENDLESS_BODY: "ignored the Range request: it answered HTTP 206 with more bytes",
    Hostile.GZIP_BOMB: "Content-Encoding 'gzip'",
    Hostile.STALL_MID_BODY: "no answer within 1 s",
}


@pytest.mark.parametrize("hostile", list(Hostile), ids=lambda mode: mode.value)
def test_a_hostile_http_server_gets_eio_within_the_memory_bound(
    tmp_path: Path, hostile_server: RangeHTTPServer, hostile: Hostile
) -> None:
    refs = hostile_set(
        tmp_path, {"h": (hostile_server.url_for("data.bin"), hostile_server.url_for("warm.bin"))}
    )
    options = ["--cache-size", f"{CACHE // MIB}M", "--timeout", "1s", "--retries", "1"]
    with mounted(refs, tmp_path / "mnt", *options) as mount:
        # an honest read first: the daemon has run its read path once before the baseline
        assert (mount.path / "h/warm").read_bytes() == TARGET[:4096]
        baseline = limit_address_space(mount)
        hostile_server.hostile = hostile
        started = time.monotonic()
        for key in ("h/range", "h/whole"):
            (mount.path / key).stat()
            assert read_errno(mount.path / key) == errno.EIO, key
        elapsed = time.monotonic() - started
        peak = status_kib(mount.process.pid, "VmHWM") * 1024
        print(
            f"\n{hostile.value}: peak RSS {peak / MIB:.0f} MiB, after loading "
            f"{baseline / MIB:.0f} MiB, two reads in {elapsed:.1f} s"
        )
        assert peak <= baseline + CACHE + HEADROOM, (peak, baseline)
        assert mount.process.poll() is None, mount.log_text()[-3000:]
        hostile_server.hostile = None
        assert (mount.path / ".zgroup").read_bytes() == b'{"zarr_format": 2}'
    for key in ("'h/whole'", "'h/range'"):
        lines = errors_naming(mount, key)
        assert len(lines) == 1, lines  # one read(): one line
        assert hostile_server.url_for("data.bin") in lines[0]
        assert PROBLEMS[hostile] in lines[0], lines[0]
    assert mount.process.returncode == 0


@pytest.mark.parametrize(
    "hostile", [Hostile.HUGE_BODY, Hostile.ENDLESS_BODY, Hostile.GZIP_BOMB], ids=str
)
def test_a_hostile_s3_endpoint_gets_eio_within_the_memory_bound(
    tmp_path: Path,
    hostile_server: RangeHTTPServer,
    hostile: Hostile,
    aws_env: dict[str, str],
) -> None:
    """An S3 endpoint ignoring Range or sending encoded bytes: the body is read as a stream
    and never inflated (a gzip-encoded object is served raw: here shorter than the range)."""
    url = f"s3://{BUCKET}/data.bin"
    refs = hostile_set(tmp_path, {"s": (url, f"s3://{BUCKET}/warm.bin")})
    options = [
        "--cache-size", f"{CACHE // MIB}M", "--timeout", "2s", "--retries", "1",
        "-o", f"s3_endpoint_url={hostile_server.url},s3_region=us-east-1",
    ]  # fmt: skip
    with mounted(refs, tmp_path / "mnt", *options) as mount:
        assert (mount.path / "s/warm").read_bytes() == TARGET[:4096]
        baseline = limit_address_space(mount)
        hostile_server.hostile = hostile
        assert read_errno(mount.path / "s/range") == errno.EIO
        peak = status_kib(mount.process.pid, "VmHWM") * 1024
        print(
            f"\ns3 {hostile.value}: peak RSS {peak / MIB:.0f} MiB, after loading "
            f"{baseline / MIB:.0f} MiB"
        )
        assert peak <= baseline + CACHE + HEADROOM, (peak, baseline)
        assert mount.process.poll() is None, mount.log_text()[-3000:]
    lines = errors_naming(mount, "'s/range'")
    assert len(lines) == 1, lines
    assert url in lines[0]
    assert mount.process.returncode == 0


def test_a_stalled_body_ends_the_read_in_one_round_of_retries(
    tmp_path: Path, hostile_server: RangeHTTPServer
) -> None:
    """Headers then half the body then nothing: each attempt ends at --timeout, one read()
    costs retries + 1 requests (the kernel's second ask is answered from the failure just
    seen) and one log line, within timeout x (retries + 1) plus the backoff."""
    timeout, retries = 1.0, 2
    bound = timeout * (retries + 1) + sum(min(2.0, 0.05 * 2.0**a) for a in range(retries))
    refs = hostile_set(
        tmp_path, {"h": (hostile_server.url_for("data.bin"), hostile_server.url_for("warm.bin"))}
    )
    options = ["--timeout", f"{timeout:g}s", "--retries", str(retries)]
    with mounted(refs, tmp_path / "mnt", *options) as mount:
        (mount.path / "h/range").stat()
        hostile_server.hostile = Hostile.STALL_MID_BODY
        hostile_server.clear_requests()
        started = time.monotonic()
        assert read_errno(mount.path / "h/range") == errno.EIO
        elapsed = time.monotonic() - started
        print(f"\nstalled body: EIO after {elapsed:.1f} s (bound {bound:.2f} s)")
        assert elapsed < bound + SLACK
        # no second round (a loaded server may not have recorded a retry that timed out)
        assert 1 <= hostile_server.count("GET", "data.bin") <= retries + 1
    lines = errors_naming(mount, "'h/range'")
    assert len(lines) == 1, lines
    assert f"after {retries + 1} attempts" in lines[0]
