"""Zarr v3 arrays with one codec chain each, written with zarr-python 3 into any store (an
Icechunk session's, a local directory), and kerchunk JSON and Parquet sets that reference a
local v3 store's chunk files: what the zarr v2 view is tested on."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from refmount.model import ravel
from tests.unit.formats.parquet.writers import write_parquet_set


@dataclass(frozen=True)
class Case:
    """One array: its path, values, what zarr-python creates it with, and whether the v2
    view can serve it (else the reason's word)."""

    path: str
    values: np.ndarray[Any, Any]
    options: Callable[[], dict[str, Any]]
    refusal: str | None = None
    fill: Any = 0
    written: tuple[slice, ...] | None = None
    """The region written (None: all); the rest stays unwritten (fill value)."""

    @property
    def expected(self) -> np.ndarray[Any, Any]:
        if self.written is None:
            return self.values
        out = np.full_like(self.values, self.fill)
        out[self.written] = self.values[self.written]
        return out


def _codecs() -> Any:
    import zarr.codecs

    return zarr.codecs


def cases() -> list[Case]:
    """Return the arrays (v2 view: every codec mapping, dtypes, fill values, refusals)."""
    rng = np.random.default_rng(2)
    grid = rng.standard_normal((20, 30))
    ints = rng.integers(-1000, 1000, (20, 30)).astype("i4")
    c = _codecs
    return [
        Case(
            "plain/zstd",
            grid,
            lambda: {"chunks": (10, 15), "dimension_names": ("y", "x")},
        ),
        Case(
            "codecs/gzip",
            ints,
            lambda: {"chunks": (10, 15), "compressors": c().GzipCodec(level=5)},
        ),
        Case(
            "codecs/blosc",
            grid.astype("f4"),
            lambda: {
                "chunks": (10, 15),
                "compressors": c().BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
            },
        ),
        Case(
            "codecs/zstd_crc32c",
            ints.astype("i2"),
            lambda: {
                "chunks": (10, 15),
                "compressors": (c().ZstdCodec(level=3), c().Crc32cCodec()),
            },
        ),
        Case(
            "codecs/big_endian",
            ints,
            lambda: {
                "chunks": (10, 15),
                "serializer": c().BytesCodec(endian="big"),
                "compressors": None,
            },
        ),
        Case(
            "codecs/fortran",
            grid,
            lambda: {
                "chunks": (10, 15),
                "filters": (c().TransposeCodec(order=(1, 0)),),
                "compressors": c().GzipCodec(level=1),
            },
        ),
        Case(
            "codecs/uncompressed",
            ints.astype("u2"),
            lambda: {"chunks": (7, 8), "compressors": None},
        ),
        Case(
            "codecs/nan_fill",
            grid.astype("f4"),
            lambda: {"chunks": (10, 10), "fill_value": np.nan, "compressors": None},
            fill=np.nan,
            written=(slice(0, 10), slice(0, 20)),
        ),
        Case(
            "codecs/numcodecs_zlib",
            ints,
            lambda: {"chunks": (10, 15), "compressors": _numcodecs("Zlib", level=4)},
        ),
        Case("scalar", np.array(2.5), lambda: {"chunks": (), "dimension_names": ()}),
        Case(
            "refused/sharded",
            ints,
            lambda: {"chunks": (5, 5), "shards": (10, 15)},
            refusal="sharding_indexed",
        ),
        Case(
            "refused/transposed",
            rng.standard_normal((4, 5, 6)),
            lambda: {"chunks": (2, 5, 3), "filters": (c().TransposeCodec(order=(2, 0, 1)),)},
            refusal="transpose",
        ),
    ]


def _numcodecs(name: str, **config: Any) -> Any:
    import warnings

    import zarr.codecs.numcodecs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(zarr.codecs.numcodecs, name)(**config)


def write_cases(store: Any, attributes: dict[str, Any] | None = None) -> list[Case]:
    """Write every case into ``store`` (a root group with attributes); return the cases."""
    import warnings

    import zarr

    made = cases()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs.* and unstable-spec warnings
        root = zarr.group(store=store, attributes=attributes or {"title": "zarr v3 codecs"})
        root.create_group("plain", attributes={"about": "default codecs"})
        for case in made:
            options = case.options()
            array = root.create_array(
                case.path,
                shape=case.values.shape,
                dtype=case.values.dtype,
                attributes={"long_name": case.path},
                **options,
            )
            if case.written is None:
                array[...] = case.values
            else:
                array[case.written] = case.values[case.written]
    return made


def kerchunk_refs(store_dir: Path) -> dict[str, Any]:
    """Return a kerchunk v1 reference dict of a local zarr v3 store: every ``zarr.json``
    inline, every chunk a ``[path, 0, size]`` range of its file."""
    refs: dict[str, Any] = {}
    for directory, _, names in os.walk(store_dir):
        for name in names:
            path = Path(directory) / name
            key = str(path.relative_to(store_dir))
            if name == "zarr.json":
                refs[key] = path.read_text()
            else:
                refs[key] = [str(path), 0, path.stat().st_size]
    return {"version": 1, "refs": dict(sorted(refs.items()))}


def write_kerchunk_json(store_dir: Path, out: Path) -> Path:
    out.write_text(json.dumps(kerchunk_refs(store_dir)))
    return out


def write_kerchunk_parquet(store_dir: Path, out: Path, record_size: int = 4) -> Path:
    """Write the references of a local v3 store as a kerchunk Parquet set (``zarr.json``
    entries in ``.zmetadata``, chunks in record files by their flat index)."""
    refs = kerchunk_refs(store_dir)["refs"]
    metadata = {k: json.loads(v) for k, v in refs.items() if k.rpartition("/")[2] == "zarr.json"}
    chunks: dict[str, dict[int, Any]] = {}
    for key, value in refs.items():
        if key in metadata:
            continue
        if key == "c" or key.endswith("/c"):  # a 0-d array's one chunk
            array, rest = key[:-2], ""
        else:
            array, _, rest = key.partition("/c/") if "/c/" in key else ("", "", key[2:])
        meta = metadata[f"{array}/zarr.json" if array else "zarr.json"]
        chunk_shape = meta["chunk_grid"]["configuration"]["chunk_shape"]
        extents = [-(-s // c) for s, c in zip(meta["shape"], chunk_shape, strict=True)]
        index = ravel([int(i) for i in rest.split("/")], extents) if rest else 0
        chunks.setdefault(array, {})[index] = value
    write_parquet_set(out, metadata, chunks, record_size)
    return out


def virtualizarr_repository(original: Path, base: Path) -> Path:
    """An Icechunk repository that VirtualiZarr 2 writes of a local netCDF4/HDF5 file: zarr v3
    arrays with ``numcodecs.shuffle`` and ``numcodecs.zlib``, virtual chunks into the file,
    xarray's attributes (``_FillValue`` as base64)."""
    import warnings

    import icechunk
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser

    container = f"file://{original.parent}/"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        registry = ObjectStoreRegistry({"file://": LocalStore()})
        dataset = open_virtual_dataset(f"file://{original}", parser=HDFParser(), registry=registry)
        config = icechunk.RepositoryConfig.default()
        config.set_virtual_chunk_container(
            icechunk.VirtualChunkContainer(
                container, icechunk.local_filesystem_store(str(original.parent))
            )
        )
        repository = icechunk.Repository.create(
            icechunk.local_filesystem_storage(str(base)),
            config,
            authorize_virtual_chunk_access={container: None},
        )
        session = repository.writable_session("main")
        dataset.vz.to_icechunk(session.store)
        session.commit("virtualizarr")
    return base
