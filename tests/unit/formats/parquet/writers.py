"""Writing Parquet reference sets as kerchunk and fastparquet lay them out: record files, whole
sets, sets from a reference dict, a large generated set, the ``.zarray`` documents they hold
and record files with wrong columns."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import ujson

from refmount.model import ravel

RefValue = list[Any] | str | bytes | None
"""A chunk reference as kerchunk writes it: ``[url]``, ``[url, offset, size]``, raw or deleted."""


def _proc_raw(value: str | bytes) -> bytes:
    """Encode a raw value the way ``kerchunk.df._proc_raw`` does (base64 decoded at write)."""
    data = value.encode() if isinstance(value, str) else value
    if data.startswith(b"base64:"):
        return base64.b64decode(data[7:])
    return data


def write_record(
    path: Path,
    rows: Mapping[int, RefValue],
    record_size: int,
    *,
    categorical_threshold: float = 10,
    store_schema: bool = False,
) -> None:
    """Write one ``refs.N.parq`` the way kerchunk/fastparquet lays it out (§5.1 of the notes).

    ``record_size`` rows padded with nulls, columns path (dictionary-encoded when
    repetitive) / offset int64 / size int64 / raw binary, zstd, one row group, no statistics.
    ``store_schema=False`` leaves out the Arrow schema, as fastparquet does, so pyarrow reads a
    categorical ``path`` back as plain strings.
    """
    paths: list[str | None] = [None] * record_size
    offsets = [0] * record_size
    sizes = [0] * record_size
    raws: list[bytes | None] = [None] * record_size
    for row, value in rows.items():
        if isinstance(value, list):
            paths[row] = value[0]
            if len(value) > 1:
                offsets[row], sizes[row] = value[1], value[2]
        elif value is not None:
            raws[row] = _proc_raw(value)
    path_array: pa.Array[Any] = pa.array(paths, pa.string())
    count = len(paths) - path_array.null_count
    if count / (len({p for p in paths if p is not None}) or 1) > categorical_threshold:
        path_array = path_array.dictionary_encode()
    table = pa.table(
        {
            "path": path_array,
            "offset": pa.array(offsets, pa.int64()),
            "size": pa.array(sizes, pa.int64()),
            "raw": pa.array(raws, pa.binary()),
        },
        schema=pa.schema(
            [
                pa.field("path", path_array.type),
                pa.field("offset", pa.int64(), nullable=False),
                pa.field("size", pa.int64(), nullable=False),
                pa.field("raw", pa.binary()),
            ]
        ),
    )
    write_table(path, table, store_schema=store_schema)


def write_table(path: Path, table: pa.Table, *, store_schema: bool = True) -> None:
    """Write ``table`` as one zstd row group without statistics."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table,
        str(path),
        compression="zstd",
        write_statistics=False,
        row_group_size=max(table.num_rows, 1),
        store_schema=store_schema,
    )


