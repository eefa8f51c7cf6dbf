"""Benchmark refmount against fsspec on the same data, in the same run.

Run it with ``scripts/bench`` (options: ``--help``); docs/performance.md explains every figure.
Everything is generated under a temporary directory and removed afterwards; every server
(nginx, s3rver or moto) listens on 127.0.0.1 only and is started and stopped here, as are the
mounts and ``vmtouch``, which keeps the targets resident in the page cache while measuring.

For each target (local files, HTTP, S3) the same keys are read by refmount (the real command,
mounted in a child process), by in-process fsspec ``ReferenceFileSystem.cat`` one key at a time,
by fsspec's own FUSE mount (``fsspec.fuse``, in a child process) and directly from the target
(``os.pread`` or concurrent ranged GETs: the physical limit). The "pyfuse3 floor" serves the same
1 MiB chunks from memory through the least a pyfuse3 filesystem can do
(``scripts/fuse_floor.py``): what no pyfuse3 daemon, refmount included, can beat on this
machine. Each measurement is bounded by ``--budget`` seconds: a loop that runs out of time
reports the rate of what it did.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from refmount.ops import kernel_tuning
from tests.support.datasets import zarray
from tests.support.mounting import is_mounted, unmount
from tests.support.servers import (
    AWS_VARIABLES_TO_CLEAR,
    DUMMY_AWS_ENVIRONMENT,
    create_bucket,
    moto_s3,
)

KIB = 1024
MIB = 1024 * KIB
ROOT = Path(__file__).resolve().parent.parent
FLOOR_SCRIPT = ROOT / "scripts" / "fuse_floor.py"
C_FLOOR_SOURCE = ROOT / "scripts" / "fuse_floor.c"
NGINX_TEMPLATE = ROOT / "bench" / "nginx.conf.template"
S3RVER = ROOT / "bench" / "node" / "node_modules" / ".bin" / "s3rver"
FUSEPY_DEBIAN = Path("/usr/lib/python3/dist-packages/fusepy.py")
"""Debian's python3-fusepy installs fusepy as ``fusepy``; fsspec imports it as ``fuse``."""
S3RVER_KEY = "S3RVER"
"""s3rver's fixed dummy access key and secret."""
SECTIONS = ("local", "http", "s3", "listing", "huge", "json", "decode", "gen")
TOOLS = ("refmount", "cat", "fuse", "raw", "floor", "cfloor", "cfloor_mt")
TOOL_TITLES = {
    "refmount": "refmount",
    "cat": "fsspec cat",
    "fuse": "fsspec.fuse",
    "raw": "raw",
    "floor": "pyfuse3 floor",
    "cfloor": "C floor",
    "cfloor_mt": "C floor (mt)",
}
BASELINES = ("cat", "fuse", "raw", "floor", "cfloor")


# ------------------------------------------------------------------------------ helpers


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_process(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop a child this script started, by its PID; SIGKILL it if it does not go."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


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


class CpuMeter:
    """Busy share of all CPUs (from /proc/stat) and load average over a span of time."""

    def __init__(self) -> None:
        self.start = self._read()
        self.load_start = os.getloadavg()[0]

    @staticmethod
    def _read() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        idle = values[3] + values[4]
        return sum(values) - idle, sum(values)

    def result(self) -> dict[str, float]:
        busy, total = self._read()
        delta = max(1, total - self.start[1])
        return {
            "cpu_busy_share": round((busy - self.start[0]) / delta, 3),
            "loadavg_1m_start": self.load_start,
            "loadavg_1m_end": os.getloadavg()[0],
        }


def other_cpu_share(seconds: float = 1.0) -> float:
    """Share of all CPUs busy while this script sleeps: what other processes use."""
    meter = CpuMeter()
    time.sleep(seconds)
    return meter.result()["cpu_busy_share"]


DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")


def proactive_reclaim(root: Path = DAMON) -> list[str]:
    """Describe the running DAMON schemes that reclaim memory: they drop page-cached data
    (the targets', the mount's) with memory free, so re-reads may go back to the daemon."""

    def value(path: Path) -> str:
        try:
            return path.read_text().strip()
        except OSError:
            return "?"

    found = []
    for kdamond in sorted(root.glob("[0-9]*")):
        if value(kdamond / "state") != "on":
            continue
        for context in sorted((kdamond / "contexts").glob("[0-9]*")):
            intervals = context / "monitoring_attrs" / "intervals"
            aggregation_us = value(intervals / "aggr_us")
            for scheme in sorted((context / "schemes").glob("[0-9]*")):
                action = value(scheme / "action")
                if action not in {"pageout", "lru_deprio"}:
                    continue
                age = value(scheme / "access_pattern" / "age" / "min")
                try:
                    idle = f"{int(age) * int(aggregation_us) / 1e6:g} s"
                except ValueError:
                    idle = "?"
                quotas = scheme / "quotas"
                found.append(
                    f"DAMON {action} ({value(context / 'operations')}) of pages idle "
                    f">= {idle}, quota {value(quotas / 'bytes')} bytes per "
                    f"{value(quotas / 'reset_interval_ms')} ms"
                )
    return found


@dataclass
class Bounded:
    """What a time-bounded loop did."""

    count: int
    nbytes: int
    seconds: float
    finished: bool

    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def mib_s(self) -> float:
        return self.nbytes / MIB / self.seconds if self.seconds else 0.0


def bounded(items: Sequence[Any], function: Callable[[Any], int], budget: float) -> Bounded:
    """Call ``function`` on items in order until done or ``budget`` seconds passed."""
    started = time.perf_counter()
    deadline = started + budget
    nbytes = count = 0
    for item in items:
        nbytes += function(item)
        count += 1
        if time.perf_counter() > deadline:
            break
    return Bounded(count, nbytes, time.perf_counter() - started, count == len(items))


def bounded_parallel(
    items: Sequence[Any], function: Callable[[Any], int], budget: float, threads: int
) -> Bounded:
    """The same with ``threads`` readers taking items from a shared queue."""
    lock = threading.Lock()
    iterator = iter(items)
    totals = [0, 0]
    started = time.perf_counter()
    deadline = started + budget

    def worker() -> None:
        while time.perf_counter() < deadline:
            with lock:
                item = next(iterator, None)
            if item is None:
                return
            nbytes = function(item)
            with lock:
                totals[0] += 1
                totals[1] += nbytes

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(worker) for _ in range(threads)]:
            future.result()
    return Bounded(totals[0], totals[1], time.perf_counter() - started, totals[0] == len(items))


READ_BUFFERS = threading.local()
"""Each reading thread's one 1 MiB buffer, reused by every ``read_whole``."""


def read_whole(path: Path) -> int:
    """Read ``path`` to its end with ``readinto`` into this thread's reused buffer.

    A new 1 MiB ``bytes`` per ``read()`` makes glibc trim and fault the heap again for every
    read, which costs more than FUSE does: the loop would measure the reader, not the mount.
    """
    view: memoryview | None = getattr(READ_BUFFERS, "view", None)
    if view is None:
        view = READ_BUFFERS.view = memoryview(bytearray(MIB))
    total = 0
    with open(path, "rb", buffering=0) as handle:
        while count := handle.readinto(view):
            total += count
    return total


def first_byte(path: Path) -> float:
    started = time.perf_counter()
    with open(path, "rb", buffering=0) as handle:
        handle.read(1)
    return time.perf_counter() - started


# ------------------------------------------------------------------------------ data


@dataclass
class DataSet:
    """Generated target files and reference sets, the same for every target."""

    directory: Path
    big_chunks: int
    many_chunks: int
    big_file: Path = field(init=False)
    many_file: Path = field(init=False)

    def __post_init__(self) -> None:
        self.big_file = self.directory / "data" / "big.bin"
        self.many_file = self.directory / "data" / "many.bin"

    def generate(self) -> None:
        (self.directory / "data").mkdir(parents=True, exist_ok=True)
        for path, size, seed in (
            (self.big_file, self.big_chunks * MIB, 1),
            (self.many_file, self.many_chunks * 4 * KIB, 2),
        ):
            rng = np.random.default_rng(seed)
            with open(path, "wb") as handle:
                left = size
                while left:
                    step = min(left, 64 * MIB)
                    handle.write(rng.bytes(step))
                    left -= step

    def big_ranges(self) -> list[tuple[int, int]]:
        return [(i * MIB, MIB) for i in range(self.big_chunks)]

    def many_ranges(self) -> list[tuple[int, int]]:
        return [(i * 4 * KIB, 4 * KIB) for i in range(self.many_chunks)]

    def expected(self, which: str, index: int) -> bytes:
        path, size = (self.big_file, MIB) if which == "big" else (self.many_file, 4 * KIB)
        with open(path, "rb") as handle:
            handle.seek(index * size)
            return handle.read(size)

    def write_refs(self, name: str, big_url: str, many_url: str) -> dict[str, Path]:
        """JSON sets for "big" and "many" and a Parquet set for "many", pointing at the URLs."""
        out = self.directory / name
        out.mkdir(parents=True, exist_ok=True)
        big: dict[str, Any] = {
            ".zgroup": '{"zarr_format": 2}',
            "big/.zarray": json.dumps(zarray([self.big_chunks * MIB], [MIB])),
        }
        for i, (offset, size) in enumerate(self.big_ranges()):
            big[f"big/{i}"] = [big_url, offset, size]
        (out / "big.json").write_text(json.dumps({"version": 1, "refs": big}))
        many: dict[str, Any] = {
            ".zgroup": '{"zarr_format": 2}',
            "many/.zarray": json.dumps(zarray([self.many_chunks * 4 * KIB], [4 * KIB])),
        }
        for i, (offset, size) in enumerate(self.many_ranges()):
            many[f"many/{i}"] = [many_url, offset, size]
        (out / "many.json").write_text(json.dumps({"version": 1, "refs": many}))
        metadata = {
            ".zgroup": {"zarr_format": 2},
            "many/.zarray": zarray([self.many_chunks * 4 * KIB], [4 * KIB]),
        }
        count = self.many_chunks
        write_parquet(
            out / "many.parq",
            metadata,
            "many",
            many_url,
            np.arange(count, dtype="int64") * 4 * KIB,
            4 * KIB,
        )
        return {"big": out / "big.json", "many": out / "many.json", "many_parq": out / "many.parq"}


