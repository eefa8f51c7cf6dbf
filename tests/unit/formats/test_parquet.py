"""Parquet reference sets: layout, row semantics, laziness, the record cache and bad input."""

from __future__ import annotations

import base64
import json
import logging
import math
import threading
import time
from array import array as int_array
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ujson

from refmount.errors import ReferenceFormatError
from refmount.formats.options import LoadOptions
from refmount.formats.parquet import (
    SKIP_LOADS,
    ParquetReferenceSet,
    load_parquet,
    record_directory,
)
from refmount.model import (
    ROOT_INODE,
    ChunkGrid,
    ChunkRanges,
    Inline,
    Range,
    Reference,
    ReferenceSet,
    Whole,
    ravel,
)
from refmount.namespace.nodes import StaticFile
from refmount.namespace.tree import Tree
from tests.fakes import LocalSource

D = b"HELLO WORLD 0123456789abcdefghijklmnopqrstuvwxyz"
"""The 48-byte target of the conformance fixtures."""

RefValue = list[Any] | str | bytes | None
"""A chunk reference as kerchunk writes it: ``[url]``, ``[url, offset, size]``, raw or deleted."""


# ----------------------------------------------------------------------------- writers


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


# ----------------------------------------------------------------------------- helpers


def materialize(reference: Reference | None) -> bytes | None:
    """Return the bytes a reference stands for, reading local targets directly."""
    match reference:
        case None:
            return None
        case Inline(data):
            return data
        case Range(url, offset, length):
            with open(url, "rb") as handle:
                handle.seek(offset)
                return handle.read(length)
        case Whole(url):
            return Path(url).read_bytes()


def grid_number(references: ParquetReferenceSet, array: str) -> int:
    return [g.array for g in references.grids].index(array)


def lookup(references: ParquetReferenceSet, key: str) -> Reference | None:
    """Resolve a key as the mount does: walk the tree, then ask the set for the node."""
    tree = Tree.build(references.keys(), references.grids, source=references.source)
    inode = ROOT_INODE
    for part in key.split("/"):
        child = tree.lookup(inode, part)
        if child is None:
            return None
        inode = child
    if tree.is_dir(inode):
        return None
    source = tree.file_source(inode)
    if isinstance(source, StaticFile):
        return references.get(source.key)
    return references.chunk(source.grid, source.index)


def cat(references: ParquetReferenceSet, key: str) -> bytes | None:
    return materialize(lookup(references, key))


def present_keys(references: ParquetReferenceSet, array: str) -> list[str]:
    number = grid_number(references, array)
    grid = references.grids[number]
    return [grid.key(i) for i in references.chunks_present(number)]


def reference_fs(root: Path) -> Any:
    """Return fsspec's own reader of a Parquet reference set (metadata reads need no pandas)."""
    import fsspec

    return fsspec.filesystem(
        "reference", fo=str(root), remote_protocol="file", skip_instance_cache=True
    )


def zarray(shape: list[int], chunks: list[int], **extra: Any) -> dict[str, Any]:
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


# ----------------------------------------------------------------------------- fixtures


@dataclass
class Store:
    root: Path
    source: LocalSource
    target: str

    def load(self, **options: Any) -> ParquetReferenceSet:
        return load_parquet(self.source, LoadOptions(remote_protocol="file", **options))


@pytest.fixture
def target(tmp_path: Path) -> str:
    path = tmp_path / "data.bin"
    path.write_bytes(D)
    return str(path)


@pytest.fixture
def p_parq(tmp_path: Path, target: str) -> Store:
    """The §10.3 conformance store, record_size 3."""
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        ".zattrs": json.dumps({"title": "t/\u00e9"}),
        "x/.zarray": json.dumps(zarray([4, 6], [2, 3])),
        "x/0.0": [target, 0, 6],
        "x/0.1": [target, 6, 6],
        "x/1.0": [target, 0, 0],
        "z/.zarray": json.dumps(zarray([5], [1])),
        "z/0": "base64:" + base64.b64encode(b"\x00\x01").decode(),
        "z/1": "rawtext",
        "z/2": [target, 12, 4],
        "z/4": [target, 1, 2],
        "deep/.zgroup": '{"zarr_format": 2}',
        "deep/s/.zarray": json.dumps(zarray([], [])),
        "deep/s/0": "base64:BQ==",
    }
    root = tmp_path / "p.parq"
    refs_to_parquet(refs, root, record_size=3)
    return Store(root, LocalSource(root), target)


@pytest.fixture
def cat_parq(tmp_path: Path, target: str) -> Store:
    """30 chunks with the same URL (so ``path`` is categorical), ``c/5`` missing."""
    refs: dict[str, Any] = {
        ".zgroup": '{"zarr_format": 2}',
        "c/.zarray": json.dumps(zarray([30], [1])),
    }
    for i in range(30):
        if i != 5:
            refs[f"c/{i}"] = [target, i, 1]
    root = tmp_path / "cat.parq"
    refs_to_parquet(refs, root, record_size=100)
    return Store(root, LocalSource(root), target)


# ----------------------------------------------------------------------------- conformance


def test_p01_layout_is_accepted(p_parq: Store) -> None:
    files = sorted(str(p.relative_to(p_parq.root)) for p in p_parq.root.rglob("*") if p.is_file())
    assert files == [
        ".zmetadata",
        "deep/s/refs.0.parq",
        "x/refs.0.parq",
        "z/refs.0.parq",
        "z/refs.1.parq",
    ]
    schema = pq.read_schema(p_parq.root / "x" / "refs.0.parq")
    assert schema.names == ["path", "offset", "size", "raw"]
    assert pq.ParquetFile(p_parq.root / "x" / "refs.0.parq").metadata.num_rows == 3
    references = p_parq.load()
    protocol: ReferenceSet = references  # checked by mypy: the class satisfies the protocol
    assert protocol.source == str(p_parq.root)
    assert [g.array for g in references.grids] == ["deep/s", "x", "z"]
    assert references.grids == (
        ChunkGrid("deep/s", (), "."),
        ChunkGrid("x", (2, 2), "."),
        ChunkGrid("z", (5,), "."),
    )
    assert references.record_size == 3
    assert references.source == str(p_parq.root)


