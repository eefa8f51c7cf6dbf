"""Soak a real mount: many readers, random reads of HTTP and S3 targets behind fault proxies."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refmount.fuse.stats import STATS_FILE
from tests.support.servers import (
    AWS_VARIABLES_TO_CLEAR,
    DUMMY_AWS_ENVIRONMENT,
    Fault,
    FaultProxy,
    RangeHTTPServer,
    create_bucket,
    moto_s3,
)

MIB = 1024 * 1024
KIB = 1024

FAULTS = (
    Fault.ERROR_503,
    Fault.RESET,
    Fault.TRUNCATE,
    Fault.HUGE_BODY,
    Fault.ENDLESS_BODY,
    Fault.GZIP_BOMB,
    Fault.STALL_MID_BODY,
)
"""The faults the proxies inject, drawn uniformly for the chosen share of requests: broken
answers, and misbehaving servers (a range ignored with a gigabyte body, a body that never
ends, a gzip bomb, a body that stalls half-way; HEAD requests pass instead)."""

FINAL_FAULTS = (Fault.HUGE_BODY, Fault.ENDLESS_BODY, Fault.GZIP_BOMB)
"""Faults refmount refuses at once, without retrying: one of them explains an EIO."""

RECENT_FAILURE_SECONDS = 1.0
"""How long refmount answers a range that just failed with that failure (so an EIO may
come from a failure that ended up to this long before the read started)."""

MOUNT_TIMEOUT = 60.0
EXIT_TIMEOUT = 30.0


# ----------------------------------------------------------------------------- arguments


def parse_size(text: str) -> int:
    units = {"": 1, "K": KIB, "M": MIB, "G": 1024 * MIB}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1] if text and text[-1] in units else ""
    return int(float(text.removesuffix(unit)) * units[unit])


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/soak",
        description="Mount a generated reference set with the real refmount command and read "
        "it with many threads for a while, through fault-injecting proxies in front of an HTTP "
        "range server and a local S3 server (moto), all on 127.0.0.1. Checks: no wrong bytes, "
        "no errors but injected faults that outlasted the retries, bounded memory, no file "
        "descriptor or thread leak. Exit status 0 when every check passes, 1 otherwise.",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to read (60)")
    parser.add_argument("--threads", type=int, default=64, help="concurrent readers (64)")
    parser.add_argument(
        "--fault-share",
        type=float,
        default=0.05,
        help="share of requests each proxy fails with a 503, a reset, a truncated body, an "
        "ignored range with a huge body, an endless body, a gzip bomb or a stall (0.05)",
    )
    parser.add_argument("--retries", type=int, default=4, help="refmount --retries (4)")
    parser.add_argument("--timeout", default="10s", help="refmount --timeout (10s)")
    parser.add_argument(
        "--fetcher", default="auto", choices=("auto", "fsspec"), help="refmount --fetcher (auto)"
    )
    parser.add_argument("--cache-size", default="64M", help="refmount --cache-size (64M)")
    parser.add_argument(
        "--targets", default="http,s3", help="comma-separated: http, s3 (both by default)"
    )
    parser.add_argument("--objects", type=int, default=8, help="target objects per target (8)")
    parser.add_argument("--object-size", default="4M", help="size of each target object (4M)")
    parser.add_argument("--keys", type=int, default=1000, help="range keys per target (1000)")
    parser.add_argument("--max-key-size", default="1M", help="largest range key (1M)")
    parser.add_argument(
        "--rss-slack",
        default="160M",
        help="allowed daemon RSS above start + cache (160M: with 64 readers, up to 64 FUSE "
        "requests of 1 MiB answered at once and up to 32 connections per host and fetch "
        "engine, each with its buffers, are outside the cache budget)",
    )
    parser.add_argument(
        "--fd-slack", type=int, default=64, help="allowed open fds above the warm-up count (64)"
    )
    parser.add_argument(
        "--thread-slack", type=int, default=8, help="allowed threads above the warm-up count (8)"
    )
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--json", type=Path, help="also write the figures and checks here")
    parser.add_argument("--log", type=Path, help="keep the daemon's log here")
    args = parser.parse_args(argv)
    args.targets = [name.strip() for name in args.targets.split(",") if name.strip()]
    if not args.targets or set(args.targets) - {"http", "s3"}:
        parser.error("--targets takes http, s3 or http,s3")
    if not 0.0 <= args.fault_share <= 1.0:
        parser.error("--fault-share must be between 0 and 1")
    if args.seconds <= 0 or args.threads <= 0:
        parser.error("--seconds and --threads must be positive")
    return args


def parse_duration(text: str) -> float:
    text = text.strip().lower()
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.removesuffix("s"))


def worst_case(timeout: float, retries: int) -> float:
    """The longest one request may take, all attempts and backoff delays included."""
    delays = sum(min(2.0, 0.05 * 2.0**attempt) for attempt in range(retries))
    return timeout * (retries + 1) + delays


# ------------------------------------------------------------------------------- the set


@dataclass
class Target:
    """One kind of target (http or s3): its objects, proxy and the keys that refer to it."""

    name: str
    proxy: FaultProxy
    objects: dict[str, bytes]
    """Object path on the proxy (``/o3.bin`` or ``/bucket/o3.bin``) to its bytes."""


@dataclass
class Key:
    """A key of the mounted set, the bytes it must read as, and the object path it comes from."""

    name: str
    data: bytes
    target: str
    object_path: str


def build_refs(
    targets: list[Target], url_of: dict[str, Any], args: argparse.Namespace
) -> tuple[dict[str, Any], list[Key]]:
    """Range keys at random offsets and sizes, plus one whole-object key per object."""
    rng = random.Random(args.seed)
    largest = parse_size(args.max_key_size)
    refs: dict[str, Any] = {".zgroup": {"zarr_format": 2}}
    keys: list[Key] = []
    for target in targets:
        paths = sorted(target.objects)
        for i in range(args.keys):
            path = rng.choice(paths)
            data = target.objects[path]
            length = rng.randint(1, min(largest, len(data)))
            offset = rng.randint(0, len(data) - length)
            name = f"{target.name}/k{i}"
            refs[name] = [url_of[target.name](path), offset, length]
            keys.append(Key(name, data[offset : offset + length], target.name, path))
        for j, path in enumerate(paths):
            name = f"{target.name}/whole{j}"
            refs[name] = [url_of[target.name](path)]
            keys.append(Key(name, target.objects[path], target.name, path))
    return refs, keys


# ------------------------------------------------------------------------------- readers


@dataclass
class Failure:
    """A read that did not give the right bytes."""

    key: Key
    kind: str
    """``eio``, ``wrong`` or ``error``."""
    started: float
    ended: float
    detail: str


@dataclass
class Tally:
    """What the readers did; every reader thread adds to it under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    reads: int = 0
    bytes_read: int = 0
    direct_reads: int = 0
    whole_reads: int = 0
    per_target: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