def write_parquet(
    root: Path,
    metadata: dict[str, Any],
    variable: str,
    url: str,
    offsets: np.ndarray[Any, Any],
    size: int,
    record_size: int = 100_000,
) -> None:
    """A Parquet reference directory: one variable, every chunk in the same target file."""
    (root / variable).mkdir(parents=True, exist_ok=True)
    (root / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": record_size}))
    total = len(offsets)
    for record in range(-(-total // record_size)):
        start = record * record_size
        count = min(record_size, total - start)
        table = pa.table(
            {
                "path": pa.array([url] * count).dictionary_encode(),
                "offset": pa.array(offsets[start : start + count]),
                "size": pa.array(np.full(count, size, dtype="int64")),
                "raw": pa.nulls(count, pa.binary()),
            }
        )
        pq.write_table(table, root / variable / f"refs.{record}.parq", compression="zstd")


def make_huge(directory: Path, references: int, target: Path) -> tuple[Path, str]:
    """A Parquet set of ``references`` 100-byte chunks on a 2-D grid; return it and one key."""
    side = max(1, int(references**0.5))
    rows, columns = side, max(1, references // side)
    total = rows * columns
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "v/.zarray": zarray([rows * 10, columns * 10], [10, 10]),
    }
    offsets = (np.arange(total, dtype="int64") * 100) % (target.stat().st_size - 100)
    write_parquet(directory / "huge.parq", metadata, "v", str(target), offsets, 100)
    return directory / "huge.parq", f"{rows // 2}.{columns // 2}"


def make_json_refs(path: Path, references: int, target: Path) -> None:
    """A JSON set of ``references`` small range references into ``target``."""
    size = target.stat().st_size
    refs: dict[str, Any] = {
        ".zgroup": '{"zarr_format": 2}',
        "v/.zarray": json.dumps(zarray([references * 100], [100])),
    }
    for i in range(references):
        refs[f"v/{i}"] = [str(target), (i * 100) % (size - 100), 100]
    path.write_text(json.dumps({"version": 1, "refs": refs}))


# ------------------------------------------------------------------------------ residency


@contextlib.contextmanager
def resident(paths: list[Path], results: dict[str, Any]) -> Iterator[None]:
    """Keep ``paths`` locked in the page cache with ``vmtouch -l`` while measuring."""
    vmtouch = shutil.which("vmtouch")
    if vmtouch is None:
        results["residency"] = "vmtouch not installed: data not pinned"
        yield
        return
    process = subprocess.Popen(
        [vmtouch, "-l", "-q", *map(str, paths)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if residency(paths) >= 0.999:
                break
            time.sleep(0.2)
        results["residency_at_start"] = residency(paths)
        yield
    finally:
        results["residency_at_end"] = residency(paths)
        stop_process(process)


def residency(paths: list[Path]) -> float:
    """Share of the pages of ``paths`` in the page cache (from ``vmtouch``)."""
    output = subprocess.run(
        ["vmtouch", *map(str, paths)], capture_output=True, text=True, check=False
    ).stdout
    for line in output.splitlines():
        if "Resident Pages" in line:
            used, _, total = line.split()[2].partition("/")
            return int(used) / max(1, int(total))
    return 0.0


# ------------------------------------------------------------------------------ mounts


@dataclass
class Mount:
    """A mount run by a child process (refmount or fsspec.fuse)."""

    process: subprocess.Popen[bytes]
    path: Path
    ready_seconds: float
    log: Path

    def rss(self) -> dict[str, float]:
        return proc_status(self.process.pid)


@contextlib.contextmanager
def mount_child(
    command: list[str], mountpoint: Path, env: dict[str, str] | None = None
) -> Iterator[Mount]:
    """Run a foreground mount command; yield once the mount answers; always unmount."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    log_path = mountpoint.parent / f"{mountpoint.name}.log"
    with open(log_path, "wb") as log_file:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    try:
        deadline = time.monotonic() + 120
        while not is_mounted(mountpoint):
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"exited with {process.returncode}: {tail}")
            if time.monotonic() > deadline:
                raise RuntimeError("did not mount within 120 s")
            time.sleep(0.002)
        os.listdir(mountpoint)  # answered by the daemon
        yield Mount(process, mountpoint, time.perf_counter() - started, log_path)
    finally:
        unmount(mountpoint)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stop_process(process, signal.SIGKILL)
        with contextlib.suppress(OSError):
            mountpoint.rmdir()


_counter = [0]


def fresh_mountpoint(workdir: Path, name: str) -> Path:
    _counter[0] += 1
    return workdir / "mnt" / f"{name}-{_counter[0]}"


@dataclass
class Target:
    """How refmount, fsspec and the raw readers reach one kind of target."""

    name: str
    protocol: str
    refs: dict[str, Path]
    refmount_options: list[str]
    remote_options: dict[str, Any]
    env: dict[str, str]
    raw_reader: RawReader
    note: str = ""

    def refmount(
        self, workdir: Path, refs: Path, *options: str
    ) -> contextlib.AbstractContextManager[Mount]:
        command = [sys.executable, "-m", "refmount", "-f", *self.refmount_options, *options]
        mountpoint = fresh_mountpoint(workdir, f"refmount-{self.name}")
        return mount_child([*command, str(refs), str(mountpoint)], mountpoint, self.env)

    def fsspec_fuse(
        self, workdir: Path, refs: Path, root: str
    ) -> contextlib.AbstractContextManager[Mount]:
        shim = fusepy_shim(workdir)
        if shim is None:
            raise RuntimeError("fusepy is not installed (Debian package python3-fusepy)")
        config = {
            "refs": str(refs),
            "protocol": self.protocol,
            "options": self.remote_options,
            "root": root,
        }
        mountpoint = fresh_mountpoint(workdir, f"fsspec-fuse-{self.name}")
        config["mountpoint"] = str(mountpoint)
        env = dict(self.env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [shim, env.get("PYTHONPATH", "")]))
        command = [sys.executable, "-c", FSSPEC_FUSE_CHILD, json.dumps(config)]
        return mount_child(command, mountpoint, env)

    def reference_fs(self, refs: Path) -> Any:
        return fsspec.filesystem(
            "reference",
            fo=str(refs),
            remote_protocol=self.protocol,
            remote_options=self.remote_options,
            skip_instance_cache=True,
        )


@contextlib.contextmanager
def floor_mount(
    workdir: Path, source: Path, tuned: bool | None = None, listed: int = 0
) -> Iterator[Mount]:
    """Mount the pyfuse3 floor serving ``source``'s 1 MiB chunks as ``big/<i>`` (and ``listed``
    4 KiB files as ``many/<i>``); with ``tuned``, apply the kernel tuning ``-o tune_kernel``
    applies (None: as refmount does by default, when the bench runs as root)."""
    mountpoint = fresh_mountpoint(workdir, "floor")
    command = [sys.executable, str(FLOOR_SCRIPT), str(source), str(MIB), str(mountpoint)]
    command += [str(listed)] if listed else []
    with mount_child(command, mountpoint) as mount:
        if tuned or (tuned is None and os.geteuid() == 0):
            kernel_tuning.tune_connection(os.stat(mountpoint).st_dev, kernel_tuning.KernelTuning())
        yield mount


def build_c_floor(workdir: Path) -> Path:
    """Compile ``scripts/fuse_floor.c`` against libfuse3 (Debian's ``libfuse3-dev``) into
    ``workdir``; raise ``RuntimeError`` saying why it cannot be built."""
    binary = workdir / "fuse_floor"
    if binary.exists():
        return binary
    try:
        flags = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "fuse3"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        subprocess.run(
            ["cc", "-O2", "-o", str(binary), str(C_FLOOR_SOURCE), *flags],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        raise RuntimeError(f"cannot build the C floor (needs cc, libfuse3-dev): {detail}") from None
    return binary


@contextlib.contextmanager
def c_floor_mount(
    workdir: Path, source: Path, threads: str, tuned: bool | None = None
) -> Iterator[Mount]:
    """Mount the C floor (``single``: one thread, as pyfuse3 answers; ``multi``: libfuse's
    pool) serving ``source``'s 1 MiB chunks as ``big/<i>``; with ``tuned``, the kernel
    tuning refmount applies as root (None: when the bench runs as root, as refmount does)."""
    binary = build_c_floor(workdir)
    mountpoint = fresh_mountpoint(workdir, f"cfloor-{threads}")
    command = [str(binary), str(source), str(MIB), str(mountpoint), threads]
    with mount_child(command, mountpoint) as mount:
        if tuned or (tuned is None and os.geteuid() == 0):
            kernel_tuning.tune_connection(os.stat(mountpoint).st_dev, kernel_tuning.KernelTuning())
        yield mount


FSSPEC_FUSE_CHILD = """
import json, sys
import fsspec, fsspec.fuse
config = json.loads(sys.argv[1])
fs = fsspec.filesystem("reference", fo=config["refs"], remote_protocol=config["protocol"],
                       remote_options=config["options"])
fsspec.fuse.run(fs, config["root"], config["mountpoint"], foreground=True, threads=True)
"""

CHILD_RSS = """
import json, sys
import fsspec
fs = fsspec.filesystem("reference", fo=sys.argv[1], remote_protocol="file")
assert len(fs.cat(sys.argv[2])) > 0
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({k: int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}))
"""


def fusepy_shim(workdir: Path) -> str | None:
    """A directory that makes ``import fuse`` find fusepy; None when there is none."""
    if importlib.util.find_spec("fuse") is not None:
        return ""
    if not FUSEPY_DEBIAN.exists():
        return None
    shim = workdir / "fusepy-shim"
    shim.mkdir(exist_ok=True)
    link = shim / "fuse.py"
    if not link.exists():
        link.symlink_to(FUSEPY_DEBIAN)
    return str(shim)


# ------------------------------------------------------------------------------ raw readers


class RawReader:
    """Reads byte ranges of the target straight from it, as fast as it can."""

    concurrency = 16

    def read_ranges(self, which: str, ranges: Sequence[tuple[int, int]]) -> int:
        raise NotImplementedError

    def first_byte(self, which: str, offset: int) -> float:
        started = time.perf_counter()
        self.read_ranges(which, [(offset, 1)])
        return time.perf_counter() - started

    def close(self) -> None:
        pass


class LocalRaw(RawReader):
    def __init__(self, files: dict[str, Path]) -> None:
        self.fds = {which: os.open(path, os.O_RDONLY) for which, path in files.items()}

    def read_ranges(self, which: str, ranges: Sequence[tuple[int, int]]) -> int:
        fd = self.fds[which]
        return sum(len(os.pread(fd, size, offset)) for offset, size in ranges)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


class HttpRaw(RawReader):
    """Concurrent ranged GETs with aiohttp on one event loop in a thread."""

    def __init__(self, urls: dict[str, str]) -> None:
        import aiohttp

        self.urls = urls
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def session() -> aiohttp.ClientSession:
            connector = aiohttp.TCPConnector(limit=self.concurrency)
            return aiohttp.ClientSession(connector=connector)

        self.session = asyncio.run_coroutine_threadsafe(session(), self.loop).result()

    async def _get(self, url: str, offset: int, size: int, gate: asyncio.Semaphore) -> int:
        async with gate:
            headers = {"Range": f"bytes={offset}-{offset + size - 1}"}
            async with self.session.get(url, headers=headers) as response:
                response.raise_for_status()
                return len(await response.read())

    async def _all(self, url: str, ranges: Sequence[tuple[int, int]]) -> int:
        gate = asyncio.Semaphore(self.concurrency)
        done = await asyncio.gather(*(self._get(url, o, s, gate) for o, s in ranges))
        return sum(done)

    def read_ranges(self, which: str, ranges: Sequence[tuple[int, int]]) -> int:
        return asyncio.run_coroutine_threadsafe(
            self._all(self.urls[which], ranges), self.loop
        ).result()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.session.close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


class S3Raw(RawReader):
    """Concurrent ranged GETs through s3fs ``cat_ranges``."""

    def __init__(self, urls: dict[str, str], options: dict[str, Any]) -> None:
        self.urls = urls
        self.fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)

    def read_ranges(self, which: str, ranges: Sequence[tuple[int, int]]) -> int:
        url = self.urls[which]
        blocks = self.fs.cat_ranges(
            [url] * len(ranges),
            [o for o, _ in ranges],
            [o + s for o, s in ranges],
            batch_size=self.concurrency,
        )
        return sum(len(b) for b in blocks)


# ------------------------------------------------------------------------------ servers


@contextlib.contextmanager
def nginx(root: Path, workdir: Path) -> Iterator[str]:
    """Debian's nginx serving ``root`` on 127.0.0.1; yield its base URL."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(binary):
        raise RuntimeError("nginx is not installed (Debian package nginx-light)")
    tmp = workdir / "nginx"
    tmp.mkdir(exist_ok=True)
    port = free_port()
    config = (
        NGINX_TEMPLATE.read_text()
        .replace("@PORT@", str(port))
        .replace("@ROOT@", str(root))
        .replace("@TMP@", str(tmp))
    )
    (tmp / "nginx.conf").write_text(config)
    process = subprocess.Popen(
        [binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "error.log")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, tmp / "error.log")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process, signal.SIGQUIT)


def wait_for_port(port: int, process: subprocess.Popen[bytes], log_path: Path) -> None:
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


@contextlib.contextmanager
def s3_server(workdir: Path, results: dict[str, Any]) -> Iterator[tuple[str, str, Path | None]]:
    """s3rver (streams ranges) on 127.0.0.1, or moto when s3rver is not installed.

    Yield the endpoint URL, the server's name and the directory where it stores objects.
    """
    node = shutil.which("node")
    if S3RVER.exists() and node:
        directory = workdir / "s3rver"
        directory.mkdir(exist_ok=True)
        port = free_port()
        log_path = workdir / "s3rver.log"
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                [
                    node,
                    str(S3RVER),
                    "-d",
                    str(directory),
                    "-a",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "--silent",
                    "--configure-bucket",
                    "bench",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for_port(port, process, log_path)
            yield f"http://127.0.0.1:{port}", "s3rver", directory
        finally:
            stop_process(process)
        return
    results["s3_server_note"] = (
        "s3rver not installed (npm ci --prefix bench/node): fell back to moto, which reads the"
        " whole object for every ranged GET, so the S3 rows measure moto"
    )
    log(results["s3_server_note"])
    with moto_s3() as endpoint:
        create_bucket(endpoint, "bench")
        yield endpoint, "moto", None


# ------------------------------------------------------------------------------ read figures


def key_index(key: str) -> int:
    return int(key.rsplit("/", 1)[1])


def verify(
    data: DataSet, which: str, read: Callable[[int], bytes], sample: int = 8
) -> dict[str, int]:
    """Compare ``sample`` chunks read by a tool with the source bytes."""
    count = data.big_chunks if which == "big" else data.many_chunks
    indices = sorted(random.Random(7).sample(range(count), min(sample, count)))
    bad = sum(read(i) != data.expected(which, i) for i in indices)
    return {"verified": len(indices), "mismatches": bad}


def random_reads(data: DataSet, count: int) -> list[tuple[int, int]]:
    """``count`` distinct random (chunk, 4 KiB-aligned offset) pairs in the big set."""
    rng = random.Random(11)
    pages = data.big_chunks * (MIB // (4 * KIB))
    picks = rng.sample(range(pages), min(count, pages))
    return [(p // 256, (p % 256) * 4 * KIB) for p in picks]


def measure_target(
    target: Target, data: DataSet, workdir: Path, budget: float, tools: set[str]
) -> dict[str, Any]:
    """Every read figure of one target, for each tool."""
    out: dict[str, Any] = {}
    big_keys = [f"big/{i}" for i in range(data.big_chunks)]
    many_keys = [f"many/{i}" for i in range(data.many_chunks)]
    picks = random_reads(data, 2000)
    cold = [data.big_chunks - 1 - i for i in range(min(16, data.big_chunks))]

    def record(figure: str, tool: str, value: Any) -> None:
        out.setdefault(figure, {})[tool] = value

    def attempt(tool: str, figure: str, function: Callable[[], None]) -> None:
        if tool not in tools:
            return
        try:
            function()
        except Exception as error:
            log(f"{target.name} {tool} {figure}: {error!r}")
            record(figure, tool, {"error": f"{type(error).__name__}: {error}"[:300]})

    def first_byte_then_read_twice(mount: Mount, tool: str) -> None:
        """The first byte of cold chunks, every chunk read in order (and the daemon's CPU for
        it), then read again."""
        ttfb = [first_byte(mount.path / "big" / str(i)) for i in cold]
        record("ttfb_ms", tool, 1000 * statistics.median(ttfb))
        paths = [mount.path / k for k in big_keys]
        cpu = process_cpu_seconds(mount.process.pid)
        run = bounded(paths, read_whole, budget)
        record("seq_1mib_1_reader_mib_s", tool, run.mib_s())
        cpu = process_cpu_seconds(mount.process.pid) - cpu
        record("seq_cpu_ms_per_mib", tool, 1000 * cpu * MIB / max(1, run.nbytes))
        reread = bounded(paths[: run.count], read_whole, budget)
        record("reread_page_cache_mib_s", tool, reread.mib_s())

    # ---- refmount
    def refmount_big() -> None:
        peak = 0.0
        with target.refmount(workdir, target.refs["big"]) as mount:
            record("ready_s", "refmount", mount.ready_seconds)
            first_byte_then_read_twice(mount, "refmount")
            out.setdefault("verify", {})["refmount"] = verify(
                data, "big", lambda i: (mount.path / "big" / str(i)).read_bytes()
            )
            peak = max(peak, mount.rss().get("VmHWM", 0))
        with target.refmount(workdir, target.refs["big"]) as mount:
            paths = [mount.path / k for k in big_keys]
            run = bounded_parallel(paths, read_whole, budget, 8)
            record("seq_1mib_8_readers_mib_s", "refmount", run.mib_s())
            peak = max(peak, mount.rss().get("VmHWM", 0))
        with target.refmount(workdir, target.refs["big"]) as mount:
            fds = {i: os.open(mount.path / "big" / str(i), os.O_RDONLY) for i, _ in picks}
            try:
                run = bounded(picks, lambda p: len(os.pread(fds[p[0]], 4 * KIB, p[1])), budget)
            finally:
                for fd in fds.values():
                    os.close(fd)
            record("random_4kib_ms", "refmount", 1000 * run.seconds / max(1, run.count))
            peak = max(peak, mount.rss().get("VmHWM", 0))
        for refs, figure in ((target.refs["many"], "json"), (target.refs["many_parq"], "parquet")):
            with target.refmount(workdir, refs) as mount:
                record(f"ready_many_{figure}_s", "refmount", mount.ready_seconds)
                paths = [mount.path / k for k in many_keys]
                run = bounded(paths, read_whole, budget)
                record(f"many_4kib_{figure}_files_s", "refmount", run.per_second())
                peak = max(peak, mount.rss().get("VmHWM", 0))
        record("daemon_peak_rss_mib", "refmount", peak)

    attempt("refmount", "big", refmount_big)

    def refmount_tuned() -> None:
        with target.refmount(workdir, target.refs["big"], "-o", "tune_kernel") as mount:
            paths = [mount.path / k for k in big_keys]
            run = bounded(paths, read_whole, budget)
            tuning = [
                line
                for line in mount.log.read_text(errors="replace").splitlines()
                if "kernel tuning for" in line or "cannot tune the kernel" in line
            ]
            if not tuning or "cannot tune" in tuning[0]:
                raise RuntimeError(f"the kernel was not tuned: {(tuning or ['no log line'])[0]}")
            record("seq_1mib_1_reader_tuned_mib_s", "refmount", run.mib_s())

    attempt("refmount", "seq_1mib_1_reader_tuned_mib_s", refmount_tuned)

    # ---- fsspec cat, in process, one key at a time
    def cat() -> None:
        started = time.perf_counter()
        fs = target.reference_fs(target.refs["big"])
        fs.cat(big_keys[0])
        record("ready_s", "cat", time.perf_counter() - started)
        ttfb = []
        for i in cold:
            begun = time.perf_counter()
            fs.cat_file(f"big/{i}", 0, 1)
            ttfb.append(time.perf_counter() - begun)
        record("ttfb_ms", "cat", 1000 * statistics.median(ttfb))
        cpu = time.process_time()
        run = bounded(big_keys, lambda k: len(fs.cat(k)), budget)
        record("seq_1mib_1_reader_mib_s", "cat", run.mib_s())
        cpu = time.process_time() - cpu
        record("seq_cpu_ms_per_mib", "cat", 1000 * cpu * MIB / max(1, run.nbytes))
        out.setdefault("verify", {})["cat"] = verify(data, "big", lambda i: fs.cat(f"big/{i}"))
        run = bounded(
            picks, lambda p: len(fs.cat_file(f"big/{p[0]}", p[1], p[1] + 4 * KIB)), budget
        )
        record("random_4kib_ms", "cat", 1000 * run.seconds / max(1, run.count))
        for refs, figure in ((target.refs["many"], "json"), (target.refs["many_parq"], "parquet")):
            started = time.perf_counter()
            many_fs = target.reference_fs(refs)
            many_fs.cat(many_keys[0])
            record(f"ready_many_{figure}_s", "cat", time.perf_counter() - started)
            run = bounded(many_keys, lambda k, f=many_fs: len(f.cat(k)), budget)
            record(f"many_4kib_{figure}_files_s", "cat", run.per_second())

    attempt("cat", "cat", cat)

    # ---- the pyfuse3 floor: the same chunks from memory, through the least pyfuse3 can do
    def floor() -> None:
        with floor_mount(workdir, data.big_file) as mount:
            first_byte_then_read_twice(mount, "floor")
        with floor_mount(workdir, data.big_file) as mount:
            paths = [mount.path / k for k in big_keys]
            run = bounded_parallel(paths, read_whole, budget, 8)
            record("seq_1mib_8_readers_mib_s", "floor", run.mib_s())
        with floor_mount(workdir, data.big_file, tuned=True) as mount:
            paths = [mount.path / k for k in big_keys]
            run = bounded(paths, read_whole, budget)
            record("seq_1mib_1_reader_tuned_mib_s", "floor", run.mib_s())
        if target.name == "local":  # what a 4 KiB file costs pyfuse3 alone: lookup to release
            with floor_mount(workdir, data.big_file, listed=data.many_chunks) as mount:
                run = bounded([mount.path / k for k in many_keys], read_whole, budget)
                for figure in ("json", "parquet"):
                    record(f"many_4kib_{figure}_files_s", "floor", run.per_second())

    attempt("floor", "floor", floor)

    # ---- the C floor: the same chunks from memory through a minimal libfuse3 daemon
    def c_floor(tool: str, threads: str) -> Callable[[], None]:
        def measure() -> None:
            with c_floor_mount(workdir, data.big_file, threads) as mount:
                first_byte_then_read_twice(mount, tool)
            with c_floor_mount(workdir, data.big_file, threads) as mount:
                paths = [mount.path / k for k in big_keys]
                run = bounded_parallel(paths, read_whole, budget, 8)
                record("seq_1mib_8_readers_mib_s", tool, run.mib_s())
            with c_floor_mount(workdir, data.big_file, threads, tuned=True) as mount:
                paths = [mount.path / k for k in big_keys]
                run = bounded(paths, read_whole, budget)
                record("seq_1mib_1_reader_tuned_mib_s", tool, run.mib_s())

        return measure

    attempt("cfloor", "cfloor", c_floor("cfloor", "single"))
    attempt("cfloor_mt", "cfloor_mt", c_floor("cfloor_mt", "multi"))

    # ---- fsspec.fuse (mounted at big/ and many/: it cannot mount a reference set's root)
    def fuse_big() -> None:
        with target.fsspec_fuse(workdir, target.refs["big"], "big/") as mount:
            record("ready_s", "fuse", mount.ready_seconds)
            ttfb = [first_byte(mount.path / str(i)) for i in cold]
            record("ttfb_ms", "fuse", 1000 * statistics.median(ttfb))
            paths = [mount.path / k.split("/")[1] for k in big_keys]
            run = bounded(paths, read_whole, budget)
            record("seq_1mib_1_reader_mib_s", "fuse", run.mib_s())
            reread = bounded(paths[: run.count], read_whole, budget)
            record("reread_page_cache_mib_s", "fuse", reread.mib_s())
            out.setdefault("verify", {})["fuse"] = verify(
                data, "big", lambda i: (mount.path / str(i)).read_bytes()
            )
        with target.fsspec_fuse(workdir, target.refs["big"], "big/") as mount:
            paths = [mount.path / k.split("/")[1] for k in big_keys]
            run = bounded_parallel(paths, read_whole, budget, 8)
            record("seq_1mib_8_readers_mib_s", "fuse", run.mib_s())
        with target.fsspec_fuse(workdir, target.refs["big"], "big/") as mount:
            fds = {i: os.open(mount.path / str(i), os.O_RDONLY) for i, _ in picks[:200]}
            try:
                run = bounded(
                    picks[:200], lambda p: len(os.pread(fds[p[0]], 4 * KIB, p[1])), budget
                )
            finally:
                for fd in fds.values():
                    os.close(fd)
            record("random_4kib_ms", "fuse", 1000 * run.seconds / max(1, run.count))

    def fuse_many() -> None:
        with target.fsspec_fuse(workdir, target.refs["many"], "many/") as mount:
            record("ready_many_json_s", "fuse", mount.ready_seconds)
            paths = [mount.path / k.split("/")[1] for k in many_keys]
            run = bounded(paths, read_whole, budget)
            record("many_4kib_json_files_s", "fuse", run.per_second())

    attempt("fuse", "big", fuse_big)
    attempt("fuse", "many_4kib_json_files_s", fuse_many)

    # ---- raw: the same ranges straight from the target, concurrently where it helps
    def raw() -> None:
        reader = target.raw_reader
        ttfb = [reader.first_byte("big", i * MIB) for i in cold]
        record("ttfb_ms", "raw", 1000 * statistics.median(ttfb))
        for figure, ranges, unit in (
            ("seq_1mib_1_reader_mib_s", data.big_ranges(), "mib"),
            ("many_4kib_json_files_s", data.many_ranges(), "files"),
            ("random_4kib_ms", [(c * MIB + o, 4 * KIB) for c, o in picks], "ms"),
        ):
            which = "many" if figure.startswith("many") else "big"
            batches = [ranges[i : i + 256] for i in range(0, len(ranges), 256)]
            run = bounded(batches, lambda b, w=which: reader.read_ranges(w, b), budget)
            done = sum(len(b) for b in batches[: run.count])
            if unit == "mib":
                record(figure, "raw", run.mib_s())
                record("seq_1mib_8_readers_mib_s", "raw", run.mib_s())
            elif unit == "files":
                record(figure, "raw", done / run.seconds)
                record("many_4kib_parquet_files_s", "raw", done / run.seconds)
            else:
                record(figure, "raw", 1000 * run.seconds / max(1, done))

    attempt("raw", "raw", raw)
    out["raw_note"] = (
        "os.pread, one thread"
        if target.name == "local"
        else f"{RawReader.concurrency} concurrent ranged GETs"
    )
    return out


# ------------------------------------------------------------------------------ sections


def local_target(data: DataSet) -> Target:
    refs = data.write_refs("refs-local", str(data.big_file), str(data.many_file))
    raw = LocalRaw({"big": data.big_file, "many": data.many_file})
    return Target("local", "file", refs, [], {}, dict(os.environ), raw)


def measure_resident(
    target: Target,
    pinned: list[Path],
    data: DataSet,
    workdir: Path,
    args: argparse.Namespace,
    result: dict[str, Any],
) -> None:
    """Measure ``target`` into ``result`` with ``pinned`` kept in the page cache, recording
    the residency and the CPU busy share of the section."""
    with resident(pinned, result):
        meter = CpuMeter()
        rounds = []
        for number in range(args.rounds):
            if args.rounds > 1:
                log(f"{target.name}: round {number + 1} of {args.rounds}")
            rounds.append(measure_target(target, data, workdir, args.budget, args.tools))
        result.update(median_of_rounds(rounds))
        if len(rounds) > 1:
            result["rounds"] = rounds
        result["cpu"] = meter.result()


def median_of_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge the figures of several rounds of ``measure_target``: each tool's median of the
    rounds that measured it, the sum of verification counts, the first of anything else
    (an error stays only when no round measured the figure)."""
    merged: dict[str, Any] = {}
    for figure in {f: None for r in rounds for f in r}:
        first = next(r[figure] for r in rounds if figure in r)
        if not isinstance(first, dict):
            merged[figure] = first
            continue
        tools: dict[str, Any] = {}
        for tool in {t: None for r in rounds for t in r.get(figure, {})}:
            values = [r[figure][tool] for r in rounds if tool in r.get(figure, {})]
            numbers = [v for v in values if isinstance(v, (int, float))]
            counts = [v for v in values if isinstance(v, dict) and "verified" in v]
            if numbers:
                tools[tool] = statistics.median(numbers)
            elif counts:
                tools[tool] = {k: sum(c.get(k, 0) for c in counts) for k in counts[0]}
            else:
                tools[tool] = values[0]
        merged[figure] = tools
    return merged


def run_local(data: DataSet, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    target = local_target(data)
    result: dict[str, Any] = {}
    try:
        measure_resident(target, [data.big_file, data.many_file], data, workdir, args, result)
    finally:
        target.raw_reader.close()
    return result


def run_http(data: DataSet, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"server": "nginx"}
    os.chmod(workdir, 0o755)  # nginx's workers may run as another user
    for path in (data.directory / "data", data.big_file, data.many_file):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    with nginx(data.directory / "data", workdir) as base:
        urls = {"big": f"{base}/big.bin", "many": f"{base}/many.bin"}
        refs = data.write_refs("refs-http", urls["big"], urls["many"])
        raw = HttpRaw(urls)
        target = Target("http", "http", refs, [], {}, dict(os.environ), raw)
        try:
            measure_resident(target, [data.big_file, data.many_file], data, workdir, args, result)
        finally:
            raw.close()
    return result


def s3_environment(key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in AWS_VARIABLES_TO_CLEAR}
    env.update(DUMMY_AWS_ENVIRONMENT)
    env["AWS_ACCESS_KEY_ID"] = env["AWS_SECRET_ACCESS_KEY"] = key
    return env


def run_s3(data: DataSet, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with s3_server(workdir, result) as (endpoint, server, directory):
        result["server"] = server
        key = S3RVER_KEY if server == "s3rver" else DUMMY_AWS_ENVIRONMENT["AWS_ACCESS_KEY_ID"]
        env = s3_environment(key)
        secret = env["AWS_SECRET_ACCESS_KEY"]
        options = {"endpoint_url": endpoint, "key": key, "secret": secret}
        fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)
        started = time.perf_counter()
        for path in (data.big_file, data.many_file):
            fs.put_file(str(path), f"bench/{path.name}")
        result["upload_s"] = time.perf_counter() - started
        urls = {"big": "s3://bench/big.bin", "many": "s3://bench/many.bin"}
        refs = data.write_refs("refs-s3", urls["big"], urls["many"])
        raw = S3Raw(urls, options)
        target = Target(
            "s3",
            "s3",
            refs,
            ["-o", f"s3_endpoint_url={endpoint}"],
            options,
            env,
            raw,
        )
        pinned = [data.big_file, data.many_file]
        if directory is not None:
            pinned = [p for p in directory.rglob("*") if p.is_file() and ".bin" in p.name]
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # the in-process fsspec and s3fs see the dummy credentials
        try:
            measure_resident(target, pinned, data, workdir, args, result)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return result


def timed_command(command: list[str], timeout: float) -> float | str:
    """Seconds ``command`` took (output discarded), or why it did not finish."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_process(process, signal.SIGKILL)
        return f"did not finish in {timeout:.0f} s"
    if process.returncode != 0:
        return f"exited with {process.returncode}"
    return time.perf_counter() - started


def streamed_listing(directory: Path, timeout: float) -> dict[str, Any]:
    """Run ``ls -f``: when its first name came (as ``ls -f | head -1``), how many in time."""
    started = time.perf_counter()
    process = subprocess.Popen(
        ["ls", "-f", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    first: list[float] = []
    count = [0]

    def reader() -> None:
        assert process.stdout is not None
        for _ in process.stdout:
            if not first:
                first.append(time.perf_counter() - started)
            count[0] += 1

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(timeout)
    finished = not thread.is_alive()
    stop_process(process, signal.SIGKILL)
    thread.join()
    if process.stdout is not None:
        process.stdout.close()
    seconds = time.perf_counter() - started
    return {
        "first_entry_s": first[0] if first else f"no entry within {timeout:.0f} s",
        "all_s": seconds if finished else f"did not finish in {timeout:.0f} s",
        "entries_listed": count[0],
        "entries_per_s": count[0] / seconds,
    }


def sample_rss(pid: int, stop: threading.Event, peak: list[float]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], proc_status(pid).get("VmRSS", 0.0))
        stop.wait(0.05)


def run_listing(data: DataSet, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``ls -l`` of the 'many' directory: refmount (JSON, Parquet), floor, fsspec.fuse, tmpfs."""
    target = local_target(data)
    target.raw_reader.close()
    result: dict[str, Any] = {"entries": data.many_chunks}
    listing: dict[str, Any] = {}
    timeout = args.ls_timeout
    if "refmount" in args.tools:
        for name, refs in (("refmount", target.refs["many"]), ("refmount_parquet", None)):
            refs = refs or target.refs["many_parq"]
            try:
                with target.refmount(workdir, refs) as mount:
                    directory = str(mount.path / "many")
                    cold = timed_command(["ls", "-l", directory], timeout)
                    warm = timed_command(["ls", "-l", directory], timeout)
                    listing[name] = {"cold_s": cold, "warm_s": warm}
            except Exception as error:
                listing[name] = {"error": repr(error)[:300]}
    if "floor" in args.tools:
        try:
            with floor_mount(workdir, data.big_file, listed=data.many_chunks) as mount:
                directory = str(mount.path / "many")
                cold = timed_command(["ls", "-l", directory], timeout)
                warm = timed_command(["ls", "-l", directory], timeout)
                listing["floor"] = {"cold_s": cold, "warm_s": warm}
        except Exception as error:
            listing["floor"] = {"error": repr(error)[:300]}
    if "fuse" in args.tools:
        try:
            with target.fsspec_fuse(workdir, target.refs["many"], "many/") as mount:
                listing["fuse"] = {"cold_s": timed_command(["ls", "-l", str(mount.path)], timeout)}
        except Exception as error:
            listing["fuse"] = {"error": repr(error)[:300]}
    shm = Path(tempfile.mkdtemp(prefix="refmount-bench-", dir="/dev/shm"))
    try:
        for i in range(data.many_chunks):
            (shm / str(i)).touch()
        timed_command(["ls", "-l", str(shm)], timeout)  # same warm-up as the mounts
        listing["tmpfs"] = {"cold_s": timed_command(["ls", "-l", str(shm)], timeout)}
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    result["ls_l"] = listing
    return result


def run_huge(data: DataSet, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    references = max(100, int(5_000_000 * args.scale))
    log(f"huge: writing {references} Parquet references")
    root, key = make_huge(workdir / "huge", references, data.big_file)
    result: dict[str, Any] = {"references": references}
    target = local_target(data)
    target.raw_reader.close()
    timeout = args.ls_timeout
    with target.refmount(workdir, root) as mount:
        pid = mount.process.pid
        result["ready_s"] = mount.ready_seconds
        result["rss_after_mount_mib"] = mount.rss().get("VmRSS")
        started = time.perf_counter()
        chunk = (mount.path / "v" / key).read_bytes()
        result["chunk_read_s"] = time.perf_counter() - started
        result["chunk_ok"] = len(chunk) == 100
        result["rss_after_chunk_mib"] = mount.rss().get("VmRSS")
        stop, peak = threading.Event(), [0.0]
        sampler = threading.Thread(target=sample_rss, args=(pid, stop, peak))
        sampler.start()
        try:
            streamed = streamed_listing(mount.path / "v", timeout)
            result["ls_f_first_entry_s"] = streamed["first_entry_s"]
            result["ls_f_s"] = streamed["all_s"]
            result["ls_f_entries_listed"] = streamed["entries_listed"]
            result["ls_f_entries_per_s"] = streamed["entries_per_s"]
            result["ls_l_s"] = timed_command(["ls", "-l", str(mount.path / "v")], timeout)
        finally:
            stop.set()
            sampler.join()
        result["rss_peak_during_listing_mib"] = peak[0]
        result["daemon_peak_rss_mib"] = mount.rss().get("VmHWM")
    started = time.perf_counter()
    fs = target.reference_fs(root)
    fs.cat(f"v/{key}")
    result["fsspec_open_and_cat_s"] = time.perf_counter() - started
    return result


DECODE_ROWS = 256
"""A decoded chunk of the decode section: 256 x 1024 float32 values, 1 MiB."""

DECODE_READERS = (1, 8)

ZARR_READ = """
import json, resource, sys, time
import zarr
refs = sys.argv[1]
begun = time.perf_counter()
before = resource.getrusage(resource.RUSAGE_SELF)
store = zarr.storage.FsspecStore.from_url(
    "reference://", storage_options={"fo": refs}, read_only=True
)
values = zarr.open_array(store=store, path="v", mode="r", zarr_format=2)[...]
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
print(json.dumps({"seconds": time.perf_counter() - begun, "cpu_s": cpu, "bytes": values.nbytes}))
"""
"""zarr-python 3 reading the whole array in one process through fsspec's references."""


def make_decode_set(directory: Path, chunks: int) -> Path:
    """Write ``chunks`` zlib-compressed 1 MiB float32 chunks to one file and JSON references
    to them as array ``v`` (values in half steps around 280: zlib shrinks them about 3x)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "decode.bin"
    meta = {
        "zarr_format": 2,
        "shape": [DECODE_ROWS * chunks, 1024],
        "chunks": [DECODE_ROWS, 1024],
        "dtype": "<f4",
        "compressor": {"id": "zlib", "level": 1},
        "filters": None,
        "order": "C",
        "fill_value": None,
    }
    refs: dict[str, Any] = {".zgroup": '{"zarr_format": 2}', "v/.zarray": json.dumps(meta)}
    rng = np.random.default_rng(19)
    offset = 0
    with open(target, "wb") as out:
        for index in range(chunks):
            values = np.round(rng.normal(280, 5, DECODE_ROWS * 1024) * 2) / 2
            stored = zlib.compress(values.astype("<f4").tobytes(), 1)
            out.write(stored)
            refs[f"v/{index}.0"] = [str(target), offset, len(stored)]
            offset += len(stored)
    path = directory / "decode.json"
    path.write_text(json.dumps({"version": 1, "refs": refs}))
    return path


def cat_all(files: list[Path], readers: int) -> None:
    """Read ``files`` with GNU cat: ``readers`` cat processes at once, each an equal run of
    consecutive files, in order."""
    size = -(-len(files) // readers)
    shares = [files[start : start + size] for start in range(0, len(files), size)]
    processes = [
        subprocess.Popen(["cat", *map(str, share)], stdout=subprocess.DEVNULL)
        for share in shares
        if share
    ]
    for process in processes:
        if process.wait() != 0:
            raise RuntimeError(f"cat failed with {process.returncode}")


def run_gen_cost(data: DataSet, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Memory and time per ``gen`` key: ``scripts/gen_cost.py`` at 10^7 keys (scaled), in a
    fresh process, by plain substitution and with jinja (10^6 keys: jinja takes a minute a
    million)."""
    keys = max(1000, int(10_000_000 * args.scale) // 1000 * 1000)
    script = Path(__file__).resolve().parent / "gen_cost.py"
    result: dict[str, Any] = {}
    for mode, count, extra in (("substitution", keys, []), ("jinja", keys // 10, ["--jinja"])):
        output = subprocess.run(
            [sys.executable, str(script), str(max(1000, count)), "--json", *extra],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        result[mode] = json.loads(output)
    return result


def run_decode(data: DataSet, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Decoded MiB/s of a --decode mount read cold by cat (1 and 8 readers) against in-process
    zarr-python reading the same references, with CPU per MiB of each party."""
    chunks = max(8, int(256 * args.scale))
    refs = make_decode_set(workdir / "decode", chunks)
    result: dict[str, Any] = {"chunks": chunks, "decoded_mib": chunks}
    for readers in DECODE_READERS:
        mountpoint = fresh_mountpoint(workdir, f"decode-{readers}")
        command = [sys.executable, "-m", "refmount", "-f", "--decode", str(refs), str(mountpoint)]
        with mount_child(command, mountpoint) as mount:
            chunk_files = (p for p in (mountpoint / "v").iterdir() if p.name[0].isdigit())
            files = sorted(chunk_files, key=lambda p: int(p.name.split(".")[0]))
            daemon_before = process_cpu_seconds(mount.process.pid)
            children_before = os.times()
            begun = time.perf_counter()
            cat_all(files, readers)
            seconds = time.perf_counter() - begun
            children_after = os.times()
            daemon_cpu = process_cpu_seconds(mount.process.pid) - daemon_before
        cat_cpu = (children_after.children_user + children_after.children_system) - (
            children_before.children_user + children_before.children_system
        )
        result[f"cat{readers}_mib_s"] = chunks / seconds
        result[f"cat{readers}_cpu_ms_per_mib"] = 1000 * (daemon_cpu + cat_cpu) / chunks
        result[f"cat{readers}_daemon_cpu_ms_per_mib"] = 1000 * daemon_cpu / chunks
    zarr_run = subprocess.run(
        [sys.executable, "-c", ZARR_READ, str(refs)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    zarr_figures = json.loads(zarr_run.stdout.strip().splitlines()[-1])
    if zarr_figures["bytes"] != chunks * MIB:
        raise RuntimeError(f"zarr-python read {zarr_figures['bytes']} bytes, not {chunks} MiB")
    result["zarr_mib_s"] = chunks / zarr_figures["seconds"]
    result["zarr_cpu_ms_per_mib"] = 1000 * zarr_figures["cpu_s"] / chunks
    for readers in DECODE_READERS:
        result[f"cat{readers}_vs_zarr"] = result[f"cat{readers}_mib_s"] / result["zarr_mib_s"]
    return result


def run_json_rss(data: DataSet, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """RSS with a JSON set of 1 M references: refmount's daemon and fsspec, each alone."""
    references = max(100, int(1_000_000 * args.scale))
    path = workdir / "json-1m.json"
    make_json_refs(path, references, data.many_file)
    result: dict[str, Any] = {"references": references, "json_mib": path.stat().st_size / MIB}
    target = local_target(data)
    target.raw_reader.close()
    with target.refmount(workdir, path) as mount:
        result["refmount_ready_s"] = mount.ready_seconds
        (mount.path / "v" / "0").read_bytes()
        result["refmount_vmhwm_mib"] = mount.rss().get("VmHWM")
    started = time.perf_counter()
    output = subprocess.run(
        [sys.executable, "-c", CHILD_RSS, str(path), "v/0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result["fsspec_open_and_cat_s"] = time.perf_counter() - started
    result["fsspec_vmhwm_mib"] = json.loads(output)["VmHWM"]
    return result


# ------------------------------------------------------------------------------ report


@dataclass
class Row:
    """One line of the table: a figure, its values per tool and the goal."""

    figure: str
    unit: str
    values: dict[str, Any]
    higher_is_better: bool
    goal: str = ""
    check: Callable[[dict[str, float | None]], bool | None] | None = None
    ratios: dict[str, float | None] = field(default_factory=dict)
    met: bool | None = None
    floor_met: bool | None = None
    """The goal applied to the pyfuse3 floor's figure: False means no pyfuse3 daemon meets it
    on this machine (the floor does less work per read than any can)."""

    def ratios_of(self, tool: str) -> dict[str, float | None]:
        """How many times better ``tool`` is than each baseline (None where unknown)."""
        mine = number(self.values.get(tool))
        ratios: dict[str, float | None] = {}
        for baseline in BASELINES:
            other = number(self.values.get(baseline))
            if mine is None or other is None or mine == 0 or other == 0:
                ratios[baseline] = None
            else:
                ratios[baseline] = mine / other if self.higher_is_better else other / mine
        return ratios

    def compute(self) -> None:
        self.ratios = self.ratios_of("refmount")
        if self.check is not None:
            self.met = self.check({**self.ratios, "refmount": number(self.values.get("refmount"))})
            floor = number(self.values.get("floor"))
            if floor is not None:
                self.floor_met = self.check({**self.ratios_of("floor"), "refmount": floor})


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def at_least(tool: str, factor: float) -> Callable[[dict[str, float | None]], bool | None]:
    def check(ratios: dict[str, float | None]) -> bool | None:
        value = ratios.get(tool)
        return None if value is None else value >= factor

    return check


def all_of(
    *checks: Callable[[dict[str, float | None]], bool | None],
) -> Callable[[dict[str, float | None]], bool | None]:
    def check(ratios: dict[str, float | None]) -> bool | None:
        results = [c(ratios) for c in checks]
        if any(r is False for r in results):
            return False
        return None if any(r is None for r in results) else True

    return check


def absolute(
    predicate: Callable[[float], bool],
) -> Callable[[dict[str, float | None]], bool | None]:
    def check(ratios: dict[str, float | None]) -> bool | None:
        value = ratios.get("refmount")
        return None if value is None else predicate(value)

    return check


def build_rows(figures: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    fuse3 = at_least("fuse", 3.0)
    for name in ("local", "http", "s3"):
        section = figures.get(name)
        if not isinstance(section, dict) or "error" in section:
            continue
        remote = name != "local"

        def values(figure: str, section: dict[str, Any] = section) -> dict[str, Any]:
            got = section.get(figure, {})
            return {
                tool: (v.get("error", "error") if isinstance(v, dict) else v)
                for tool, v in got.items()
            }

        seq_goal = 1.0 if remote else 0.7
        rows.append(Row(f"{name}: ready (big JSON)", "s", values("ready_s"), False))
        rows.append(
            Row(
                f"{name}: seq 1 MiB, 1 reader",
                "MiB/s",
                values("seq_1mib_1_reader_mib_s"),
                True,
                f"vs cat ≥ {seq_goal}x, vs fuse ≥ 3x",
                all_of(at_least("cat", seq_goal), fuse3),
            )
        )
        tuned = values("seq_1mib_1_reader_mib_s")
        for tool in ("refmount", "floor", "cfloor", "cfloor_mt"):
            tuned[tool] = values("seq_1mib_1_reader_tuned_mib_s").get(tool)
        rows.append(
            Row(
                f"{name}: seq 1 MiB, 1 reader, -o tune_kernel",
                "MiB/s",
                tuned,
                True,
                "" if remote else "vs cat ≥ 1.0x",
                None if remote else at_least("cat", 1.0),
            )
        )
        eight = values("seq_1mib_8_readers_mib_s")
        eight["cat"] = values("seq_1mib_1_reader_mib_s").get("cat")
        rows.append(
            Row(
                f"{name}: seq 1 MiB, 8 readers",
                "MiB/s",
                eight,
                True,
                "vs cat(1) ≥ 1.5x, vs fuse ≥ 3x" if remote else "vs fuse ≥ 3x",
                all_of(at_least("cat", 1.5), fuse3) if remote else fuse3,
            )
        )
        many_goal = 3.0 if name == "s3" else 1.0
        for fmt in ("json", "parquet"):
            rows.append(
                Row(
                    f"{name}: 4 KiB in order ({fmt})",
                    "files/s",
                    values(f"many_4kib_{fmt}_files_s"),
                    True,
                    f"vs cat ≥ {many_goal}x" + (", vs fuse ≥ 3x" if fmt == "json" else ""),
                    all_of(at_least("cat", many_goal), fuse3)
                    if fmt == "json"
                    else at_least("cat", many_goal),
                )
            )
            ready = values(f"ready_many_{fmt}_s")
            rows.append(Row(f"{name}: ready ({fmt} 'many')", "s", ready, False))
        rows.append(
            Row(
                f"{name}: random 4 KiB pread",
                "ms/read",
                values("random_4kib_ms"),
                False,
                "vs fuse ≥ 3x",
                fuse3,
            )
        )
        rows.append(
            Row(f"{name}: CPU per MiB, seq 1 reader", "ms", values("seq_cpu_ms_per_mib"), False)
        )
        ttfb = values("ttfb_ms")
        floor_ttfb, raw_ttfb = number(ttfb.get("floor")), number(ttfb.get("raw"))
        if remote and floor_ttfb is not None:
            # no daemon answers before the target does: the floor plus the raw first byte
            ttfb["floor"] = None if raw_ttfb is None else floor_ttfb + raw_ttfb
        rows.append(
            Row(
                f"{name}: first byte, cold chunk",
                "ms",
                ttfb,
                False,
                "vs fuse ≥ 3x",
                fuse3,
            )
        )
        rows.append(
            Row(
                f"{name}: re-read (page cache)",
                "MiB/s",
                values("reread_page_cache_mib_s"),
                True,
                "≥ 2 GB/s (1907 MiB/s)",
                absolute(lambda v: v >= 2e9 / MIB),
            )
        )
        rows.append(Row(f"{name}: daemon peak RSS", "MiB", values("daemon_peak_rss_mib"), False))
    listing = figures.get("listing")
    if isinstance(listing, dict) and "ls_l" in listing:
        ls = listing["ls_l"]

        def cold(tool: str) -> Any:
            entry = ls.get(tool, {})
            return entry.get("cold_s", entry.get("error"))

        entries = listing["entries"]
        for label, mine in (("JSON", "refmount"), ("Parquet", "refmount_parquet")):
            rows.append(
                Row(
                    f"ls -l {entries} entries ({label}), raw = tmpfs",
                    "s",
                    {
                        "refmount": cold(mine),
                        "fuse": cold("fuse"),
                        "raw": cold("tmpfs"),
                        "floor": cold("floor"),
                    },
                    False,
                    "≤ 2x tmpfs, vs fuse ≥ 3x",
                    all_of(at_least("raw", 0.5), fuse3),
                )
            )
            warm = ls.get(mine, {}).get("warm_s")
            rows.append(
                Row(
                    f"ls -l {entries} entries ({label}), again",
                    "s",
                    {
                        "refmount": warm,
                        "raw": cold("tmpfs"),
                        "floor": ls.get("floor", {}).get("warm_s"),
                    },
                    False,
                    "≤ 2x tmpfs",
                    at_least("raw", 0.5),
                )
            )
    huge = figures.get("huge")
    if isinstance(huge, dict) and "ready_s" in huge:
        n = huge["references"]
        rows.append(
            Row(
                f"huge {n} Parquet refs: ready",
                "s",
                {"refmount": huge["ready_s"], "cat": huge.get("fsspec_open_and_cat_s")},
                False,
                "< 1 s",
                absolute(lambda v: v < 1.0),
            )
        )
        rows.append(
            Row(
                "huge: ls -f time to first entry",
                "s",
                {"refmount": huge.get("ls_f_first_entry_s")},
                False,
                "streams (< 1 s)",
                absolute(lambda v: v < 1.0),
            )
        )
        rows.append(Row("huge: ls -f all", "s", {"refmount": huge.get("ls_f_s")}, False))
        rate = huge.get("ls_f_entries_per_s")
        rows.append(Row("huge: ls -f rate", "names/s", {"refmount": rate}, True))
        rows.append(Row("huge: ls -l all", "s", {"refmount": huge.get("ls_l_s")}, False))
        rows.append(
            Row(
                "huge: daemon peak RSS (VmHWM)",
                "MiB",
                {"refmount": huge.get("daemon_peak_rss_mib")},
                False,
                "< 200 MB (190.7 MiB)",
                absolute(lambda v: v < 200e6 / MIB),
            )
        )
    json_rss = figures.get("json")
    if isinstance(json_rss, dict) and "refmount_vmhwm_mib" in json_rss:
        rows.append(
            Row(
                f"JSON {json_rss['references']} refs: ready",
                "s",
                {
                    "refmount": json_rss["refmount_ready_s"],
                    "cat": json_rss["fsspec_open_and_cat_s"],
                },
                False,
            )
        )
        rows.append(
            Row(
                f"JSON {json_rss['references']} refs: peak RSS",
                "MiB",
                {"refmount": json_rss["refmount_vmhwm_mib"], "cat": json_rss["fsspec_vmhwm_mib"]},
                False,
                "< ½ fsspec's",
                at_least("cat", 2.0),
            )
        )
    decode = figures.get("decode")
    if isinstance(decode, dict) and "zarr_mib_s" in decode:
        for readers in DECODE_READERS:
            rows.append(
                Row(
                    f"decode: cat, {readers} reader{'s' if readers > 1 else ''}",
                    "MiB/s",
                    {"refmount": decode[f"cat{readers}_mib_s"]},
                    True,
                )
            )
            rows.append(
                Row(
                    f"decode: {readers} reader{'s' if readers > 1 else ''} / zarr-python",
                    "x",
                    {"refmount": decode[f"cat{readers}_vs_zarr"]},
                    True,
                    "≥ 0.9 (8 readers)" if readers == 8 else "",
                    absolute(lambda v: v >= 0.9) if readers == 8 else None,
                )
            )
            rows.append(
                Row(
                    f"decode: CPU per MiB, {readers} reader{'s' if readers > 1 else ''}",
                    "ms",
                    {"refmount": decode[f"cat{readers}_cpu_ms_per_mib"]},
                    False,
                )
            )
    gen = figures.get("gen")
    if isinstance(gen, dict) and "substitution" in gen:
        for mode in ("substitution", "jinja"):
            found = gen.get(mode)
            if not isinstance(found, dict):
                continue
            rows.append(
                Row(
                    f"gen {found['keys']} keys ({mode}): RSS per key",
                    "B",
                    {"refmount": found["bytes_per_key_after"]},
                    False,
                    "≤ 48 B",
                    absolute(lambda v: v <= 48),
                )
            )
            rows.append(
                Row(
                    f"gen {found['keys']} keys ({mode}): load",
                    "s",
                    {"refmount": found["seconds"]},
                    False,
                )
            )
    for row in rows:
        row.compute()
    return rows


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        if value >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)[:28]


def ratio_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def print_table(rows: list[Row], figures: dict[str, Any]) -> None:
    header = [
        "figure",
        "unit",
        "refmount",
        "fsspec cat",
        "fsspec.fuse",
        "raw",
        "floor",
        "C floor",
        "C floor (mt)",
        "x cat",
        "x fuse",
        "x raw",
        "x floor",
        "x C floor",
        "goal",
        "met",
    ]
    table = [header]
    for row in rows:
        met = {True: "met", False: "MISSED", None: "-" if not row.goal else "n/a"}[row.met]
        if row.met is False and row.floor_met is False:
            met = "MISSED, floor too"
        table.append(
            [
                row.figure,
                row.unit,
                *(cell(row.values.get(tool)) for tool in TOOLS),
                *(ratio_cell(row.ratios.get(tool)) for tool in BASELINES),
                row.goal,
                met,
            ]
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for number_, line in enumerate(table):
        print("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)))
        if number_ == 0:
            print("  ".join("-" * width for width in widths))
    print()
    print(
        "x columns: how many times better refmount is than that column "
        "(rate ratio for MiB/s and files/s, inverse for times and memory)."
    )
    print(
        "floor: the same 1 MiB chunks served from memory by the least pyfuse3 filesystem"
        " (scripts/fuse_floor.py), and on ls and local 4 KiB rows as many 4 KiB files as 'many';"
        " on remote first-byte rows, plus the raw first byte."
        " 'MISSED, floor too': the floor misses the goal as well, so no pyfuse3 daemon"
        " meets it here."
    )
    for name in ("local", "http", "s3"):
        section = figures.get(name)
        if isinstance(section, dict):
            notes = [
                f"server {section.get('server', 'files')}",
                f"raw = {section.get('raw_note', '-')}",
                f"resident {cell(section.get('residency_at_start'))}"
                f"->{cell(section.get('residency_at_end'))}",
                f"CPU busy {cell(section.get('cpu', {}).get('cpu_busy_share'))}",
                f"load {cell(section.get('cpu', {}).get('loadavg_1m_end'))}",
            ]
            if "error" in section:
                notes = [f"error: {section['error']}"]
            print(f"{name}: " + ", ".join(notes))
    if figures.get("rounds", 1) > 1:
        print(
            f"local, HTTP and S3 figures: the median of {figures['rounds']} rounds, every tool"
            " measured in each round (each round's figures are in the JSON)"
        )
    print(f"CPU busy before the run (other processes): {figures.get('other_cpu_before')}")
    for scheme in figures.get("proactive_reclaim", []):
        print(f"NOTE: the kernel reclaims memory proactively here: {scheme}")
    if "s3" in figures and isinstance(figures["s3"], dict) and "s3_server_note" in figures["s3"]:
        print("NOTE: " + figures["s3"]["s3_server_note"])
    decode = figures.get("decode")
    if isinstance(decode, dict) and "zarr_mib_s" in decode:
        print(
            f"decode: {decode['chunks']} zlib chunks of 1 MiB decoded, local file; a fresh"
            f" --decode mount per row, read by GNU cat. zarr-python 3 in one process through"
            f" fsspec references: {cell(decode['zarr_mib_s'])} MiB/s,"
            f" {cell(decode['zarr_cpu_ms_per_mib'])} ms CPU per MiB. refmount's CPU per MiB"
            f" counts the daemon and cat."
        )


# ------------------------------------------------------------------------------ main

FUSECTL = Path("/sys/fs/fuse/connections")


def mount_fusectl() -> bool:
    """Mount the fusectl filesystem that ``-o tune_kernel`` writes to, where it is missing (as
    systemd does at boot); return True if this run mounted it, and so unmounts it."""
    if os.geteuid() != 0 or not FUSECTL.is_dir() or os.path.ismount(FUSECTL):
        return False
    done = subprocess.run(
        ["mount", "-t", "fusectl", "none", str(FUSECTL)], capture_output=True, text=True
    )
    if done.returncode != 0:
        log(f"cannot mount fusectl on {FUSECTL}: {done.stderr.strip()}")
        return False
    log(f"mounted fusectl on {FUSECTL} for -o tune_kernel (unmounted at the end)")
    return True


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every data size (default 1: 512 x 1 MiB 'big', 200 000 x 4 KiB 'many',"
        " 5 M Parquet 'huge', 1 M JSON references); e.g. 0.1 for a quick run",
    )
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (default: all of {','.join(SECTIONS)})",
    )
    parser.add_argument(
        "--tools",
        default=",".join(TOOLS),
        help=f"comma-separated readers to run in the read sections (default {','.join(TOOLS)})",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=5.0,
        help="seconds each read loop may take; it reports the rate of what it did (default 5)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure the local, HTTP and S3 figures this many times, every tool in turn, and"
        " report each tool's median (default 1; 3 keeps one slow moment from deciding a row)",
    )
    parser.add_argument(
        "--ls-timeout",
        type=float,
        default=60.0,
        help="seconds an ls may take before it is recorded as unfinished (default 60)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure and ratio here")
    args = parser.parse_args()
    sections = [s for s in args.only.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    args.tools = {t for t in args.tools.split(",") if t}
    if args.tools - set(TOOLS):
        parser.error(f"unknown tools: {', '.join(sorted(args.tools - set(TOOLS)))}")

    figures: dict[str, Any] = {
        "scale": args.scale,
        "budget_s": args.budget,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "other_cpu_before": other_cpu_share(),
        "loadavg_before": os.getloadavg(),
        "proactive_reclaim": proactive_reclaim(),
    }
    runners = {
        "local": run_local,
        "http": run_http,
        "s3": run_s3,
        "listing": run_listing,
        "huge": run_huge,
        "json": run_json_rss,
        "decode": run_decode,
        "gen": run_gen_cost,
    }
    started = time.perf_counter()
    fusectl_mounted = mount_fusectl()
    with tempfile.TemporaryDirectory(prefix="refmount-bench-") as tmp:
        workdir = Path(tmp)
        data = DataSet(workdir, max(8, int(512 * args.scale)), max(16, int(200_000 * args.scale)))
        log(f"generating data ({data.big_chunks} x 1 MiB, {data.many_chunks} x 4 KiB)")
        data.generate()
        os.sync()  # the generated files' writeback would otherwise overlap the first section
        try:
            for section in sections:
                log(f"section {section}")
                begun = time.perf_counter()
                try:
                    figures[section] = runners[section](data, workdir, args)
                except Exception as error:
                    log(f"section {section} failed: {error!r}")
                    figures[section] = {"error": f"{type(error).__name__}: {error}"[:500]}
                figures[section]["section_s"] = time.perf_counter() - begun
        finally:
            for mountpoint in (workdir / "mnt").glob("*") if (workdir / "mnt").exists() else []:
                unmount(mountpoint)
            if fusectl_mounted:
                subprocess.run(["umount", str(FUSECTL)], check=False)
    figures["total_s"] = time.perf_counter() - started
    rows = build_rows(figures)
    print_table(rows, figures)
    figures["table"] = [
        {
            "figure": row.figure,
            "unit": row.unit,
            "values": row.values,
            "ratios": row.ratios,
            "goal": row.goal,
            "met": row.met,
            "floor_met": row.floor_met,
        }
        for row in rows
    ]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