def test_p02_p13_zmetadata_serves_the_raw_file(p_parq: Store) -> None:
    raw = (p_parq.root / ".zmetadata").read_bytes()
    document = json.loads(raw)
    assert set(document) == {"metadata", "record_size"}
    references = p_parq.load()
    assert references.get(".zmetadata") == Inline(raw)
    assert reference_fs(p_parq.root).cat(".zmetadata") == raw


def test_p03_p09_ranges(p_parq: Store) -> None:
    references = p_parq.load()
    assert lookup(references, "x/0.0") == Range(p_parq.target, 0, 6)
    assert cat(references, "x/0.0") == b"HELLO "
    assert cat(references, "x/0.1") == b"WORLD "
    assert cat(references, "z/2") == b"0123"
    assert cat(references, "z/4") == b"EL"


def test_p04_p30_offset_and_size_zero_is_the_whole_file(p_parq: Store) -> None:
    references = p_parq.load()
    assert lookup(references, "x/1.0") == Whole(p_parq.target)
    assert cat(references, "x/1.0") == D


def test_p05_missing_record_file_is_absent(p_parq: Store) -> None:
    references = p_parq.load()
    assert lookup(references, "x/1.1") is None
    assert "x/refs.1.parq" in p_parq.source.reads


def test_p06_p07_null_and_padding_rows_are_absent(p_parq: Store) -> None:
    references = p_parq.load()
    z = grid_number(references, "z")
    assert references.chunk(z, 3) is None  # a null row inside refs.1.parq
    assert lookup(references, "z/5") is None  # the padding row is outside the grid
    assert references.chunk(z, 5) is None
    assert references.chunk(z, -1) is None
    assert present_keys(references, "z") == ["z/0", "z/1", "z/2", "z/4"]


def test_p08_raw_rows(p_parq: Store) -> None:
    references = p_parq.load()
    assert lookup(references, "z/0") == Inline(b"\x00\x01")
    assert lookup(references, "z/1") == Inline(b"rawtext")
    assert lookup(references, "deep/s/0") == Inline(b"\x05")


@pytest.mark.parametrize("key", ["x/0.2", "x/0.0.0", "x/a.b", "x/-1", "x/00.0", "z/05", "x/0"])
def test_p10_p11_aliases_are_not_chunks(p_parq: Store, key: str) -> None:
    references = p_parq.load()
    assert lookup(references, key) is None


def test_p12_metadata_is_stdlib_json(p_parq: Store) -> None:
    references = p_parq.load()
    fs = reference_fs(p_parq.root)
    for key in ["x/.zarray", ".zgroup", ".zattrs", "deep/s/.zarray", "deep/.zgroup"]:
        reference = references.get(key)
        assert isinstance(reference, Inline)
        expected = json.loads(p_parq.root.joinpath(".zmetadata").read_bytes())["metadata"][key]
        assert reference.data == json.dumps(expected).encode()
        assert json.loads(reference.data) == json.loads(fs.cat(key))  # fsspec: same document
    assert references.get(".zgroup") == Inline(b'{"zarr_format": 2}')
    assert references.get(".zattrs") == Inline(b'{"title": "t/\\u00e9"}')


def test_p14_p15_keys_are_the_metadata(p_parq: Store) -> None:
    references = p_parq.load()
    assert references.get("z/.zattrs") is None
    assert references.get("x/0.0") is None  # chunks are not explicit keys
    assert sorted(references.keys()) == [
        ".zattrs",
        ".zgroup",
        ".zmetadata",
        "deep/.zgroup",
        "deep/s/.zarray",
        "x/.zarray",
        "z/.zarray",
    ]


def test_p16_p19_present_chunks_and_sizes(p_parq: Store) -> None:
    references = p_parq.load()
    assert present_keys(references, "x") == ["x/0.0", "x/0.1", "x/1.0"]
    assert present_keys(references, "deep/s") == ["deep/s/0"]
    sizes = {key: len(cat(references, key) or b"") for key in present_keys(references, "z")}
    assert sizes == {"z/0": 2, "z/1": 7, "z/2": 4, "z/4": 2}
    assert len(cat(references, "x/1.0") or b"") == 48
    assert len(cat(references, "deep/s/0") or b"") == 1


def test_p23_categorical_paths_with_nulls(cat_parq: Store) -> None:
    schema = pq.read_schema(cat_parq.root / "c" / "refs.0.parq")
    assert schema.field("path").type == pa.string()  # as fastparquet leaves it
    assert (
        pq.ParquetFile(cat_parq.root / "c" / "refs.0.parq")
        .metadata.row_group(0)
        .column(0)
        .has_dictionary_page
    )
    references = cat_parq.load()
    assert cat(references, "c/4") == b"O"
    assert lookup(references, "c/5") is None
    assert cat(references, "c/29") == b"h"
    assert lookup(references, "c/30") is None
    assert lookup(references, "c/100") is None
    c = grid_number(references, "c")
    assert references.chunk(c, 100) is None
    assert list(references.chunks_present(c)) == [i for i in range(30) if i != 5]