def read_range(path: Path, offset: int, size: int, direct: bool) -> bytes:
    """Read ``size`` bytes at ``offset`` (fewer at the end of the file), O_DIRECT if asked."""
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    try:
        pieces = []
        while size > 0:
            piece = os.pread(fd, size, offset)
            if not piece:
                break
            pieces.append(piece)
            offset += len(piece)
            size -= len(piece)
        return b"".join(pieces)
    finally:
        os.close(fd)


def warm_engines(mountpoint: Path, keys: list[Key]) -> None:
    """Read the smallest key of each target once, before any fault, and check its bytes.

    The fetch engines are imported and their clients made (and S3's service model loaded) at
    the first request, not at mount: the RSS the bound is counted from is taken after this,
    as the daemon's RSS "after loading" is meant.
    """
    smallest: dict[str, Key] = {}
    for key in keys:
        if key.target not in smallest or len(key.data) < len(smallest[key.target].data):
            smallest[key.target] = key
    for key in smallest.values():
        if (mountpoint / key.name).read_bytes() != key.data:
            raise SystemExit(f"soak: wrong bytes in {key.name} before any fault")


def reader(
    number: int,
    mountpoint: Path,
    keys: list[Key],
    deadline: float,
    seed: int,
    tally: Tally,
    direct_ok: threading.Event,
) -> None:
    """Read random keys, at random offsets and sizes, until ``deadline``; check every byte."""
    rng = random.Random(seed * 1000 + number)
    while time.monotonic() < deadline:
        key = rng.choice(keys)
        path = mountpoint / key.name
        whole = rng.random() < 0.1
        direct = direct_ok.is_set() and rng.random() < 0.5
        if whole:
            offset, size = 0, len(key.data)
        else:
            offset = rng.randrange(len(key.data))
            size = rng.randint(1, min(len(key.data) - offset, 256 * KIB))
        expected = key.data[offset : offset + size]
        started = time.monotonic()
        try:
            got = path.read_bytes() if whole else read_range(path, offset, size, direct)
        except OSError as error:
            ended = time.monotonic()
            if direct and error.errno == errno.EINVAL:
                direct_ok.clear()  # the kernel refuses O_DIRECT here: buffered reads only
                continue
            kind = "eio" if error.errno == errno.EIO else "error"
            with tally.lock:
                tally.failures.append(Failure(key, kind, started, ended, repr(error)))
            continue
        ended = time.monotonic()
        with tally.lock:
            tally.reads += 1
            tally.bytes_read += len(got)
            tally.direct_reads += direct and not whole
            tally.whole_reads += whole
            tally.per_target[key.target] = tally.per_target.get(key.target, 0) + 1
            tally.latencies.append(ended - started)
            if got != expected:
                detail = f"offset {offset} size {size}: {len(got)} bytes, not the source's"
                tally.failures.append(Failure(key, "wrong", started, ended, detail))


