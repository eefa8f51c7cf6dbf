"""How the latency section reaches a target and reads it: the reference sets it writes, fresh
refmount mounts read by GNU ``cat`` and GDAL, and the in-process readers (fsspec ``cat`` one key
at a time and every key at once, zarr-python through fsspec)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import zarr
import zarr.storage

from bench.common import KIB, MIB
from bench.mounts import Mount
from bench.processes import process_cpu_seconds
from bench.section import Context
from bench.tools import refmount_mount
from tests.support.datasets import zarray

SAMPLE = 1000
"""How many keys fsspec ``cat`` reads one at a time before its rate is extrapolated."""
SIZES = {"big": MIB, "many": 4 * KIB}


@dataclass(frozen=True)
class Endpoint:
    """How refmount and fsspec reach one target, directly or through the proxy."""

    protocol: str
    urls: dict[str, str]
    """The target file of each array."""
    refmount_options: tuple[str, ...] = ()
    remote_options: dict[str, Any] = field(default_factory=dict)


def write_set(path: Path, endpoint: Endpoint, counts: dict[str, int]) -> Path:
    """A JSON reference set of both arrays (uncompressed ``|u1`` zarr v2 arrays, chunks back
    to back in their target files) pointing at ``endpoint``."""
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2})}
    for name, count in counts.items():
        size = SIZES[name]
        refs[f"{name}/.zarray"] = json.dumps(zarray([count * size], [size], dtype="|u1"))
        url = endpoint.urls[name]
        for index in range(count):
            refs[f"{name}/{index}"] = [url, index * size, size]
    path.write_text(json.dumps({"version": 1, "refs": refs}))
    return path


def refmount(
    context: Context, refs: Path, endpoint: Endpoint, env: dict[str, str]
) -> contextlib.AbstractContextManager[Mount]:
    """A fresh refmount mount of ``refs`` over ``endpoint``."""
    return refmount_mount(context.workdir, "latency", refs, endpoint.refmount_options, env)


def cat_in_order(mount: Mount, name: str, count: int) -> tuple[float, float]:
    """Seconds for GNU ``cat`` of the chunk files of ``name`` in key order, and the daemon's
    CPU seconds meanwhile."""
    files = [str(mount.path / name / str(index)) for index in range(count)]
    cpu = process_cpu_seconds(mount.process.pid)
    started = time.perf_counter()
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
    seconds = time.perf_counter() - started
    return seconds, process_cpu_seconds(mount.process.pid) - cpu


def gdal_stats(mount: Mount, name: str) -> float:
    """Seconds for ``gdalmdiminfo -stats`` to read array ``name`` through the mount."""
    started = time.perf_counter()
    subprocess.run(
        ["gdalmdiminfo", "-stats", "-array", name, str(mount.path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        env={**os.environ, "GDAL_NUM_THREADS": "1"},
    )
    return time.perf_counter() - started


def reference_fs(refs: Path, endpoint: Endpoint, *, asynchronous: bool = False) -> Any:
    """An in-process fsspec ``ReferenceFileSystem`` of ``refs`` over ``endpoint``."""
    remote = (
        dict(endpoint.remote_options, asynchronous=True)
        if asynchronous
        else dict(endpoint.remote_options)
    )
    return fsspec.filesystem(
        "reference",
        fo=str(refs),
        remote_protocol=endpoint.protocol,
        remote_options=remote,
        asynchronous=asynchronous,
        skip_instance_cache=True,
    )


def zarr_read(refs: Path, endpoint: Endpoint, name: str, concurrency: int | None) -> float:
    """Seconds for zarr-python to read array ``name`` whole through fsspec (``concurrency``
    None: its default)."""
    settings = {} if concurrency is None else {"async.concurrency": concurrency}
    with zarr.config.set(settings):
        store = zarr.storage.FsspecStore(reference_fs(refs, endpoint, asynchronous=True))
        started = time.perf_counter()
        array = zarr.open_array(store=store, path=name, mode="r", zarr_format=2)
        array[:]
        return time.perf_counter() - started


def cat_one_key(refs: Path, endpoint: Endpoint, name: str, count: int) -> tuple[float, int]:
    """Seconds for fsspec ``cat`` of the first ``SAMPLE`` keys of ``name`` one at a time, and
    how many keys that was."""
    fs = reference_fs(refs, endpoint)
    keys = [f"{name}/{index}" for index in range(min(SAMPLE, count))]
    started = time.perf_counter()
    for key in keys:
        fs.cat(key)
    return time.perf_counter() - started, len(keys)


def cat_all_keys(refs: Path, endpoint: Endpoint, name: str, count: int) -> float:
    """Seconds for one fsspec ``cat`` of every key of ``name``."""
    fs = reference_fs(refs, endpoint)
    started = time.perf_counter()
    fs.cat([f"{name}/{index}" for index in range(count)])
    return time.perf_counter() - started


def rate(name: str, count: int, seconds: float) -> float:
    """MiB/s for 1 MiB chunks, files/s for 4 KiB ones."""
    return count * SIZES[name] / MIB / seconds if name == "big" else count / seconds