@pytest.mark.parametrize("path_type", ["dictionary", "large_string", "string"])
def test_path_encodings_with_nulls(tmp_path: Path, target: str, path_type: str) -> None:
    paths = [target, None, target, None]
    array: pa.Array[Any] = pa.array(paths, pa.string())
    if path_type == "dictionary":
        array = array.dictionary_encode()
    elif path_type == "large_string":
        array = pa.array(paths, pa.large_string())
    root = tmp_path / "enc.parq"
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, {}, record_size=4)
    table = pa.table(
        {
            "path": array,
            "offset": pa.array([0, 0, 2, 0], pa.int64()),
            "size": pa.array([1, 0, 3, 0], pa.int64()),
            "raw": pa.nulls(4, pa.binary()),
        }
    )
    write_table(root / "a" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert [references.chunk(0, i) for i in range(4)] == [
        Range(target, 0, 1),
        None,
        Range(target, 2, 3),
        None,
    ]
    assert list(references.chunks_present(0)) == [0, 2]


def test_chunk_ranges_give_the_loaded_range_chunks_per_target(tmp_path: Path, target: str) -> None:
    root = tmp_path / "ranges.parq"
    other = "other.bin"  # a relative path: resolved against the record file's directory
    rows: dict[int, RefValue] = {0: [target, 0, 1], 2: [other, 2, 3], 3: "abc"}
    rows |= {4: [target, 0, 0], 5: [target, 9, 2]}
    chunks = {"a": {record * 6 + row: value for record in (0, 1) for row, value in rows.items()}}
    write_parquet_set(root, {"a/.zarray": zarray([12], [1])}, chunks, record_size=6)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk_ranges(0, 0, 12) == {}  # nothing loaded: nothing known
    references.chunk(0, 0)
    # range, absent, range into another target, inline, whole file, range
    ranges = references.chunk_ranges(0, 0, 12)  # the second record is still not loaded
    assert ranges == {
        target: ChunkRanges([0, 9], [1, 2]),
        references.chunk(0, 2).url: ChunkRanges([2], [3]),  # type: ignore[union-attr]
    }
    expected: dict[str, ChunkRanges] = {}
    for index in range(6):  # what ``chunk`` says, one chunk at a time
        reference = references.chunk(0, index)
        if isinstance(reference, Range) and reference.length > 0:
            found = expected.setdefault(reference.url, ChunkRanges())
            found.offsets.append(reference.offset)
            found.lengths.append(reference.length)
    assert ranges == expected
    references.chunk(0, 6)
    assert references.chunk_ranges(0, 4, 8) == {target: ChunkRanges([9, 0], [2, 1])}
    assert references.chunk_ranges(0, 12, 20) == {}  # past the grid


def test_chunk_sizes_answer_listings_without_loading(tmp_path: Path, target: str) -> None:
    root = tmp_path / "sizes.parq"
    write_parquet_set(root, {"a/.zarray": zarray([12], [1])}, {}, record_size=6)
    table = pa.table(
        {
            "path": pa.array([target, None, target, None, target, target], pa.string()),
            "offset": pa.array([0, 0, 2, 0, 0, 5], pa.int64()),
            "size": pa.array([1, 0, 3, 0, 0, 2], pa.int64()),
            "raw": pa.array([None, None, None, b"abc", None, None], pa.binary()),
        }
    )
    write_table(root / "a" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk_sizes(0, 0, 6) is None  # not loaded: listings must not block
    assert not references.chunk_is_loaded(0, 0)
    references.chunk(0, 0)
    # present, absent, present, inline (ask chunk), whole file (ask the target), present
    assert references.chunk_sizes(0, 0, 100) == [1, -1, 3, None, None, 2]
    assert references.chunk_sizes(0, 2, 4) == [3, None]
    assert references.chunk_sizes(0, 6, 8) is None  # the second record is not loaded
    references.chunk(0, 6)  # ... and does not exist: every chunk in it is absent
    assert references.chunk_sizes(0, 6, 100) == [-1] * 6
    assert references.chunk_sizes(0, 12, 13) is None  # past the grid


def test_p24_no_intermediate_zgroup(tmp_path: Path, target: str) -> None:
    root = tmp_path / "g.parq"
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        "g/x/.zarray": json.dumps(zarray([2], [1])),
        "g/x/0": [target, 0, 5],
    }
    refs_to_parquet(refs, root, record_size=10)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert [g.array for g in references.grids] == ["g/x"]
    assert cat(references, "g/x/0") == b"HELLO"
    assert lookup(references, "g/x/1") is None


def test_p25_top_level_non_zarr_key(tmp_path: Path) -> None:
    root = tmp_path / "info.parq"
    write_parquet_set(root, {".zgroup": {"zarr_format": 2}, "info.json": {"a": [1, 2]}}, {}, 5)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.get("info.json") == Inline(b'{"a": [1, 2]}')
    assert references.grids == ()


def test_metadata_string_value_is_its_text(tmp_path: Path) -> None:
    root = tmp_path / "s.parq"
    metadata = {"README": "hello \u00e9", "n": 3, "l": [1, "a"], "nothing": None}
    write_parquet_set(root, metadata, {}, 5)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.get("README") == Inline("hello \u00e9".encode())
    assert references.get("n") == Inline(b"3")
    assert references.get("l") == Inline(b'[1, "a"]')
    assert references.get("nothing") == Inline(b"null")


def test_p27_df_single(tmp_path: Path, target: str) -> None:
    """fsspec ``test_df_single``: a 3-row file (not padded) with record_size 10."""
    root = tmp_path / "single.parq"
    write_parquet_set(
        root, {".zgroup": {"zarr_format": 2}, "stuff/.zarray": zarray([3], [1])}, {}, 10
    )
    table = pa.table(
        {
            "path": pa.array([None, target, target], pa.string()),
            "offset": pa.array([0, 0, 4], pa.int64()),
            "size": pa.array([0, 0, 4], pa.int64()),
            "raw": pa.array([b"raw", None, None], pa.binary()),
        }
    )
    write_table(root / "stuff" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert cat(references, "stuff/0") == b"raw"
    assert lookup(references, "stuff/1") == Whole(target)
    assert cat(references, "stuff/1") == D
    assert cat(references, "stuff/2") == D[4:8]


def test_p28_df_multi(tmp_path: Path, target: str) -> None:
    """fsspec ``test_df_multi``: record_size 3, shape [6], two files."""
    root = tmp_path / "multi.parq"
    chunks: dict[str, dict[int, RefValue]] = {
        "stuff": {
            0: b"raw1",
            1: [target],
            2: [target, 4, 4],
            3: b"raw2",
            4: [target],
            5: [target, 2, 2],
        }
    }
    write_parquet_set(root, {"stuff/.zarray": zarray([6], [1])}, chunks, record_size=3)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert cat(references, "stuff/3") == b"raw2"
    assert cat(references, "stuff/5") == D[2:4]
    assert cat(references, "stuff/0") == b"raw1"
    assert cat(references, "stuff/4") == D


def test_p29_kerchunk_test_1(tmp_path: Path) -> None:
    refs = {
        "a/0": ["memory://url1.file"],
        "a/1": ["memory://url1.file", 10, 100],
        "a/2": ["memory://url2.file"],
        "a/3": ["memory://url3.file"],
        "a/4": ["memory://url4.file"],
        "a/5": ["memory://url5.file"],
        "a/6": b"data",
        "a/.zarray": b'{"shape": [7], "chunks":[1], "filters": [], "compression": null}',
        ".zgroup": b'{"zarr_format": 2}',
    }
    root = tmp_path / "outdir"
    refs_to_parquet(refs, root, record_size=4)
    first = pq.read_table(root / "a" / "refs.0.parq").to_pydict()
    assert first["path"] == ["memory://url1.file", "memory://url1.file", "memory://url2.file",
                             "memory://url3.file"]  # fmt: skip
    assert first["offset"] == [0, 10, 0, 0]
    assert first["size"] == [0, 100, 0, 0]
    second = pq.read_table(root / "a" / "refs.1.parq").to_pydict()
    assert second["path"] == ["memory://url4.file", "memory://url5.file", None, None]
    assert second["raw"] == [None, None, b"data", None]
    references = load_parquet(LocalSource(root), LoadOptions())
    assert [references.chunk(0, i) for i in range(8)] == [
        Whole("memory://url1.file"),
        Range("memory://url1.file", 10, 100),
        Whole("memory://url2.file"),
        Whole("memory://url3.file"),
        Whole("memory://url4.file"),
        Whole("memory://url5.file"),
        Inline(b"data"),
        None,  # the padding row, outside the 7-chunk grid
    ]


def test_raw_with_base64_prefix_is_decoded_on_read(tmp_path: Path) -> None:
    root = tmp_path / "b64.parq"
    write_parquet_set(root, {"r/.zarray": zarray([3], [1])}, {}, 3)
    table = pa.table(
        {
            "raw": pa.array(
                [b"base64:" + base64.b64encode(b"\xff\x00ab"), b"plain", b""], pa.binary()
            )
        }
    )
    write_table(root / "r" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert [references.chunk(0, i) for i in range(3)] == [
        Inline(b"\xff\x00ab"),
        Inline(b"plain"),
        Inline(b""),
    ]


def test_url_only_and_raw_only_files(tmp_path: Path, target: str) -> None:
    root = tmp_path / "cols.parq"
    write_parquet_set(root, {"u/.zarray": zarray([2], [1]), "r/.zarray": zarray([2], [1])}, {}, 2)
    urls_only = pa.table(
        {
            "path": pa.array([target, None]),
            "offset": pa.array([3, 0], pa.int64()),
            "size": pa.array([2, 0], pa.int64()),
        }
    )
    write_table(root / "u" / "refs.0.parq", urls_only)
    write_table(root / "r" / "refs.0.parq", pa.table({"raw": pa.array([None, b"xy"], pa.binary())}))
    references = load_parquet(LocalSource(root), LoadOptions())
    r, u = grid_number(references, "r"), grid_number(references, "u")
    assert [references.chunk(u, i) for i in range(2)] == [Range(target, 3, 2), None]
    assert [references.chunk(r, i) for i in range(2)] == [None, Inline(b"xy")]
    assert list(references.chunks_present(u)) == [0]
    assert list(references.chunks_present(r)) == [1]


def test_narrow_integer_and_null_typed_columns(tmp_path: Path, target: str) -> None:
    root = tmp_path / "types.parq"
    write_parquet_set(root, {"a/.zarray": zarray([2], [1])}, {}, 2)
    table = pa.table(
        {
            "path": pa.array([target, None], pa.string()),
            "offset": pa.array([1, 0], pa.uint32()),
            "size": pa.array([2, 0], pa.int32()),
            "raw": pa.nulls(2),  # pyarrow infers the null type for an all-None object column
        }
    )
    write_table(root / "a" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk(0, 0) == Range(target, 1, 2)
    assert references.chunk(0, 1) is None


def test_pandas_index_column_is_ignored(tmp_path: Path, target: str) -> None:
    root = tmp_path / "pandas.parq"
    write_parquet_set(root, {"a/.zarray": zarray([1], [1])}, {}, 1)
    pandas = {"index_columns": ["__index_level_0__"], "columns": [], "column_indexes": []}
    table = pa.table(
        {
            "path": pa.array([target]),
            "offset": pa.array([0], pa.int64()),
            "size": pa.array([3], pa.int64()),
            "raw": pa.nulls(1, pa.binary()),
            "__index_level_0__": pa.array([7], pa.int64()),
        }
    ).replace_schema_metadata({"pandas": json.dumps(pandas)})
    write_table(root / "a" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk(0, 0) == Range(target, 0, 3)


@pytest.mark.parametrize(
    "pandas", [b"{not json", b"[1, 2]", b'{"index_columns": 5}', b'{"index_columns": null}']
)
def test_unusable_pandas_metadata_names_no_index_column(
    tmp_path: Path, target: str, pandas: bytes
) -> None:
    # regression: pandas metadata that is not JSON, or not an object with a list of index
    # columns, escaped as JSONDecodeError/AttributeError/TypeError instead of being ignored
    root = tmp_path / "pandas.parq"
    write_parquet_set(root, {"a/.zarray": zarray([1], [1])}, {}, 1)
    table = pa.table(
        {
            "path": pa.array([target]),
            "offset": pa.array([0], pa.int64()),
            "size": pa.array([3], pa.int64()),
            "raw": pa.nulls(1, pa.binary()),
        }
    ).replace_schema_metadata({b"pandas": pandas})
    write_table(root / "a" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk(0, 0) == Range(target, 0, 3)


def test_relative_paths_resolve_against_the_record_files_directory(tmp_path: Path) -> None:
    root = tmp_path / "rel.parq"
    chunks: dict[str, dict[int, RefValue]] = {
        "a": {0: ["data.bin", 0, 1], 1: ["bucket/k", 0, 1], 2: ["../../up.bin", 0, 1]},
        "deep/s": {0: ["../x.bin", 0, 1], 1: ["./sub/y.bin", 0, 1]},
    }
    metadata = {"a/.zarray": zarray([3], [1]), "deep/s/.zarray": zarray([2], [1])}
    write_parquet_set(root, metadata, chunks, 3)
    local = load_parquet(LocalSource(root), LoadOptions())
    assert local.chunk(0, 0) == Range(str(root / "a" / "data.bin"), 0, 1)
    assert local.chunk(0, 2) == Range(str(tmp_path / "up.bin"), 0, 1)
    assert local.chunk(1, 0) == Range(str(root / "deep" / "x.bin"), 0, 1)
    assert local.chunk(1, 1) == Range(str(root / "deep" / "s" / "sub" / "y.bin"), 0, 1)
    assert local.chunk_ranges(1, 0, 2) == {
        str(root / "deep" / "x.bin"): ChunkRanges([0], [1]),
        str(root / "deep" / "s" / "sub" / "y.bin"): ChunkRanges([0], [1]),
    }
    remote = load_parquet(LocalSource(root), LoadOptions(remote_protocol="s3"))
    assert remote.chunk(0, 1) == Range("s3://bucket/k", 0, 1)


@pytest.mark.parametrize(
    ("url", "array", "directory"),
    [
        ("/data/refs.parq", "a", "/data/refs.parq/a"),
        ("/data/refs.parq/", "deep/s", "/data/refs.parq/deep/s"),
        ("https://h/x/refs.parq", "a", "https://h/x/refs.parq/a"),
        ("simplecache::s3://b/refs.parq", "", "s3://b/refs.parq"),
    ],
)
def test_record_directory(url: str, array: str, directory: str) -> None:
    assert record_directory(url, array) == directory


def test_urls_are_interned(cat_parq: Store) -> None:
    references = cat_parq.load()
    first, second = references.chunk(0, 0), references.chunk(0, 1)
    assert isinstance(first, Range)
    assert isinstance(second, Range)
    assert first.url is second.url


# ----------------------------------------------------------------------------- zarr v3, "/"


def test_v3_zarr_json_array(tmp_path: Path, target: str) -> None:
    root = tmp_path / "v3.parq"
    metadata = {
        "zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": {}},
        "v/zarr.json": {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [4, 6],
            "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
            "chunk_key_encoding": {"name": "default"},
            "fill_value": 0,
            "codecs": [{"name": "bytes"}],
        },
    }
    chunks: dict[str, dict[int, RefValue]] = {"v": {1: [target, 6, 6], 2: b"raw"}}
    write_parquet_set(root, metadata, chunks, 4)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.grids == (ChunkGrid("v", (2, 2), "/", "c"),)
    assert present_keys(references, "v") == ["v/c/0/1", "v/c/1/0"]
    assert cat(references, "v/c/0/1") == b"WORLD "
    assert cat(references, "v/c/1/0") == b"raw"
    assert lookup(references, "v/0.1") is None
    assert lookup(references, "v/c/0.1") is None
    assert references.get("v/zarr.json") == Inline(json.dumps(metadata["v/zarr.json"]).encode())


def test_v2_slash_separator(tmp_path: Path, target: str) -> None:
    root = tmp_path / "slash.parq"
    metadata = {"n/.zarray": zarray([4, 6], [2, 3], dimension_separator="/")}
    write_parquet_set(root, metadata, {"n": {3: [target, 0, 5]}}, 4)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert present_keys(references, "n") == ["n/1/1"]
    assert cat(references, "n/1/1") == b"HELLO"
    assert lookup(references, "n/1.1") is None


def test_array_at_the_root(tmp_path: Path, target: str) -> None:
    root = tmp_path / "rootarray.parq"
    write_parquet_set(root, {".zarray": zarray([2], [1])}, {"": {1: [target, 0, 2]}}, 2)
    assert (root / "refs.0.parq").is_file()
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.grids == (ChunkGrid("", (2,), "."),)
    assert present_keys(references, "") == ["1"]
    assert cat(references, "1") == b"HE"


def test_array_with_both_v2_and_v3_metadata_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "both.parq"
    v3 = {
        "node_type": "array",
        "shape": [2],
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
    }
    write_parquet_set(root, {"a/.zarray": zarray([2], [1]), "a/zarr.json": v3}, {}, 2)
    with pytest.raises(ReferenceFormatError, match="both v2 and v3"):
        load_parquet(LocalSource(root), LoadOptions())


# ----------------------------------------------------------------------------- laziness


def test_load_reads_zmetadata_and_one_probe(p_parq: Store) -> None:
    references = p_parq.load()
    assert p_parq.source.reads == [".zmetadata", "deep/s/refs.0.parq"]
    assert not any(
        references.chunk_is_loaded(g, i)
        for g, grid in enumerate(references.grids)
        for i in range(grid.count)
    )
    x = grid_number(references, "x")
    assert references.chunk(x, 1) == Range(p_parq.target, 6, 6)
    assert p_parq.source.reads[2:] == ["x/refs.0.parq"]
    assert references.chunk_is_loaded(x, 0)
    assert references.chunk_is_loaded(x, 2)
    assert not references.chunk_is_loaded(x, 3)
    assert references.chunk(x, 0) == Range(p_parq.target, 0, 6)
    assert references.chunk(x, 2) == Whole(p_parq.target)
    assert p_parq.source.reads[2:] == ["x/refs.0.parq"]
    assert references.chunk(x, 3) is None
    assert references.chunk(x, 3) is None  # a missing record is remembered too
    assert p_parq.source.reads[2:] == ["x/refs.0.parq", "x/refs.1.parq"]
    assert references.chunk_is_loaded(x, 3)
    assert references.chunk_is_loaded(x, 99)  # outside the grid: answered without I/O


def test_probe_skips_missing_records_and_empty_grids(tmp_path: Path, target: str) -> None:
    root = tmp_path / "sparse.parq"
    metadata = {"a/.zarray": zarray([0], [1]), "b/.zarray": zarray([20], [1])}
    write_parquet_set(root, metadata, {"b": {7: [target, 0, 1]}}, 2)
    source = LocalSource(root)
    load_parquet(source, LoadOptions())
    assert source.reads == [".zmetadata", "b/refs.0.parq", "b/refs.1.parq", "b/refs.2.parq",
                            "b/refs.3.parq"]  # fmt: skip
    source2 = LocalSource(root)
    write_parquet_set(root, metadata, {"b": {9: [target, 0, 1]}}, 2)
    (root / "b" / "refs.3.parq").unlink()
    load_parquet(source2, LoadOptions())
    assert source2.reads == [".zmetadata", "b/refs.0.parq", "b/refs.1.parq", "b/refs.2.parq",
                             "b/refs.3.parq"]  # fmt: skip  # gives up after PROBE_LIMIT


def test_chunks_present_streams_a_range(cat_parq: Store) -> None:
    references = cat_parq.load()
    assert list(references.chunks_present(0, 3, 8)) == [3, 4, 6, 7]
    assert list(references.chunks_present(0, 28, 1000)) == [28, 29]
    assert list(references.chunks_present(0, 10, 10)) == []


def test_chunks_present_loads_each_record_once(p_parq: Store) -> None:
    references = p_parq.load()
    before = len(p_parq.source.reads)
    z = grid_number(references, "z")
    iterator = references.chunks_present(z)
    assert next(iterator) == 0
    assert p_parq.source.reads[before:] == ["z/refs.0.parq"]
    assert list(iterator) == [1, 2, 4]
    assert p_parq.source.reads[before:] == ["z/refs.0.parq", "z/refs.1.parq"]


def test_lru_keeps_at_most_record_cache_records(tmp_path: Path, target: str) -> None:
    root = tmp_path / "lru.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {i: [target, i, 1] for i in range(10)}}
    write_parquet_set(root, {"a/.zarray": zarray([10], [1])}, chunks, 2)
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions(record_cache=2))
    source.reads.clear()
    for index in (0, 2, 4):  # records 0, 1, 2
        assert references.chunk(0, index) == Range(target, index, 1)
    assert [references.chunk_is_loaded(0, i) for i in (0, 2, 4)] == [False, True, True]
    references.chunk(0, 3)  # record 1 becomes the most recent
    references.chunk(0, 0)  # reloads record 0, evicts record 2
    assert [references.chunk_is_loaded(0, i) for i in (0, 2, 4)] == [True, True, False]
    assert source.reads == ["a/refs.0.parq", "a/refs.1.parq", "a/refs.2.parq", "a/refs.0.parq"]


class SlowSource(LocalSource):
    """A LocalSource whose reads take a while, to let concurrent requests overlap."""

    def read(self, relative: str = "") -> bytes:
        time.sleep(0.05)
        return super().read(relative)


def test_concurrent_first_requests_load_a_record_once(tmp_path: Path, target: str) -> None:
    root = tmp_path / "conc.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {i: [target, i, 1] for i in range(40)}}
    write_parquet_set(root, {"a/.zarray": zarray([40], [1])}, chunks, 20)
    source = SlowSource(root)
    references = load_parquet(source, LoadOptions())
    source.reads.clear()
    barrier = threading.Barrier(16)

    def work(index: int) -> Reference | None:
        barrier.wait()
        return references.chunk(0, index)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(work, [i * 5 % 40 for i in range(16)]))
    assert results == [Range(target, i * 5 % 40, 1) for i in range(16)]
    assert sorted(source.reads) == ["a/refs.0.parq", "a/refs.1.parq"]


class FailingSource(LocalSource):
    """A LocalSource whose record reads fail once with an I/O error."""

    failures = 1

    def read(self, relative: str = "") -> bytes:
        if relative.endswith(".parq") and self.failures:
            self.failures -= 1
            time.sleep(0.05)
            raise OSError("connection reset")
        return super().read(relative)


def test_failed_load_is_shared_then_retried(tmp_path: Path, target: str) -> None:
    root = tmp_path / "fail.parq"
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, {"a": {0: [target, 0, 1]}}, 4)
    source = FailingSource(root)
    source.failures = 0
    references = load_parquet(source, LoadOptions())
    source.failures = 1
    source.reads.clear()
    barrier = threading.Barrier(4)

    def work(_: int) -> str:
        barrier.wait()
        try:
            references.chunk(0, 0)
        except OSError as exc:
            return str(exc)
        return "ok"

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(work, range(4)))
    assert set(outcomes) <= {"connection reset", "ok"}
    assert "connection reset" in outcomes
    assert not references.chunk_is_loaded(0, 0)  # errors are not cached
    assert references.chunk(0, 0) == Range(target, 0, 1)


# ----------------------------------------------------------------------------- bad input


def test_missing_zmetadata(tmp_path: Path) -> None:
    (tmp_path / "empty.parq").mkdir()
    with pytest.raises(ReferenceFormatError) as caught:
        load_parquet(LocalSource(tmp_path / "empty.parq"), LoadOptions())
    assert caught.value.problem == "missing .zmetadata"
    assert caught.value.source == str(tmp_path / "empty.parq")


@pytest.mark.parametrize(
    ("content", "key", "problem"),
    [
        (b"{not json", None, "not valid JSON"),
        (b"\xff\xfe", None, "not valid JSON"),
        (b"", None, "not valid JSON"),
        (b"[1, 2]", None, "must be a JSON object"),
        (b'{"record_size": 3}', "metadata", "missing"),
        (b'{"metadata": [], "record_size": 3}', "metadata", "must be a JSON object"),
        (b'{"metadata": {}}', "record_size", "missing"),
        (b'{"metadata": {}, "record_size": 0}', "record_size", "must be a positive integer"),
        (b'{"metadata": {}, "record_size": -3}', "record_size", "must be a positive integer"),
        (b'{"metadata": {}, "record_size": "3"}', "record_size", "must be a positive integer"),
        (b'{"metadata": {}, "record_size": 2.5}', "record_size", "must be a positive integer"),
        (b'{"metadata": {}, "record_size": true}', "record_size", "must be a positive integer"),
    ],
)
def test_bad_zmetadata(tmp_path: Path, content: bytes, key: str | None, problem: str) -> None:
    root = tmp_path / "bad.parq"
    root.mkdir()
    (root / ".zmetadata").write_bytes(content)
    with pytest.raises(ReferenceFormatError) as caught:
        load_parquet(LocalSource(root), LoadOptions(skip_invalid=True))
    assert caught.value.source == f"{root}/.zmetadata"
    assert caught.value.key == key
    assert caught.value.problem.startswith(problem)


def test_zarray_mismatch_refuses_the_set(tmp_path: Path) -> None:
    root = tmp_path / "mismatch.parq"
    write_parquet_set(root, {"x/.zarray": zarray([4, 6], [2, 3, 1])}, {}, 3)
    with pytest.raises(ReferenceFormatError) as caught:
        load_parquet(LocalSource(root), LoadOptions())
    assert caught.value.source == f"{root}/.zmetadata"
    assert caught.value.key == "x/.zarray"
    assert caught.value.problem == "shape has 2 dimensions but chunks has 3"


def test_skip_invalid_drops_the_array_with_one_warning(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skip.parq"
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "bad/.zarray": zarray([4, 6], [2, 3, 1]),
        "bad/.zattrs": {"units": "m"},
        "good/.zarray": zarray([2], [1]),
    }
    write_parquet_set(root, metadata, {"good": {0: [target, 0, 2]}, "bad": {0: b"x"}}, 3)
    with caplog.at_level(logging.WARNING, logger="refmount.formats.parquet"):
        references = load_parquet(LocalSource(root), LoadOptions(skip_invalid=True))
    assert [r.getMessage() for r in caplog.records] == [
        f"skipping array: {root}/.zmetadata: key 'bad/.zarray': "
        "shape has 2 dimensions but chunks has 3"
    ]
    assert [g.array for g in references.grids] == ["good"]
    assert sorted(references.keys()) == [".zgroup", ".zmetadata", "good/.zarray"]
    assert cat(references, "good/0") == b"HE"


def _bad_table(kind: str, target: str) -> pa.Table:
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


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_wrong_columns_are_caught_at_load(tmp_path: Path, target: str, kind: str) -> None:
    root = tmp_path / "cols.parq"
    write_parquet_set(root, {"a/.zarray": zarray([2], [1])}, {}, 2)
    write_table(root / "a" / "refs.0.parq", _bad_table(kind, target))
    with pytest.raises(ReferenceFormatError) as caught:
        load_parquet(LocalSource(root), LoadOptions())
    assert caught.value.source == f"{root}/a/refs.0.parq"
    assert caught.value.key is None


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_wrong_columns_in_a_later_record_fail_its_chunks(
    tmp_path: Path, target: str, kind: str
) -> None:
    root = tmp_path / "later.parq"
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, {"a": {0: [target, 0, 1]}}, 2)
    write_table(root / "a" / "refs.1.parq", _bad_table(kind, target))
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk(0, 0) == Range(target, 0, 1)
    with pytest.raises(ReferenceFormatError) as caught:
        references.chunk(0, 2)
    assert caught.value.source == f"{root}/a/refs.1.parq"
    with pytest.raises(ReferenceFormatError):
        list(references.chunks_present(0))


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "empty", "bad magic", "bad pages"],
    ids=lambda d: d.replace(" ", "-"),
)
def test_corrupt_record_file(tmp_path: Path, target: str, damage: str) -> None:
    root = tmp_path / "corrupt.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {0: [target, 0, 1], 2: [target, 0, 2]}}
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, chunks, 2)
    path = root / "a" / "refs.1.parq"
    data = path.read_bytes()
    damaged = {
        "garbage": b"this is not parquet" * 10,
        "truncated": data[: len(data) // 2],
        "empty": b"",
        "bad magic": data[:-4] + b"PAR0",
        "bad pages": data[:4] + b"\xff" * (len(data) // 2) + data[4 + len(data) // 2 :],
    }[damage]
    path.write_bytes(damaged)
    references = load_parquet(LocalSource(root), LoadOptions())
    with pytest.raises(ReferenceFormatError) as caught:
        references.chunk(0, 2)
    assert caught.value.source == f"{root}/a/refs.1.parq"
    (root / "a" / "refs.0.parq").write_bytes(damaged)
    with pytest.raises(ReferenceFormatError) as at_load:
        load_parquet(LocalSource(root), LoadOptions())
    assert at_load.value.source == f"{root}/a/refs.0.parq"


def test_corrupt_probe_with_skip_invalid_warns(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "probe.parq"
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, {"a": {0: [target, 0, 1]}}, 2)
    (root / "a" / "refs.0.parq").write_bytes(b"junk")
    with caplog.at_level(logging.WARNING, logger="refmount.formats.parquet"):
        references = load_parquet(LocalSource(root), LoadOptions(skip_invalid=True))
    assert len(caplog.records) == 1
    assert f"{root}/a/refs.0.parq" in caplog.records[0].getMessage()
    with pytest.raises(ReferenceFormatError):
        references.chunk(0, 0)


@pytest.mark.parametrize(
    ("offset", "size", "problem"),
    [(-1, 4, "offset is negative (-1)"), (4, -2, "size is negative (-2)")],
)
def test_negative_offset_or_size(
    tmp_path: Path, target: str, offset: int, size: int, problem: str
) -> None:
    root = tmp_path / "neg.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {0: [target, 0, 1], 1: [target, offset, size]}}
    write_parquet_set(root, {"a/.zarray": zarray([2, 1], [1, 1])}, chunks, 2)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk(0, 0) == Range(target, 0, 1)
    with pytest.raises(ReferenceFormatError) as caught:
        references.chunk(0, 1)
    assert caught.value.source == f"{root}/a/refs.0.parq"
    assert caught.value.key == "a/1.0"
    assert caught.value.problem == problem


def test_row_beyond_the_file(tmp_path: Path, target: str) -> None:
    root = tmp_path / "short.parq"
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, {}, 4)
    short = pa.table(
        {
            "path": pa.array([target, target]),
            "offset": pa.array([0, 1], pa.int64()),
            "size": pa.array([1, 1], pa.int64()),
            "raw": pa.nulls(2, pa.binary()),
        }
    )
    write_table(root / "a" / "refs.0.parq", short)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk(0, 1) == Range(target, 1, 1)
    assert list(references.chunks_present(0)) == [0, 1]
    with pytest.raises(ReferenceFormatError) as caught:
        references.chunk(0, 3)
    assert caught.value.key == "a/3"
    assert caught.value.source == f"{root}/a/refs.0.parq"


def test_null_offset_on_a_path_row(tmp_path: Path, target: str) -> None:
    root = tmp_path / "nulloff.parq"
    write_parquet_set(root, {"a/.zarray": zarray([1], [1])}, {}, 1)
    table = pa.table(
        {
            "path": pa.array([target]),
            "offset": pa.array([None], pa.int64()),
            "size": pa.array([1], pa.int64()),
            "raw": pa.nulls(1, pa.binary()),
        }
    )
    write_table(root / "a" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    with pytest.raises(ReferenceFormatError, match="offset is null"):
        references.chunk(0, 0)


@pytest.mark.parametrize("kind", [pa.int64(), pa.null()])
def test_null_offset_and_size_on_a_path_row_is_the_whole_file(
    tmp_path: Path, target: str, kind: pa.DataType
) -> None:
    root = tmp_path / "nullboth.parq"
    write_parquet_set(root, {"a/.zarray": zarray([3], [1])}, {}, 3)
    table = pa.table(
        {
            "path": pa.array([target, "rel.bin", None]),
            "offset": pa.array([None, None, None], kind),
            "size": pa.array([None, None, None], kind),
            "raw": pa.nulls(3, pa.binary()),
        }
    )
    write_table(root / "a" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk(0, 0) == Whole(target)
    assert references.chunk(0, 1) == Whole(str(root / "a" / "rel.bin"))
    assert references.chunk(0, 2) is None
    assert references.chunk_sizes(0, 0, 3) == [None, None, -1]  # a whole file: ask the target
    assert references.chunk_ranges(0, 0, 3) == {}
    assert list(references.chunks_present(0)) == [0, 1]


@pytest.mark.parametrize("raw", [b"base64:_", b"base64:QU!JD", b"base64:aGVs\xc3\xa9bG8="])
def test_raw_base64_outside_the_alphabet_is_refused(tmp_path: Path, raw: bytes) -> None:
    root = tmp_path / "b64alphabet.parq"
    write_parquet_set(root, {"a/.zarray": zarray([1], [1])}, {}, 1)
    write_table(root / "a" / "refs.0.parq", pa.table({"raw": pa.array([raw], pa.binary())}))
    references = load_parquet(LocalSource(root), LoadOptions())
    with pytest.raises(ReferenceFormatError, match="bad base64") as caught:
        references.chunk(0, 0)
    assert caught.value.key == "a/0"


def test_raw_base64_ignores_line_breaks(tmp_path: Path) -> None:
    root = tmp_path / "b64lines.parq"
    write_parquet_set(root, {"a/.zarray": zarray([1], [1])}, {}, 1)
    raw = pa.array([b"base64:aGVs\r\nbG8=\n"], pa.binary())
    write_table(root / "a" / "refs.0.parq", pa.table({"raw": raw}))
    assert load_parquet(LocalSource(root), LoadOptions()).chunk(0, 0) == Inline(b"hello")


def test_bad_base64_raw(tmp_path: Path) -> None:
    root = tmp_path / "b64bad.parq"
    write_parquet_set(root, {"a/.zarray": zarray([1], [1])}, {}, 1)
    write_table(root / "a" / "refs.0.parq", pa.table({"raw": pa.array([b"base64:A"], pa.binary())}))
    references = load_parquet(LocalSource(root), LoadOptions())
    with pytest.raises(ReferenceFormatError, match="bad base64"):
        references.chunk(0, 0)


# ----------------------------------------------------------------------------- generator


def test_generate_large_set_small(tmp_path: Path) -> None:
    root = tmp_path / "big.parq"
    count = generate_large_set(root, shape=(20, 25), record_size=100, files=5)
    assert count == 500
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions(record_cache=2))
    assert references.grids == (ChunkGrid("big", (20, 25), "."),)
    assert source.reads == [".zmetadata", "big/refs.0.parq"]
    assert references.chunk(0, 499) == Range("s3://bucket/data/file-4.nc", 499_000, 1000)
    assert lookup(references, "big/3.7") == Range("s3://bucket/data/file-0.nc", 82_000, 1000)
    present: Iterator[int] = iter(references.chunks_present(0))
    assert sum(1 for _ in present) == 500


# ----------------------------------------------------------------------------- sparse grids


class UnlistableSource(LocalSource):
    """A LocalSource that cannot list directories, like a plain HTTP server."""

    def names(self, relative: str = "") -> list[str] | None:
        return None


def test_skip_absent_jumps_over_record_files_that_do_not_exist(tmp_path: Path) -> None:
    root = tmp_path / "sparse.parq"
    huge = 10**18
    chunks: dict[str, dict[int, RefValue]] = {"a": {7: ["t.bin", 0, 1], huge - 2: "x"}}
    write_parquet_set(root, {"a/.zarray": zarray([huge], [1])}, chunks, 1000)
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions())
    source.reads.clear()
    assert references.skip_absent(0, 0, huge, load=False) == 0  # nothing known: no I/O
    assert source.reads == []
    assert references.skip_absent(0, 0, huge, load=True) == 7
    assert references.skip_absent(0, 0, huge, load=False) == 7  # now known without I/O
    assert references.skip_absent(0, 8, huge, load=True) == huge - 2
    assert references.skip_absent(0, huge - 1, huge, load=True) == huge
    assert references.skip_absent(0, 8, 10**17, load=True) == 10**17
    assert references.existing_records(0) == int_array("q", [0, (huge - 2) // 1000])
    assert source.reads == ["a/refs.0.parq", f"a/refs.{(huge - 2) // 1000}.parq"]


def test_once_listed_a_record_file_that_does_not_exist_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "listed.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {0: "x"}}
    write_parquet_set(root, {"a/.zarray": zarray([10**6], [1])}, chunks, 10)
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions())
    source.reads.clear()
    assert references.chunk(0, 55) is None
    assert source.reads == ["a/refs.5.parq"]  # not listed yet: tried
    references.existing_records(0)
    assert [references.chunk(0, index) for index in (77, 10**6 - 1)] == [None, None]
    assert source.reads == ["a/refs.5.parq"]
    assert references.chunk(0, 0) == Inline(b"x")


def test_skip_absent_reads_a_bounded_number_of_records_when_it_cannot_list(
    tmp_path: Path,
) -> None:
    root = tmp_path / "unlisted.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {10**6: "x"}}
    write_parquet_set(root, {"a/.zarray": zarray([10**9], [1])}, chunks, 10)
    references = load_parquet(UnlistableSource(root), LoadOptions())
    assert references.existing_records(0) is None
    assert references.skip_absent(0, 0, 10**9, load=True) == SKIP_LOADS * 10
    assert references.record_numbers(0) == range(10**8)


def test_existing_records_ignore_other_names(tmp_path: Path) -> None:
    root = tmp_path / "names.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {0: "x", 25: "y"}}
    write_parquet_set(root, {"a/.zarray": zarray([30], [1])}, chunks, 10)
    for name in ("refs.01.parq", "refs.9.parq", "refs.-1.parq", "refs.1.parquet", "other"):
        (root / "a" / name).write_bytes(b"")
    references = load_parquet(LocalSource(root), LoadOptions())
    assert list(references.existing_records(0) or []) == [0, 2]
