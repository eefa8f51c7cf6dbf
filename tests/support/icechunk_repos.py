"""Icechunk repositories built for the tests with the icechunk package itself: groups with
attributes, native, inline and virtual chunks (into local files, with and without a
checksum), an array with unwritten chunks, two commits on ``main``, a tag and a branch."""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ICECHUNK_MISSING = (
    None
    if importlib.util.find_spec("icechunk") is not None
    else "the icechunk package is not installed (it needs Python 3.12 or later)"
)
requires_icechunk = pytest.mark.skipif(ICECHUNK_MISSING is not None, reason=ICECHUNK_MISSING or "")

VIRTUAL_CHUNK = 250
"""Elements per chunk of the virtual array (int32: 1000 bytes each)."""


@dataclass
class BuiltRepository:
    """A repository made by ``build_repository`` and what each version holds."""

    path: Path
    data: Path
    """The file the virtual chunks of ``virtual/v`` point into."""
    other: Path
    """The file ``virtual/w``'s chunks point into (a second container)."""
    container: str
    other_container: str
    first: str
    """The first commit's snapshot id (tagged ``v1``; branch ``dev`` starts there)."""
    second: str
    """``main``'s tip: the first commit with ``small`` rewritten."""
    dev: str
    """``dev``'s tip: the first commit with ``obs/temp`` rewritten."""
    arrays: dict[str, dict[str, np.ndarray[Any, Any]]] = field(default_factory=dict)
    """Snapshot id → array path → values."""


def _write_arrays(session: Any, values: dict[str, np.ndarray[Any, Any]]) -> None:
    import zarr

    root = zarr.open_group(store=session.store, mode="a")
    for path, data in values.items():
        array = root[path]
        assert isinstance(array, zarr.Array)
        array[...] = data


def build_repository(base: Path) -> BuiltRepository:
    """Build the test repository below ``base``; return what it holds."""
    import icechunk
    import zarr
    from icechunk.credentials import LocalFileSystemAccess

    rng = np.random.default_rng(26)
    data_dir, other_dir = base / "data", base / "other"
    data_dir.mkdir(parents=True)
    other_dir.mkdir()
    virtual = np.arange(4 * VIRTUAL_CHUNK, dtype="<i4")
    data = data_dir / "virtual.bin"
    data.write_bytes(virtual.tobytes())
    other = other_dir / "other.bin"
    other.write_bytes(virtual[::-1].tobytes())
    container, other_container = f"file://{data_dir}/", f"file://{other_dir}/"
    config = icechunk.RepositoryConfig.default()
    for prefix, directory in ((container, data_dir), (other_container, other_dir)):
        store = icechunk.local_filesystem_store(str(directory))
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    path = base / "repo"
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)),
        config,
        authorize_virtual_chunk_access={
            container: LocalFileSystemAccess,
            other_container: LocalFileSystemAccess,
        },
    )
    session = repository.writable_session("main")
    root = zarr.group(store=session.store, attributes={"title": "refmount test"})
    obs = root.create_group("obs", attributes={"units": "K"})
    temp = rng.standard_normal((60, 80))
    obs.create_array("temp", shape=temp.shape, chunks=(30, 40), dtype="f8")[...] = temp
    small = np.array([1, 2, 3, 4], dtype="u1")
    root.create_array("small", shape=(4,), chunks=(2,), dtype="u1")[...] = small
    sparse_array = root.create_array(
        "sparse", shape=(100, 100), chunks=(50, 50), dtype="i4", fill_value=-1
    )
    sparse = np.full((100, 100), -1, dtype="i4")
    sparse[:50, 50:] = rng.integers(0, 1000, (50, 50))
    sparse_array[:50, 50:] = sparse[:50, 50:]
    group = root.create_group("virtual")
    for name in ("v", "w"):
        group.create_array(
            name, shape=virtual.shape, chunks=(VIRTUAL_CHUNK,), dtype="<i4", compressors=None
        )
    # Icechunk keeps last-modified in whole seconds: a checksum at the next second holds
    stamp = datetime.datetime.fromtimestamp(int(data.stat().st_mtime) + 1, datetime.UTC)
    size = VIRTUAL_CHUNK * 4
    for index in range(4):
        checksum = stamp if index < 2 else None
        session.store.set_virtual_ref(
            f"virtual/v/c/{index}", f"{container}virtual.bin",
            offset=index * size, length=size, checksum=checksum,
        )  # fmt: skip
        session.store.set_virtual_ref(
            f"virtual/w/c/{index}", f"{other_container}other.bin",
            offset=index * size, length=size,
        )  # fmt: skip
    first = session.commit("first")
    repository.create_tag("v1", first)
    repository.create_branch("dev", first)
    base_values = {
        "obs/temp": temp,
        "small": small,
        "sparse": sparse,
        "virtual/v": virtual,
        "virtual/w": virtual[::-1],
    }
    session = repository.writable_session("main")
    changed_small = np.array([9, 8, 7, 6], dtype="u1")
    _write_arrays(session, {"small": changed_small})
    second = session.commit("second")
    session = repository.writable_session("dev")
    changed_temp = temp * 2
    _write_arrays(session, {"obs/temp": changed_temp})
    dev = session.commit("dev")
    built = BuiltRepository(path, data, other, container, other_container, first, second, dev)
    built.arrays[first] = base_values
    built.arrays[second] = {**base_values, "small": changed_small}
    built.arrays[dev] = {**base_values, "obs/temp": changed_temp}
    return built


