"""One round of a read section: every read figure of one target measured by each tool (refmount,
fsspec cat, the floors, fsspec.fuse, the raw reader)."""

from __future__ import annotations

import functools
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import KIB, MIB, log
from bench.datasets import DataSet
from bench.figures import Failure, Figure, ReadFigures, Verification
from bench.measure import Bounded, bounded, bounded_parallel, first_byte, read_whole
from bench.mounts import Mount, c_floor_mount, floor_mount
from bench.processes import process_cpu_seconds
from bench.raw import RawReader
from bench.tools import Target, Tool


def cat_length(fs: Any, key: str) -> int:
    """The length of ``key`` read whole by the in-process fsspec ``fs``."""
    return len(fs.cat(key))


def verify(
    data: DataSet, which: str, read: Callable[[int], bytes], sample: int = 8
) -> Verification:
    """Compare ``sample`` chunks read by a tool with the source bytes."""
    count = data.big_chunks if which == "big" else data.many_chunks
    indices = sorted(random.Random(7).sample(range(count), min(sample, count)))
    bad = sum(read(i) != data.expected(which, i) for i in indices)
    return Verification(len(indices), bad)


def random_reads(data: DataSet, count: int) -> list[tuple[int, int]]:
    """``count`` distinct random (chunk, 4 KiB-aligned offset) pairs in the big set."""
    rng = random.Random(11)
    pages = data.big_chunks * (MIB // (4 * KIB))
    picks = rng.sample(range(pages), min(count, pages))
    return [(p // 256, (p % 256) * 4 * KIB) for p in picks]


def pread_picks(
    paths: Callable[[int], Path], picks: Sequence[tuple[int, int]], budget: float
) -> float:
    """Milliseconds per random 4 KiB ``pread`` of ``picks`` (chunk, offset) in open files."""
    fds = {i: os.open(paths(i), os.O_RDONLY) for i, _ in picks}
    try:
        run = bounded(picks, lambda p: len(os.pread(fds[p[0]], 4 * KIB, p[1])), budget)
    finally:
        for fd in fds.values():
            os.close(fd)
    return 1000 * run.seconds / max(1, run.count)


@dataclass
class Round:
    """One round of measurements of ``target``: each tool's figures in ``out``."""

    target: Target
    data: DataSet
    workdir: Path
    budget: float
    tools: frozenset[Tool]
    out: ReadFigures = field(default_factory=ReadFigures)

    def __post_init__(self) -> None:
        self.big_keys = [f"big/{i}" for i in range(self.data.big_chunks)]
        self.many_keys = [f"many/{i}" for i in range(self.data.many_chunks)]
        self.picks = random_reads(self.data, 2000)
        self.plain_directory = self.data.directory / "plain" / "big"
        self.cold = [self.data.big_chunks - 1 - i for i in range(min(16, self.data.big_chunks))]

    def attempt(self, tool: Tool, label: str, function: Callable[[], None]) -> None:
        """Run ``function`` if ``tool`` was asked for; record its failure under ``label``."""
        if tool not in self.tools:
            return
        try:
            function()
        except Exception as error:
            log(f"{self.target.name} {tool} {label}: {error!r}")
            self.out.fail(label, tool, Failure.of(error))

    def first_byte_then_read_twice(self, mount: Mount, tool: Tool) -> None:
        """The first byte of cold chunks, every chunk read in order (and the daemon's CPU for
        it), then read again."""
        ttfb = [first_byte(mount.path / "big" / str(i)) for i in self.cold]
        self.out.record(Figure.TTFB, tool, 1000 * statistics.median(ttfb))
        paths = [mount.path / k for k in self.big_keys]
        run = self.sequential(tool, lambda: bounded(paths, read_whole, self.budget), mount)
        reread = bounded(paths[: run.count], read_whole, self.budget)
        self.out.record(Figure.REREAD, tool, reread.mib_s())

    def sequential(
        self, tool: Tool, loop: Callable[[], Bounded], mount: Mount | None = None
    ) -> Bounded:
        """Run the 1-reader loop and record its rate and the CPU per MiB of every party: the
        daemon (of ``mount``), the reader (this process) and the target's server."""
        daemon = process_cpu_seconds(mount.process.pid) if mount is not None else 0.0
        server = self.target.server_cpu_seconds()
        run = loop()
        self.out.record(Figure.SEQ_1, tool, run.mib_s())
        self.out.record(Figure.SEQ_READER_CPU, tool, run.cpu_ms_per_mib())
        if mount is not None:
            daemon = process_cpu_seconds(mount.process.pid) - daemon
            self.out.record(Figure.SEQ_CPU, tool, 1000 * daemon * MIB / max(1, run.nbytes))
        server_after = self.target.server_cpu_seconds()
        if server is not None and server_after is not None:
            per_mib = 1000 * (server_after - server) * MIB / max(1, run.nbytes)
            self.out.record(Figure.SEQ_SERVER_CPU, tool, per_mib)
        return run

    def eight_readers(self, mount: Mount, tool: Tool) -> None:
        """Every chunk read by 8 threads taking the next from a shared queue."""
        paths = [mount.path / k for k in self.big_keys]
        run = bounded_parallel(paths, read_whole, self.budget, 8)
        self.out.record(Figure.SEQ_8, tool, run.mib_s())

    def tuned_reader(self, mount: Mount, tool: Tool) -> None:
        """Every chunk read in order by one reader, on a kernel-tuned mount."""
        run = bounded([mount.path / k for k in self.big_keys], read_whole, self.budget)
        self.out.record(Figure.SEQ_1_TUNED, tool, run.mib_s())

    # ---- refmount

    def refmount_big(self) -> None:
        """refmount's figures of the big set, each measurement on a fresh mount, its peak RSS
        over all of them, and the many set (JSON and Parquet)."""
        target, refs, peak = self.target, self.target.refs["big"], 0.0
        with target.refmount(self.workdir, refs) as mount:
            self.out.record(Figure.READY, Tool.REFMOUNT, mount.ready_seconds)
            self.first_byte_then_read_twice(mount, Tool.REFMOUNT)
            self.out.verify[Tool.REFMOUNT] = verify(
                self.data, "big", lambda i: (mount.path / "big" / str(i)).read_bytes()
            )
            peak = max(peak, mount.rss().get("VmHWM", 0))
        with target.refmount(self.workdir, refs) as mount:
            self.eight_readers(mount, Tool.REFMOUNT)
            peak = max(peak, mount.rss().get("VmHWM", 0))
        with target.refmount(self.workdir, refs) as mount:
            milliseconds = pread_picks(
                lambda i: mount.path / "big" / str(i), self.picks, self.budget
            )
            self.out.record(Figure.RANDOM, Tool.REFMOUNT, milliseconds)
            peak = max(peak, mount.rss().get("VmHWM", 0))
        peak = max(peak, self.refmount_many())
        self.out.record(Figure.PEAK_RSS, Tool.REFMOUNT, peak)

    def refmount_many(self) -> float:
        """The 4 KiB files of the many set in order, JSON and Parquet; return the peak RSS."""
        peak = 0.0
        for refs, ready, files in (
            (self.target.refs["many"], Figure.READY_MANY_JSON, Figure.MANY_JSON),
            (self.target.refs["many_parq"], Figure.READY_MANY_PARQUET, Figure.MANY_PARQUET),
        ):
            with self.target.refmount(self.workdir, refs) as mount:
                self.out.record(ready, Tool.REFMOUNT, mount.ready_seconds)
                paths = [mount.path / k for k in self.many_keys]
                run = bounded(paths, read_whole, self.budget)
                self.out.record(files, Tool.REFMOUNT, run.per_second())
                peak = max(peak, mount.rss().get("VmHWM", 0))
        return peak

    def refmount_tuned(self) -> None:
        """One reader on a mount with ``-o tune_kernel``, which must say it tuned the kernel."""
        refs = self.target.refs["big"]
        with self.target.refmount(self.workdir, refs, "-o", "tune_kernel") as mount:
            run = bounded([mount.path / k for k in self.big_keys], read_whole, self.budget)
            tuning = [
                line
                for line in mount.log.read_text(errors="replace").splitlines()
                if "kernel tuning for" in line or "cannot tune the kernel" in line
            ]
            if not tuning or "cannot tune" in tuning[0]:
                raise RuntimeError(f"the kernel was not tuned: {(tuning or ['no log line'])[0]}")
            self.out.record(Figure.SEQ_1_TUNED, Tool.REFMOUNT, run.mib_s())

    # ---- fsspec cat, in process, one key at a time

    def cat(self) -> None:
        """In-process ``ReferenceFileSystem.cat`` of each key in turn."""
        started = time.perf_counter()
        fs = self.target.reference_fs(self.target.refs["big"])
        fs.cat(self.big_keys[0])
        self.out.record(Figure.READY, Tool.CAT, time.perf_counter() - started)
        ttfb = []
        for i in self.cold:
            begun = time.perf_counter()
            fs.cat_file(f"big/{i}", 0, 1)
            ttfb.append(time.perf_counter() - begun)
        self.out.record(Figure.TTFB, Tool.CAT, 1000 * statistics.median(ttfb))
        loop = functools.partial(bounded, self.big_keys, functools.partial(cat_length, fs))
        run = self.sequential(Tool.CAT, lambda: loop(self.budget))
        self.out.record(Figure.SEQ_CPU, Tool.CAT, run.cpu_ms_per_mib())  # it runs in process
        self.out.verify[Tool.CAT] = verify(self.data, "big", lambda i: fs.cat(f"big/{i}"))
        run = bounded(
            self.picks, lambda p: len(fs.cat_file(f"big/{p[0]}", p[1], p[1] + 4 * KIB)), self.budget
        )
        self.out.record(Figure.RANDOM, Tool.CAT, 1000 * run.seconds / max(1, run.count))
        self.cat_many()

    def cat_many(self) -> None:
        """``cat`` of each 4 KiB key of the many set, JSON and Parquet."""
        for refs, ready, files in (
            (self.target.refs["many"], Figure.READY_MANY_JSON, Figure.MANY_JSON),
            (self.target.refs["many_parq"], Figure.READY_MANY_PARQUET, Figure.MANY_PARQUET),
        ):
            started = time.perf_counter()
            many_fs = self.target.reference_fs(refs)
            many_fs.cat(self.many_keys[0])
            self.out.record(ready, Tool.CAT, time.perf_counter() - started)
            run = bounded(self.many_keys, functools.partial(cat_length, many_fs), self.budget)
            self.out.record(files, Tool.CAT, run.per_second())

    # ---- the floors: the same chunks from memory, through the least pyfuse3 or libfuse3 can do

    def floor(self) -> None:
        """The pyfuse3 floor: one reader, 8 readers, tuned, and (local) the 4 KiB files."""
        workdir, source = self.workdir, self.data.big_file
        with floor_mount(workdir, source) as mount:
            self.first_byte_then_read_twice(mount, Tool.FLOOR)
        with floor_mount(workdir, source) as mount:
            self.eight_readers(mount, Tool.FLOOR)
        with floor_mount(workdir, source, tuned=True) as mount:
            self.tuned_reader(mount, Tool.FLOOR)
        if self.target.name == "local":  # what a 4 KiB file costs pyfuse3 alone: lookup to release
            with floor_mount(workdir, source, listed=self.data.many_chunks) as mount:
                paths = [mount.path / k for k in self.many_keys]
                run = bounded(paths, read_whole, self.budget)
                for figure in (Figure.MANY_JSON, Figure.MANY_PARQUET):
                    self.out.record(figure, Tool.FLOOR, run.per_second())

    def c_floor(self, tool: Tool, threads: str) -> None:
        """The C floor (``single`` or ``multi`` threaded): one reader, 8 readers, tuned."""
        workdir, source = self.workdir, self.data.big_file
        with c_floor_mount(workdir, source, threads) as mount:
            self.first_byte_then_read_twice(mount, tool)
        with c_floor_mount(workdir, source, threads) as mount:
            self.eight_readers(mount, tool)
        with c_floor_mount(workdir, source, threads, tuned=True) as mount:
            self.tuned_reader(mount, tool)

    # ---- the plain local files: what the same loop reaches without FUSE

    def plain(self) -> None:
        """The chunks as plain files (``DataSet.write_plain_chunks``): first byte, one reader,
        re-read and 8 readers, with the loop the mounts are read with."""
        paths = [self.plain_directory / str(i) for i in range(self.data.big_chunks)]
        if not all(path.exists() for path in paths):
            raise RuntimeError("the plain chunk files were not written")
        ttfb = [first_byte(paths[i]) for i in self.cold]
        self.out.record(Figure.TTFB, Tool.PLAIN, 1000 * statistics.median(ttfb))
        run = self.sequential(Tool.PLAIN, lambda: bounded(paths, read_whole, self.budget))
        reread = bounded(paths[: run.count], read_whole, self.budget)
        self.out.record(Figure.REREAD, Tool.PLAIN, reread.mib_s())
        eight = bounded_parallel(paths, read_whole, self.budget, 8)
        self.out.record(Figure.SEQ_8, Tool.PLAIN, eight.mib_s())

    # ---- fsspec.fuse (mounted at big/ and many/: it cannot mount a reference set's root)

    def fuse_big(self) -> None:
        """fsspec.fuse on the big set: ready, first byte, one reader, re-read, 8 readers, random."""
        target, refs, budget = self.target, self.target.refs["big"], self.budget
        names = [k.split("/")[1] for k in self.big_keys]
        with target.fsspec_fuse(self.workdir, refs, "big/") as mount:
            self.out.record(Figure.READY, Tool.FUSE, mount.ready_seconds)
            ttfb = [first_byte(mount.path / str(i)) for i in self.cold]
            self.out.record(Figure.TTFB, Tool.FUSE, 1000 * statistics.median(ttfb))
            paths = [mount.path / name for name in names]
            run = self.sequential(Tool.FUSE, lambda: bounded(paths, read_whole, budget), mount)
            reread = bounded(paths[: run.count], read_whole, budget)
            self.out.record(Figure.REREAD, Tool.FUSE, reread.mib_s())
            self.out.verify[Tool.FUSE] = verify(
                self.data, "big", lambda i: (mount.path / str(i)).read_bytes()
            )
        with target.fsspec_fuse(self.workdir, refs, "big/") as mount:
            paths = [mount.path / name for name in names]
            run = bounded_parallel(paths, read_whole, budget, 8)
            self.out.record(Figure.SEQ_8, Tool.FUSE, run.mib_s())
        with target.fsspec_fuse(self.workdir, refs, "big/") as mount:
            milliseconds = pread_picks(lambda i: mount.path / str(i), self.picks[:200], budget)
            self.out.record(Figure.RANDOM, Tool.FUSE, milliseconds)

    def fuse_many(self) -> None:
        """fsspec.fuse on the many set (JSON): ready and the 4 KiB files in order."""
        with self.target.fsspec_fuse(self.workdir, self.target.refs["many"], "many/") as mount:
            self.out.record(Figure.READY_MANY_JSON, Tool.FUSE, mount.ready_seconds)
            paths = [mount.path / k.split("/")[1] for k in self.many_keys]
            run = bounded(paths, read_whole, self.budget)
            self.out.record(Figure.MANY_JSON, Tool.FUSE, run.per_second())

    # ---- raw: the same ranges straight from the target, concurrently where it helps

    def raw(self) -> None:
        """The raw reader: first byte, the big set, the many set and the random reads."""
        reader = self.target.raw_reader
        ttfb = [reader.first_byte("big", i * MIB) for i in self.cold]
        self.out.record(Figure.TTFB, Tool.RAW, 1000 * statistics.median(ttfb))
        random_ranges = [(c * MIB + o, 4 * KIB) for c, o in self.picks]
        for figure, ranges in (
            (Figure.SEQ_1, self.data.big_ranges()),
            (Figure.MANY_JSON, self.data.many_ranges()),
            (Figure.RANDOM, random_ranges),
        ):
            which = "many" if figure is Figure.MANY_JSON else "big"
            batches = [ranges[i : i + 256] for i in range(0, len(ranges), 256)]
            loop = functools.partial(bounded, batches, functools.partial(reader.read_ranges, which))
            if figure is Figure.SEQ_1:
                run = self.sequential(Tool.RAW, functools.partial(loop, self.budget))
            else:
                run = loop(self.budget)
            done = sum(len(b) for b in batches[: run.count])
            if figure is Figure.SEQ_1:
                self.out.record(Figure.SEQ_8, Tool.RAW, run.mib_s())
            elif figure is Figure.MANY_JSON:
                self.out.record(Figure.MANY_JSON, Tool.RAW, done / run.seconds)
                self.out.record(Figure.MANY_PARQUET, Tool.RAW, done / run.seconds)
            else:
                self.out.record(Figure.RANDOM, Tool.RAW, 1000 * run.seconds / max(1, done))

    def measure(self) -> ReadFigures:
        """Every tool's figures of this round."""
        self.attempt(Tool.REFMOUNT, "big", self.refmount_big)
        self.attempt(Tool.REFMOUNT, Figure.SEQ_1_TUNED, self.refmount_tuned)
        self.attempt(Tool.CAT, "cat", self.cat)
        self.attempt(Tool.FLOOR, "floor", self.floor)
        self.attempt(Tool.CFLOOR, "cfloor", lambda: self.c_floor(Tool.CFLOOR, "single"))
        self.attempt(Tool.CFLOOR_MT, "cfloor_mt", lambda: self.c_floor(Tool.CFLOOR_MT, "multi"))
        self.attempt(Tool.FUSE, "big", self.fuse_big)
        self.attempt(Tool.FUSE, Figure.MANY_JSON, self.fuse_many)
        self.attempt(Tool.RAW, "raw", self.raw)
        if self.target.name == "local":
            self.attempt(Tool.PLAIN, "plain", self.plain)
        local = self.target.name == "local"
        concurrency = RawReader.concurrency
        self.out.raw_note = (
            "os.pread, one thread" if local else f"{concurrency} concurrent ranged GETs"
        )
        return self.out
