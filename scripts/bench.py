"""Benchmark refmount against in-process fsspec on the same data, in the same run.

Figures are reported as ratios against the baseline measured in this run, never as absolute
goals. Run it with ``scripts/bench`` (options: ``--help``). Targets are local files, an HTTP
range server and a local S3 server (moto), all on 127.0.0.1 and started here; everything is
generated under a temporary directory and removed afterwards.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.integration.datasets import zarray
from tests.servers import DUMMY_AWS_ENVIRONMENT, RangeHTTPServer, create_bucket, moto_s3

MIB = 1024 * 1024


@dataclass
class Daemon:
    """A foreground refmount process and how long it took to answer."""

    process: subprocess.Popen[bytes]
    mountpoint: Path
    ready_seconds: float

    def rss_mib(self) -> tuple[float, float]:
        """Return the daemon's current and peak resident memory in MiB."""
        fields: dict[str, float] = {}
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    fields[name] = int(value.split()[0]) / 1024
        return fields["VmRSS"], fields["VmHWM"]


def is_mounted(path: Path) -> bool:
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == str(path) for line in mounts)


@contextmanager
def mounted(refs: Path, mountpoint: Path, *options: str) -> Iterator[Daemon]:
    """Run ``refmount -f`` and yield once the mount answers; always unmount."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    command = [sys.executable, "-m", "refmount", "-f", *options, str(refs), str(mountpoint)]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        while not is_mounted(mountpoint):
            if process.poll() is not None:
                raise RuntimeError(f"refmount exited with {process.returncode}")
            time.sleep(0.002)
        os.stat(mountpoint)  # answered by the daemon
        yield Daemon(process, mountpoint, time.perf_counter() - started)
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)
        process.wait(timeout=30)


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def make_big(
    directory: Path, chunks: int, chunk_size: int, url: str | None = None
) -> tuple[Path, list[str]]:
    """A JSON set of ``chunks`` keys of ``chunk_size`` bytes each, all in one target file.

    ``url`` is where the references say the target is (default: the local file).
    """
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "big.bin"
    if not target.exists() or target.stat().st_size < chunks * chunk_size:
        rng = np.random.default_rng(0)
        with open(target, "wb") as handle:
            for _ in range(chunks):
                handle.write(rng.bytes(chunk_size))
    refs: dict[str, object] = {
        ".zgroup": '{"zarr_format": 2}',
        "big/.zarray": json.dumps({"shape": [chunks * chunk_size], "chunks": [chunk_size]}),
    }
    keys = []
    for i in range(chunks):
        key = f"big/{i}"
        refs[key] = [url or str(target), i * chunk_size, chunk_size]
        keys.append(key)
    path = directory / f"big-{len(list(directory.glob('big*.json')))}.json"
    path.write_text(json.dumps({"version": 1, "refs": refs}))
    return path, keys


def make_parquet(directory: Path, references: int, record_size: int = 100_000) -> Path:
    """A Parquet set of ``references`` chunks on a square-ish 2-D grid, one shared target."""
    side = int(references**0.5)
    rows, columns = side, references // side
    total = rows * columns
    root = directory / "huge.parq"
    (root / "v").mkdir(parents=True, exist_ok=True)
    target = str(directory / "big" / "big.bin")
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "v/.zarray": zarray([rows * 10, columns * 10], [10, 10]),
    }
    (root / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": record_size}))
    for record in range(-(-total // record_size)):
        start = record * record_size
        count = min(record_size, total - start)
        offsets = (np.arange(start, start + count, dtype="int64") * 100) % (256 * MIB)
        table = pa.table(
            {
                "path": pa.array([target] * count).dictionary_encode(),
                "offset": pa.array(offsets),
                "size": pa.array(np.full(count, 100, dtype="int64")),
                "raw": pa.nulls(count, pa.binary()),
            }
        )
        pq.write_table(table, root / "v" / f"refs.{record}.parq", compression="zstd")
    return root


def read_file(path: Path) -> int:
    with open(path, "rb", buffering=0) as handle:
        total = 0
        while block := handle.read(1 * MIB):
            total += len(block)
        return total


def bench_read(
    workdir: Path,
    chunks: int,
    chunk_size: int,
    url: str | None = None,
    options: tuple[str, ...] = (),
    fsspec_options: dict[str, object] | None = None,
) -> dict[str, float]:
    """Sequential reads of every chunk: in-process fsspec cat against refmount (1 and 8)."""
    refs, keys = make_big(workdir / "big", chunks, chunk_size, url)
    megabytes = chunks * chunk_size / MIB
    protocol = (url or "file://").split("://")[0]
    fs = fsspec.filesystem(
        "reference", fo=str(refs), remote_protocol=protocol, remote_options=fsspec_options or {}
    )
    for key in keys:  # connect, and warm the local target's page cache for both sides
        fs.cat(key)
    fsspec_seconds = timed(lambda: [fs.cat(key) for key in keys])
    result = {"fsspec_cat_mib_s": megabytes / fsspec_seconds}
    with mounted(refs, workdir / "mnt-big", *options) as daemon:
        paths = [daemon.mountpoint / key for key in keys]
        result["refmount_1_reader_mib_s"] = megabytes / timed(lambda: [read_file(p) for p in paths])
        result["reread_page_cache_mib_s"] = megabytes / timed(lambda: [read_file(p) for p in paths])
    with (
        mounted(refs, workdir / "mnt-big8", *options) as daemon,
        concurrent.futures.ThreadPoolExecutor(8) as pool,
    ):
        paths = [daemon.mountpoint / key for key in keys]
        seconds = timed(lambda: list(pool.map(read_file, paths)))
        result["refmount_8_readers_mib_s"] = megabytes / seconds
        result["daemon_peak_rss_mib"] = daemon.rss_mib()[1]
    result["ratio_1_reader_vs_fsspec"] = (
        result["refmount_1_reader_mib_s"] / result["fsspec_cat_mib_s"]
    )
    result["ratio_8_readers_vs_fsspec"] = (
        result["refmount_8_readers_mib_s"] / result["fsspec_cat_mib_s"]
    )
    return result


def bench_parquet(workdir: Path, references: int) -> dict[str, float]:
    root = make_parquet(workdir, references)
    result: dict[str, float] = {"references": float(references)}
    with mounted(root, workdir / "mnt-pq") as daemon:
        result["ready_s"] = daemon.ready_seconds
        result["rss_after_mount_mib"] = daemon.rss_mib()[0]
        array = daemon.mountpoint / "v"
        first = next(name for name in ("0.0",) if (array / name).exists())
        result["first_chunk_read_s"] = timed(lambda: (array / first).read_bytes())
        result["rss_after_first_chunk_mib"] = daemon.rss_mib()[0]
        listing = timed(lambda: subprocess.run(["ls", "-f", str(array)], capture_output=True))
        result["ls_f_array_s"] = listing
        result["peak_rss_mib"] = daemon.rss_mib()[1]
    baseline = timed(lambda: fsspec.filesystem("reference", fo=str(root), remote_protocol="file"))
    result["fsspec_open_s"] = baseline
    return result


def bench_http(workdir: Path, chunks: int, chunk_size: int) -> dict[str, float]:
    """The same reads with the target behind an HTTP range server on 127.0.0.1."""
    directory = workdir / "remote"
    make_big(directory, chunks, chunk_size)
    with RangeHTTPServer(directory=directory) as server:
        return bench_read(directory, chunks, chunk_size, server.url_for("big.bin"))


def bench_s3(workdir: Path, chunks: int, chunk_size: int) -> dict[str, float]:
    """The same reads with the target in a local S3 server (moto) reached through s3fs."""
    os.environ.update(DUMMY_AWS_ENVIRONMENT)
    directory = workdir / "remote"
    make_big(directory, chunks, chunk_size)
    with moto_s3() as endpoint:
        bucket = create_bucket(endpoint, "bench")
        url = bucket.put("big.bin", (directory / "big.bin").read_bytes())
        return bench_read(
            directory,
            chunks,
            chunk_size,
            url,
            ("-o", f"s3_endpoint_url={endpoint}"),
            {"endpoint_url": endpoint},
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=512, help="1 MiB chunks, local target")
    parser.add_argument("--remote-chunks", type=int, default=64, help="the same, HTTP and S3")
    parser.add_argument("--chunk-size", type=int, default=MIB)
    parser.add_argument("--parquet-refs", type=int, default=1_000_000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="refmount-bench-") as tmp:
        workdir = Path(tmp)
        figures = {
            "read_local_file": bench_read(workdir, args.chunks, args.chunk_size),
            "read_http": bench_http(workdir, args.remote_chunks, args.chunk_size),
            "read_s3": bench_s3(workdir, args.remote_chunks, args.chunk_size),
            "parquet": bench_parquet(workdir, args.parquet_refs),
            "other_cpu_load": os.getloadavg()[0],
        }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