def touch_later(path: Path, seconds: float = 5.0) -> None:
    """Set ``path``'s modification time ``seconds`` after now (so a checksum no longer holds)."""
    later = datetime.datetime.now(datetime.UTC).timestamp() + seconds
    os.utime(path, (later, later))


def open_store(built: BuiltRepository, snapshot: str, containers: tuple[str, ...] = ()) -> Any:
    """Return a read-only Icechunk store of ``snapshot``, with ``containers`` authorized."""
    import icechunk
    from icechunk.credentials import LocalFileSystemAccess

    repository = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(built.path)),
        authorize_virtual_chunk_access=dict.fromkeys(containers, LocalFileSystemAccess),
    )
    return repository.readonly_session(snapshot_id=snapshot).store


def store_keys(store: Any) -> list[str]:
    """Return every key Icechunk's store lists (metadata and chunks)."""

    async def keys() -> list[str]:
        return [key async for key in store.list()]

    return asyncio.run(keys())


def store_get(store: Any, key: str) -> bytes:
    """Return the whole value of ``key`` as Icechunk's store gives it."""
    from zarr.core.buffer import default_buffer_prototype

    async def get() -> bytes:
        found = await store.get(key, default_buffer_prototype())
        assert found is not None, key
        return bytes(found.to_bytes())

    return asyncio.run(get())


@dataclass
class RemoteRepository:
    """A repository made by ``build_remote_repository`` on the local S3 server."""

    url: str
    """``s3://bucket/prefix``."""
    storage: Any
    """Icechunk's storage of it (to open it in the tests)."""
    container: str
    """``http://127.0.0.1:PORT/data/``: ``virtual/v``'s chunks lie there (with ETags)."""
    other_container: str
    """``http://127.0.0.1:PORT/other/``: ``virtual/w``'s chunks (no checksum)."""
    data_path: str
    """The path on the HTTP server of the file ``virtual/v``'s chunks point into."""
    arrays: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)


def remote_storage(endpoint_url: str, bucket: str, prefix: str) -> Any:
    """Return Icechunk's storage of ``s3://bucket/prefix`` on the local S3 server
    (credentials from the environment: ``aws_env``)."""
    import icechunk

    return icechunk.s3_storage(
        bucket=bucket,
        prefix=prefix,
        region="us-east-1",
        endpoint_url=endpoint_url,
        allow_http=True,
        force_path_style=True,
        from_env=True,
    )


