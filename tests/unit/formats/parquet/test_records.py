"""Tests of records: the Parquet row rule (how a row becomes inline data, a range, a whole file,
or nothing, and what makes it invalid), as rule and as read from record files (fsspec's and
kerchunk's cases, ``base64:`` raw data), and cells read straight from Arrow buffers."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.options import LoadOptions
from refmount.formats.parquet import decoding, load_parquet, records
from refmount.formats.parquet.records import Row, number_rule, row_rule
from refmount.model import Inline, Range, Whole
from tests.fakes import LocalSource
from tests.unit.formats.parquet.conftest import D, Store, cat, grid_number, lookup, present_keys
from tests.unit.formats.parquet.writers import (
    RefValue,
    refs_to_parquet,
    write_parquet_set,
    write_table,
    zarray,
)


@pytest.mark.parametrize(
    ("inline", "path", "offset", "size", "expected"),
    [
        (True, None, None, None, Row.INLINE),
        (True, "", -1, None, Row.INLINE),  # raw data wins over anything else
        (False, None, 5, 10, Row.ABSENT),
        (False, "s3://b/k", None, None, Row.WHOLE),
        (False, "s3://b/k", 0, 0, Row.WHOLE),
        (False, "s3://b/k", 0, 10, Row.RANGE),
        (False, "s3://b/k", 7, 0, Row.RANGE),
        (False, "", 0, 10, "path '' is not a URL"),
        (False, 3, 0, 10, "path 3 is not a URL"),
        (False, "s3://b/k", None, 10, "offset is null for a row with a path"),
        (False, "s3://b/k", 0, None, "size is null for a row with a path"),
        (False, "s3://b/k", -1, -2, "offset is negative (-1)"),
        (False, "s3://b/k", 1, -2, "size is negative (-2)"),
    ],
)
def test_the_row_rule(
    inline: bool, path: object, offset: object, size: object, expected: Row | str
) -> None:
    assert row_rule(inline, path, offset, size) == expected


def test_the_numbers_alone_decide_a_row_with_a_path() -> None:
    assert number_rule(None, None) is Row.WHOLE
    assert number_rule(3, 4) is Row.RANGE
    assert number_rule(None, 4) == "offset is null for a row with a path"


def _record_columns() -> list[Any]:
    """Columns of every layout a record's cells are read from."""
    paths = [f"s3://b/{i % 300}.nc" if i % 7 else None for i in range(40_000)]
    return [
        decoding.compact_integers(pa.array([0, None, 7, 1 << 40]), "r", "offset"),  # int64
        decoding.compact_integers(pa.array([0, 5, None, 9] * 5), "r", "size"),  # uint32
        decoding.compact_path(pa.array(["a", None, "b", "a"] * 5)),  # int8 indices
        decoding.compact_path(pa.array(paths)),  # int16 indices
        pa.array(["x", "y", None, "x"] * 5).dictionary_encode(),  # int32 indices
        pa.array([1, 2, 3], pa.int64()),  # no nulls: no bitmap
        pa.array([b"x", None, b"y"] * 5, pa.binary()),  # raw: validity only
    ]


@pytest.mark.parametrize("column", range(len(_record_columns())))
@pytest.mark.parametrize("start", [0, 1, 9])
def test_cells_read_each_row_as_pyarrow_does(column: int, start: int) -> None:
    whole = _record_columns()[column]
    array = whole.slice(min(start, len(whole) - 1))  # offsets inside the buffers, and bitmaps
    cells = records.cells_of(array)
    assert cells is not None
    for row, value in enumerate(array.to_pylist()):
        assert cells.is_valid(row) == (value is not None), row
        if cells.values is not None:
            assert cells.value(row) == value, row
    assert (cells.values is None) == pa.types.is_binary(array.type)


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