def write_parquet_set(
    root: Path,
    metadata: Mapping[str, Any],
    chunks: Mapping[str, Mapping[int, RefValue]],
    record_size: int,
    **record_options: Any,
) -> None:
    """Write a reference set: ``.zmetadata`` (with ujson, as fsspec does) and record files.

    ``chunks`` maps an array path to ``{flat index: reference}``. A record file is written
    only when at least one of its chunks has a reference, as kerchunk does.
    """
    root.mkdir(parents=True, exist_ok=True)
    document = {"metadata": dict(metadata), "record_size": record_size}
    (root / ".zmetadata").write_bytes(ujson.dumps(document).encode())
    for array, refs in chunks.items():
        records: dict[int, dict[int, RefValue]] = {}
        for index, value in refs.items():
            records.setdefault(index // record_size, {})[index % record_size] = value
        for record, rows in records.items():
            write_record(root / array / f"refs.{record}.parq", rows, record_size, **record_options)


def refs_to_parquet(refs: Mapping[str, Any], root: Path, record_size: int, **options: Any) -> None:
    """Write a zarr-v2 kerchunk reference dict like ``kerchunk.df.refs_to_dataframe`` does."""
    metadata: dict[str, Any] = {}
    chunk_keys: dict[str, Any] = {}
    for key in sorted(refs):
        value = refs[key]
        if "/" in key and not (key.startswith(".z") or "/.z" in key):
            chunk_keys[key] = value
        else:
            metadata[key] = json.loads(value) if isinstance(value, str | bytes) else value
    chunks: dict[str, dict[int, RefValue]] = {}
    for key, value in chunk_keys.items():
        field, name = key.rsplit("/", 1)
        zarray = metadata[f"{field}/.zarray"]
        sizes = [math.ceil(s / c) for s, c in zip(zarray["shape"], zarray["chunks"], strict=True)]
        index = ravel([int(i) for i in name.split(".")], sizes) if sizes else 0
        chunks.setdefault(field, {})[index] = value
    write_parquet_set(root, metadata, chunks, record_size, **options)


def generate_large_set(
    root: Path,
    shape: tuple[int, int] = (2000, 2500),
    record_size: int = 100_000,
    *,
    files: int = 50,
    url: str = "s3://bucket/data/file-{}.nc",
) -> int:
    """Write a big 2-D reference set fast (one array ``big``) and return its chunk count.

    Every chunk is a range ``(url, offset, 1000)``; the targets cycle through ``files`` URLs,
    so the path column is dictionary-encoded. Used by hand to measure load time and memory.
    """
    rows, cols = shape
    chunk = (10, 10)
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "big/.zarray": {
            "chunks": list(chunk),
            "compressor": None,
            "dtype": "<f8",
            "fill_value": None,
            "filters": None,
            "order": "C",
            "shape": [rows * chunk[0], cols * chunk[1]],
            "zarr_format": 2,
        },
        "big/.zattrs": {"_ARRAY_DIMENSIONS": ["y", "x"]},
    }
    root.mkdir(parents=True, exist_ok=True)
    document = {"metadata": metadata, "record_size": record_size}
    (root / ".zmetadata").write_bytes(json.dumps(document).encode())
    count = rows * cols
    dictionary = pa.array([url.format(i) for i in range(files)], pa.string())
    for record in range(math.ceil(count / record_size)):
        start = record * record_size
        numbers = pa.array(range(start, start + record_size), pa.int64())
        indices = pa.array([(start + i) * files // count for i in range(record_size)], pa.int32())
        table = pa.table(
            {
                "path": pa.DictionaryArray.from_arrays(indices, dictionary),
                "offset": pa.compute.multiply(numbers, 1000),
                "size": pa.array([1000] * record_size, pa.int64()),
                "raw": pa.nulls(record_size, pa.binary()),
            }
        )
        write_table(root / "big" / f"refs.{record}.parq", table)
    return count


def zarray(shape: list[int], chunks: list[int], **extra: Any) -> dict[str, Any]:
    """Return the ``.zarray`` of an uncompressed array of bytes, with ``extra`` fields."""
    return {
        "chunks": chunks,
        "compressor": None,
        "dtype": "|u1",
        "fill_value": 0,
        "filters": None,
        "order": "C",
        "shape": shape,
        "zarr_format": 2,
        **extra,
    }


def bad_table(kind: str, target: str) -> pa.Table:
    """Return a two-row record table over ``target`` that is wrong as ``kind`` (one of
    ``BAD_KINDS``) says."""
    good = {
        "path": pa.array([target, None], pa.string()),
        "offset": pa.array([0, 0], pa.int64()),
        "size": pa.array([1, 0], pa.int64()),
        "raw": pa.nulls(2, pa.binary()),
    }
    if kind == "extra column":
        return pa.table({**good, "key": pa.array(["a/0", "a/1"])})
    if kind == "missing raw and size":
        return pa.table({"path": good["path"], "offset": good["offset"]})
    if kind == "renamed":
        return pa.table({"url": good["path"], "offset": good["offset"], "size": good["size"]})
    if kind == "offset as string":
        return pa.table({**good, "offset": pa.array(["0", "0"])})
    if kind == "raw as string":
        return pa.table({**good, "raw": pa.array(["a", None], pa.string())})
    if kind == "path as int":
        return pa.table({**good, "path": pa.array([1, 2])})
    if kind == "size as float":
        return pa.table({**good, "size": pa.array([1.0, 0.0])})
    raise AssertionError(kind)


BAD_KINDS = [
    "extra column",
    "missing raw and size",
    "renamed",
    "offset as string",
    "raw as string",
    "path as int",
    "size as float",
]
"""How a record file's columns can be wrong (``bad_table``)."""