def build_remote_repository(
    endpoint_url: str, bucket: str, prefix: str, http: Any
) -> RemoteRepository:
    """Build a repository at ``s3://bucket/prefix`` on the local S3 server whose virtual
    chunks lie on ``http`` (a ``RangeHTTPServer``): a group with attributes, native and
    inline chunks, and two virtual arrays in two containers of that server."""
    import icechunk
    import zarr
    from icechunk.credentials import HttpAccess

    rng = np.random.default_rng(2626)
    virtual = np.arange(4 * VIRTUAL_CHUNK, dtype="<i4")
    data_path, other_path = "data/virtual.bin", "other/other.bin"
    http.add(data_path, virtual.tobytes())
    http.add(other_path, virtual[::-1].tobytes())
    container, other_container = http.url_for("data/"), http.url_for("other/")
    config = icechunk.RepositoryConfig.default()
    for name in (container, other_container):
        config.set_virtual_chunk_container(
            icechunk.VirtualChunkContainer(name, icechunk.http_store())
        )
    storage = remote_storage(endpoint_url, bucket, prefix)
    repository = icechunk.Repository.create(
        storage,
        config,
        authorize_virtual_chunk_access={container: HttpAccess, other_container: HttpAccess},
    )
    session = repository.writable_session("main")
    root = zarr.group(store=session.store, attributes={"title": "remote"})
    temp = rng.standard_normal((40, 30))
    root.create_group("obs").create_array("temp", shape=temp.shape, chunks=(20, 15), dtype="f8")[
        ...
    ] = temp
    small = np.array([5, 6, 7, 8], dtype="u1")
    root.create_array("small", shape=(4,), chunks=(2,), dtype="u1")[...] = small
    group = root.create_group("virtual")
    for name in ("v", "w"):
        group.create_array(
            name, shape=virtual.shape, chunks=(VIRTUAL_CHUNK,), dtype="<i4", compressors=None
        )
    etag = http.etag(data_path)
    size = VIRTUAL_CHUNK * 4
    for index in range(4):
        session.store.set_virtual_ref(
            f"virtual/v/c/{index}", container + "virtual.bin",
            offset=index * size, length=size, checksum=etag,
        )  # fmt: skip
        session.store.set_virtual_ref(
            f"virtual/w/c/{index}", other_container + "other.bin",
            offset=index * size, length=size,
        )  # fmt: skip
    session.commit("remote")
    built = RemoteRepository(
        f"s3://{bucket}/{prefix}", storage, container, other_container, data_path
    )
    built.arrays = {
        "obs/temp": temp,
        "small": small,
        "virtual/v": virtual,
        "virtual/w": virtual[::-1],
    }
    return built


def open_remote_store(built: RemoteRepository) -> Any:
    """Return a read-only Icechunk store of ``built``'s ``main``, every container authorized."""
    import icechunk
    from icechunk.credentials import HttpAccess

    repository = icechunk.Repository.open(
        built.storage,
        authorize_virtual_chunk_access={
            built.container: HttpAccess,
            built.other_container: HttpAccess,
        },
    )
    return repository.readonly_session("main").store


def build_s3_container_repository(base: Path, endpoint_url: str, bucket: str) -> tuple[Path, str]:
    """Build a local repository whose array ``v``'s chunks lie in ``s3://bucket/data/`` on
    the local S3 server (the caller puts the object ``data/v.bin``: ``VIRTUAL_CHUNK`` int32
    values per chunk, 4 chunks); return its path and the container's prefix."""
    import icechunk
    import zarr
    from icechunk.credentials import containers_credentials, s3_from_env_credentials

    prefix = f"s3://{bucket}/data/"
    config = icechunk.RepositoryConfig.default()
    store = icechunk.s3_store(
        region="us-east-1", endpoint_url=endpoint_url, allow_http=True, force_path_style=True
    )
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    path = base / "repo"
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)),
        config,
        authorize_virtual_chunk_access=containers_credentials({prefix: s3_from_env_credentials()}),
    )
    session = repository.writable_session("main")
    zarr.group(store=session.store).create_array(
        "v", shape=(4 * VIRTUAL_CHUNK,), chunks=(VIRTUAL_CHUNK,), dtype="<i4", compressors=None
    )
    size = VIRTUAL_CHUNK * 4
    for index in range(4):
        session.store.set_virtual_ref(
            f"v/c/{index}", prefix + "v.bin", offset=index * size, length=size
        )
    session.commit("s3 container")
    return path, prefix
