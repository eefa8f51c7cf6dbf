"""Timing loops: time-bounded loops over items (one reader or several), the reader's reusable
buffer, first-byte latency, timed commands and streamed listings."""

from __future__ import annotations

import concurrent.futures
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bench.common import MIB
from bench.processes import proc_status, stop_process

T = TypeVar("T")


@dataclass
class Bounded:
    """What a time-bounded loop did."""

    count: int
    nbytes: int
    seconds: float
    finished: bool
    cpu_seconds: float = 0.0
    """CPU time the benchmark's own process (the reading threads) used during the loop."""

    def per_second(self) -> float:
        """Items per second."""
        return self.count / self.seconds if self.seconds else 0.0

    def mib_s(self) -> float:
        """MiB per second."""
        return self.nbytes / MIB / self.seconds if self.seconds else 0.0

    def cpu_ms_per_mib(self) -> float:
        """The reader's CPU milliseconds per MiB read."""
        return 1000 * self.cpu_seconds * MIB / max(1, self.nbytes)


def bounded(items: Sequence[T], function: Callable[[T], int], budget: float) -> Bounded:
    """Call ``function`` on items in order until done or ``budget`` seconds passed."""
    cpu = time.process_time()
    started = time.perf_counter()
    deadline = started + budget
    nbytes = count = 0
    for item in items:
        nbytes += function(item)
        count += 1
        if time.perf_counter() > deadline:
            break
    seconds = time.perf_counter() - started
    return Bounded(count, nbytes, seconds, count == len(items), time.process_time() - cpu)


def bounded_parallel(
    items: Sequence[T], function: Callable[[T], int], budget: float, threads: int
) -> Bounded:
    """The same with ``threads`` readers taking items from a shared queue."""
    lock = threading.Lock()
    iterator = iter(items)
    totals = [0, 0]
    cpu = time.process_time()
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
    seconds = time.perf_counter() - started
    done = totals[0] == len(items)
    return Bounded(totals[0], totals[1], seconds, done, time.process_time() - cpu)


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
    """Seconds from opening ``path`` to its first byte."""
    started = time.perf_counter()
    with open(path, "rb", buffering=0) as handle:
        handle.read(1)
    return time.perf_counter() - started


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


@dataclass(frozen=True)
class Streamed:
    """What ``ls -f`` of a directory did within its time."""

    first_entry_s: float | str
    all_s: float | str
    entries_listed: int
    entries_per_s: float


def streamed_listing(directory: Path, timeout: float) -> Streamed:
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
    return Streamed(
        first[0] if first else f"no entry within {timeout:.0f} s",
        seconds if finished else f"did not finish in {timeout:.0f} s",
        count[0],
        count[0] / seconds,
    )


class RssSampler:
    """Sample a process's VmRSS every 50 ms in a thread; ``peak`` is the highest seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, proc_status(self.pid).get("VmRSS", 0.0))
            self.stop.wait(0.05)

    def __enter__(self) -> RssSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


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
