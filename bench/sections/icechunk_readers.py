"""How the icechunk section makes its repositories and reads them: repositories of virtual
chunks written at run time with the icechunk package (``set_virtual_refs_arr``: the whole
chunk table from numpy columns in one call), refmount mounts of them read by GNU ``cat``,
and zarr-python reading the same array in process through Icechunk's store."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import MIB
from bench.mounts import Mount
from bench.tools import refmount_mount

READ_ARRAY = "big"
"""The array of 1 MiB virtual chunks read through the mount and in process."""
HUGE_ARRAY = "v"
"""The array of many small virtual chunks whose mount is timed."""
HUGE_CHUNK = 100
"""Bytes per chunk of the huge array (one byte per element, 10 x 10 elements)."""
HUGE_COLUMNS = 1000
"""Chunks along the huge array's second dimension: one directory holds this many files."""


@dataclass(frozen=True)
class Container:
    """Where an array's virtual chunks live: the prefix the repository declares, Icechunk's
    store for it and the access a reader is given."""

    prefix: str
    store: Any
    access: Any

    def authorization(self) -> dict[str, Any]:
        """``authorize_virtual_chunk_access`` for this container alone."""
        from icechunk.credentials import containers_credentials

        authorization: dict[str, Any] = containers_credentials({self.prefix: self.access})
        return authorization


def local_container(directory: Path) -> Container:
    """The container of the files in ``directory``."""
    import icechunk
    from icechunk.credentials import LocalFileSystemAccess

    prefix = f"file://{directory}/"
    return Container(prefix, icechunk.local_filesystem_store(str(directory)), LocalFileSystemAccess)


def http_container(base_url: str) -> Container:
    """The container of the files an HTTP server at ``base_url`` serves."""
    import icechunk
    from icechunk.credentials import HttpAccess

    return Container(f"{base_url}/", icechunk.http_store(), HttpAccess)


def s3_container(bucket: str, endpoint: str) -> Container:
    """The container of bucket ``bucket`` of the S3 server at ``endpoint`` (credentials from
    the environment, as the mount finds them)."""
    import icechunk
    import icechunk.credentials

    store = icechunk.s3_store(
        region="us-east-1", endpoint_url=endpoint, allow_http=True, force_path_style=True
    )
    return Container(f"s3://{bucket}/", store, icechunk.credentials.s3_from_env_credentials())


def create_repository(path: Path, container: Container) -> Any:
    """A new repository at ``path`` that declares ``container``; its writable session."""
    import icechunk

    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(container.prefix, container.store)
    )
    icechunk.set_logs_filter("error")  # not its warnings about local repositories
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)),
        config,
        authorize_virtual_chunk_access=container.authorization(),
    )
    return repository.writable_session("main")


def make_huge_repository(path: Path, chunks: int, target: Path) -> tuple[float, int]:
    """A repository with one 2-D ``|u1`` array of about ``chunks`` virtual chunks of
    ``HUGE_CHUNK`` bytes (``HUGE_COLUMNS`` a row) into ``target``; seconds it took to write
    and commit, and how many chunks it has."""
    import zarr

    started = time.perf_counter()
    session = create_repository(path, local_container(target.parent))
    rows = max(1, chunks // HUGE_COLUMNS)
    columns = min(chunks, HUGE_COLUMNS)
    total = rows * columns
    root = zarr.group(store=session.store)
    root.create_array(
        HUGE_ARRAY, shape=(rows * 10, columns * 10), chunks=(10, 10), dtype="|u1", compressors=None
    )
    span = target.stat().st_size // HUGE_CHUNK * HUGE_CHUNK
    offsets = np.arange(total, dtype=np.uint64) * HUGE_CHUNK % span
    lengths = np.full(total, HUGE_CHUNK, dtype=np.uint64)
    url = f"file://{target}"
    failed = session.store.set_virtual_refs_arr(
        f"/{HUGE_ARRAY}", (rows, columns), [url] * total, offsets, lengths
    )
    if failed:
        raise RuntimeError(f"{len(failed)} virtual references refused")
    session.commit("huge")
    return time.perf_counter() - started, total


def make_read_repository(path: Path, container: Container, url: str, count: int) -> Path:
    """A repository whose array ``READ_ARRAY`` is ``count`` uncompressed 1 MiB virtual chunks,
    back to back in the object at ``url`` (inside ``container``), each with a checksum (a
    last-modified time, now: the object was written before): Icechunk checks it on every
    read, in the mount as in process."""
    import zarr

    session = create_repository(path, container)
    root = zarr.group(store=session.store)
    root.create_array(
        READ_ARRAY, shape=(count * MIB,), chunks=(MIB,), dtype="|u1", compressors=None
    )
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=2)
    failed = session.store.set_virtual_refs_arr(
        f"/{READ_ARRAY}",
        (count,),
        [url] * count,
        np.arange(count, dtype=np.uint64) * MIB,
        np.full(count, MIB, dtype=np.uint64),
        checksum=later,
    )
    if failed:
        raise RuntimeError(f"{len(failed)} virtual references refused")
    session.commit("read")
    return path


def mount_repository(
    workdir: Path, name: str, repository: Path, env: dict[str, str]
) -> AbstractContextManager[Mount]:
    """A fresh refmount mount of ``repository`` with every container authorized."""
    options = ("--authorize-container", "all")
    return refmount_mount(workdir, name, repository, options, env)


def chunk_files(mount: Mount, count: int) -> Iterator[str]:
    """The paths of ``READ_ARRAY``'s chunk files in key order."""
    return (str(mount.path / READ_ARRAY / "c" / str(index)) for index in range(count))


def zarr_read(repository: Path, container: Container) -> float:
    """Seconds for zarr-python to read ``READ_ARRAY`` whole through Icechunk's store, at
    zarr's default ``async.concurrency``."""
    import icechunk
    import zarr

    opened = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(repository)),
        authorize_virtual_chunk_access=container.authorization(),
    )
    session = opened.readonly_session(branch="main")
    started = time.perf_counter()
    array = zarr.open_array(store=session.store, path=READ_ARRAY, mode="r")
    array[:]
    return time.perf_counter() - started