# ------------------------------------------------------------------------------ the daemon


def proc_figures(pid: int) -> dict[str, int]:
    """The daemon's resident memory (bytes), threads and open file descriptors."""
    figures = {"fds": len(os.listdir(f"/proc/{pid}/fd"))}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name == "VmRSS":
                figures["rss"] = int(value.split()[0]) * KIB
            elif name == "Threads":
                figures["threads"] = int(value)
    return figures


class Monitor(threading.Thread):
    """Sample the daemon's /proc figures every second until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True, name="soak-monitor")
        self.pid = pid
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            with contextlib.suppress(OSError):
                self.samples.append((time.monotonic(), proc_figures(self.pid)))
            self.stopping.wait(1.0)

    def peak(self, name: str) -> int:
        return max((sample[name] for _, sample in self.samples), default=0)


def is_mounted(path: Path) -> bool:
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == str(path) for line in mounts)


@contextlib.contextmanager
def mounted(command: list[str], mountpoint: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``refmount -f`` until it answers; always unmount and reap it (by its PID only)."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(mountpoint):
            if process.poll() is not None:
                raise RuntimeError(f"refmount exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"refmount did not mount within {MOUNT_TIMEOUT:g} s")
            time.sleep(0.02)
        os.stat(mountpoint)
        yield process
    finally:
        if is_mounted(mountpoint):
            result = subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
            if result.returncode != 0:
                subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        try:
            process.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
                process.wait()


# -------------------------------------------------------------------------------- checks


@dataclass
class Check:
    name: str
    ok: bool
    value: Any
    limit: Any

    def row(self) -> tuple[str, str, str, str]:
        return ("ok" if self.ok else "FAIL", self.name, str(self.value), str(self.limit))


def percentile(values: list[float], percent: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))]


def table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


# ------------------------------------------------------------------------------------ run


def run(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], list[Check]]:
    for name in AWS_VARIABLES_TO_CLEAR:
        os.environ.pop(name, None)
    os.environ.update(DUMMY_AWS_ENVIRONMENT)  # the daemon inherits it
    rng = random.Random(args.seed)
    object_size = parse_size(args.object_size)
    cache_size = parse_size(args.cache_size)
    timeout = parse_duration(args.timeout)
    bound = worst_case(timeout, args.retries)
    with contextlib.ExitStack() as stack:
        targets: list[Target] = []
        url_of: dict[str, Any] = {}
        options: list[str] = []
        if "http" in args.targets:
            files = {f"/o{j}.bin": rng.randbytes(object_size) for j in range(args.objects)}
            server = stack.enter_context(RangeHTTPServer(files))
            proxy = stack.enter_context(FaultProxy(server.url, seed=args.seed))
            targets.append(Target("http", proxy, files))
            url_of["http"] = proxy.url_for
        if "s3" in args.targets:
            endpoint = stack.enter_context(moto_s3())
            objects = {f"o{j}.bin": rng.randbytes(object_size) for j in range(args.objects)}
            bucket = create_bucket(endpoint, "refmount-soak", objects)
            proxy = stack.enter_context(FaultProxy(endpoint, seed=args.seed + 1))
            paths = {f"/{bucket.name}/{name}": data for name, data in objects.items()}
            targets.append(Target("s3", proxy, paths))
            url_of["s3"] = lambda path: f"s3:/{path}"
            options += ["-o", f"s3_endpoint_url={proxy.url}"]
        refs, keys = build_refs(targets, url_of, args)
        refs_path = workdir / "refs.json"
        refs_path.write_text(json.dumps(refs))
        mountpoint = workdir / "mnt"
        log = args.log or workdir / "refmount.log"
        command = [
            sys.executable,
            "-m",
            "refmount",
            "-f",
            "--log-level",
            "info",
            "--cache-size",
            args.cache_size,
            "--timeout",
            args.timeout,
            "--retries",
            str(args.retries),
            "--fetcher",
            args.fetcher,
            *options,
            str(refs_path),
            str(mountpoint),
        ]
        with mounted(command, mountpoint, log) as process:
            pid = process.pid
            warm_engines(mountpoint, keys)
            start = proc_figures(pid)
            monitor = Monitor(pid)
            monitor.start()
            if args.fault_share > 0:  # faults from the first read on
                for target in targets:
                    target.proxy.set_random(args.fault_share, FAULTS)
            tally = Tally()
            direct_ok = threading.Event()
            direct_ok.set()
            began = time.monotonic()
            deadline = began + args.seconds
            readers = [
                threading.Thread(
                    target=reader,
                    args=(i, mountpoint, keys, deadline, args.seed, tally, direct_ok),
                    name=f"soak-reader-{i}",
                    daemon=True,
                )
                for i in range(args.threads)
            ]
            for thread in readers:
                thread.start()
            warm_up = min(10.0, args.seconds / 4)
            time.sleep(warm_up)
            warm = proc_figures(pid)
            # every reader ends at the deadline, after its last read (itself bounded)
            join_by = deadline + 2 * bound + 30
            for thread in readers:
                thread.join(max(0.0, join_by - time.monotonic()))
            hung = sum(thread.is_alive() for thread in readers)
            elapsed = time.monotonic() - began
            for target in targets:
                target.proxy.clear()
            time.sleep(1.0)  # let closed files be released
            end = proc_figures(pid)
            alive_before_unmount = process.poll() is None
            snapshot: dict[str, Any] = {}
            with contextlib.suppress(OSError, ValueError):
                snapshot = json.loads((mountpoint / STATS_FILE).read_bytes())
            monitor.stopping.set()
            monitor.join(5)
        exit_code = process.returncode
        applied = {target.name: target.proxy.applied for target in targets}
        proxies = {target.name: target.proxy for target in targets}
    return summarise(
        args,
        tally=tally,
        applied=applied,
        proxies=proxies,
        keys=keys,
        figures={"start": start, "warm": warm, "end": end},
        monitor=monitor,
        snapshot=snapshot,
        hung=hung,
        elapsed=elapsed,
        alive=alive_before_unmount,
        exit_code=exit_code,
        cache_size=cache_size,
        bound=bound,
        log=log,
    )


def summarise(
    args: argparse.Namespace,
    *,
    tally: Tally,
    applied: dict[str, list[Any]],
    proxies: dict[str, FaultProxy],
    keys: list[Key],
    figures: dict[str, dict[str, int]],
    monitor: Monitor,
    snapshot: dict[str, Any],
    hung: int,
    elapsed: float,
    alive: bool,
    exit_code: int | None,
    cache_size: int,
    bound: float,
    log: Path,
) -> tuple[dict[str, Any], list[Check]]:
    wrong = [f for f in tally.failures if f.kind == "wrong"]
    eio = [f for f in tally.failures if f.kind == "eio"]
    other = [f for f in tally.failures if f.kind == "error"]

    # an EIO is explained when its object got at least retries + 1 injected faults, or one
    # that is refused at once, in the window in which that read (or a fetch it waited for,
    # or a failure it was answered with) could have been attempted
    def explained(failure: Failure) -> bool:
        proxy, path = proxies[failure.key.target], failure.key.object_path
        window = (failure.started - bound - RECENT_FAILURE_SECONDS, failure.ended + 1)
        return (
            proxy.faults_between(path, *window) >= args.retries + 1
            or proxy.faults_between(path, *window, only=FINAL_FAULTS) > 0
        )

    unexplained = [f for f in eio if not explained(f)]
    injected = {
        name: {fault.value: sum(1 for item in items if item.fault is fault) for fault in FAULTS}
        for name, items in applied.items()
    }
    requests = {name: len(items) for name, items in applied.items()}
    rss_limit = figures["start"]["rss"] + cache_size + parse_size(args.rss_slack)
    rss_peak = max(monitor.peak("rss"), figures["end"]["rss"])
    checks = [
        Check(
            "reads done",
            tally.reads > 0 and all(tally.per_target.get(name, 0) > 0 for name in args.targets),
            tally.reads,
            "> 0 per target",
        ),
        Check("wrong bytes", not wrong, len(wrong), 0),
        Check("errors other than EIO", not other, len(other), 0),
        Check("EIO not explained by injected faults", not unexplained, len(unexplained), 0),
        Check("readers still blocked at the end", hung == 0, hung, 0),
        Check("daemon alive until unmounted", alive, alive, True),
        Check("daemon exit status after unmount", exit_code == 0, exit_code, 0),
        Check(
            "daemon peak RSS (MiB)",
            rss_peak <= rss_limit,
            round(rss_peak / MIB, 1),
            f"<= {rss_limit / MIB:.1f} (start + cache + slack)",
        ),
        Check(
            "open fds growth after warm-up",
            figures["end"]["fds"] - figures["warm"]["fds"] <= args.fd_slack,
            figures["end"]["fds"] - figures["warm"]["fds"],
            f"<= {args.fd_slack}",
        ),
        Check(
            "threads growth after warm-up",
            figures["end"]["threads"] - figures["warm"]["threads"] <= args.thread_slack,
            figures["end"]["threads"] - figures["warm"]["threads"],
            f"<= {args.thread_slack}",
        ),
        Check(
            "open file handles at the end",
            snapshot.get("open_files") == 0,
            snapshot.get("open_files"),
            0,
        ),
    ]
    if args.fault_share > 0:
        total = sum(sum(counts.values()) for counts in injected.values())
        checks.append(Check("faults injected", total > 0, total, "> 0"))
    result: dict[str, Any] = {
        "settings": {
            "seconds": args.seconds,
            "threads": args.threads,
            "fault_share": args.fault_share,
            "retries": args.retries,
            "timeout": args.timeout,
            "fetcher": args.fetcher,
            "cache_size": args.cache_size,
            "targets": args.targets,
            "keys": len(keys),
            "seed": args.seed,
        },
        "elapsed_s": round(elapsed, 2),
        "reads": tally.reads,
        "reads_per_target": tally.per_target,
        "reads_per_s": round(tally.reads / elapsed, 1) if elapsed else 0.0,
        "bytes_read": tally.bytes_read,
        "mib_per_s": round(tally.bytes_read / MIB / elapsed, 2) if elapsed else 0.0,
        "direct_reads": tally.direct_reads,
        "whole_file_reads": tally.whole_reads,
        "latency_s": {
            "p50": round(percentile(tally.latencies, 50), 4),
            "p99": round(percentile(tally.latencies, 99), 4),
            "max": round(max(tally.latencies, default=0.0), 4),
        },
        "eio_reads": len(eio),
        "eio_unexplained": len(unexplained),
        "wrong_reads": len(wrong),
        "other_errors": len(other),
        "target_requests": requests,
        "faults_injected": injected,
        "daemon": {
            "start": figures["start"],
            "after_warm_up": figures["warm"],
            "end": figures["end"],
            "peak_rss": rss_peak,
            "peak_fds": monitor.peak("fds"),
            "peak_threads": monitor.peak("threads"),
            "samples": len(monitor.samples),
        },
        "daemon_stats": {
            name: snapshot.get(name)
            for name in ("reads", "fetches", "bytes_fetched", "cache_hits", "retries", "errors")
        },
        "failures": [
            {"key": f.key.name, "kind": f.kind, "detail": f.detail} for f in tally.failures[:20]
        ],
        "checks": [vars(check) for check in checks],
        "ok": all(check.ok for check in checks),
        "log": str(log) if args.log else None,
    }
    return result, checks


def over_the_run(daemon: dict[str, Any], figure: str, show: Callable[[Any], str]) -> str:
    """Return a daemon figure at the start, after warm-up, at the end and at its peak."""
    values = [daemon[when][figure] for when in ("start", "after_warm_up", "end")]
    return "/".join(show(value) for value in [*values, daemon[f"peak_{figure}"]])


def report(result: dict[str, Any], checks: list[Check]) -> str:
    daemon = result["daemon"]
    stats = result["daemon_stats"]
    figures = [
        ("duration", f"{result['elapsed_s']} s, {result['settings']['threads']} readers"),
        (
            "reads",
            f"{result['reads']} ({result['reads_per_s']}/s, {result['mib_per_s']} MiB/s), "
            f"per target {result['reads_per_target']}",
        ),
        (
            "read latency",
            f"p50 {result['latency_s']['p50']} s, p99 {result['latency_s']['p99']} "
            f"s, max {result['latency_s']['max']} s",
        ),
        ("target requests", str(result["target_requests"])),
        ("faults injected", str(result["faults_injected"])),
        ("daemon retries", str(stats["retries"])),
        ("daemon fetch errors", str(stats["errors"])),
        ("EIO reads", f"{result['eio_reads']} ({result['eio_unexplained']} unexplained)"),
        ("RSS MiB start/warm/end/peak", over_the_run(daemon, "rss", lambda v: f"{v / MIB:.0f}")),
        ("fds start/warm/end/peak", over_the_run(daemon, "fds", str)),
        ("threads start/warm/end/peak", over_the_run(daemon, "threads", str)),
    ]
    lines = [table([("figure", "value"), *figures]), ""]
    lines.append(table([("", "check", "value", "limit"), *(check.row() for check in checks)]))
    for failure in result["failures"][:5]:
        lines.append(f"  {failure['kind']}: {failure['key']}: {failure['detail']}")
    lines.append("")
    lines.append("soak passed" if result["ok"] else "soak FAILED")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    with tempfile.TemporaryDirectory(prefix="refmount-soak-") as tmp:
        try:
            result, checks = run(args, Path(tmp))
        except RuntimeError as error:
            log = args.log or Path(tmp) / "refmount.log"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            print(f"soak could not run: {error}\n{tail}", file=sys.stderr)
            return 2
    print(report(result, checks))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
