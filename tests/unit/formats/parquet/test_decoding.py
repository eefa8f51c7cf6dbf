"""Tests of decoding record files: columns checked (pandas index columns left out, the
URL-only and raw-only forms, narrow and null types), paths in every encoding, integers and
paths made compact, and files that are not readable Parquet."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.options import LoadOptions
from refmount.formats.parquet import load_parquet
from refmount.formats.parquet.decoding import (
    compact_integers,
    compact_path,
    parse_record,
    read_schema,
)
from refmount.model import Inline, Range
from tests.fakes import LocalSource
from tests.unit.formats.parquet.conftest import Store, cat, grid_number, lookup
from tests.unit.formats.parquet.writers import (
    BAD_KINDS,
    RefValue,
    bad_table,
    write_parquet_set,
    write_table,
    zarray,
)


def parquet_bytes(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def test_integers_are_uint32_when_they_fit_and_int64_otherwise() -> None:
    small = compact_integers(pa.array([0, 5, None]), "r", "size")
    large = compact_integers(pa.array([0, 1 << 40]), "r", "offset")
    negative = compact_integers(pa.array([-1, 3]), "r", "offset")
    assert small is not None
    assert small.type == pa.uint32()
    assert large is not None
    assert large.type == pa.int64()
    assert negative is not None
    assert negative.type == pa.int64()
    assert compact_integers(None, "r", "size") is None


def test_paths_get_the_narrowest_dictionary_index() -> None:
    assert compact_path(pa.array(["a", "b", "a"])).type.index_type == pa.int8()
    many = compact_path(pa.array([str(i) for i in range(1000)]))
    assert many.type.index_type == pa.int16()


def test_a_record_file_with_other_columns_is_refused() -> None:
    data = parquet_bytes(pa.table({"path": ["a"], "length": [1]}))
    with pytest.raises(ReferenceFormatError, match="columns are"):
        read_schema(data, "refs.0.parq")


def test_a_record_is_parsed_with_rows_present_where_a_path_or_raw_is() -> None:
    table = pa.table(
        {
            "path": pa.array(["s3://b/k", None, None]),
            "offset": pa.array([0, None, None], pa.int64()),
            "size": pa.array([10, None, None], pa.int64()),
            "raw": pa.array([None, b"x", None], pa.binary()),
        }
    )
    record = parse_record(parquet_bytes(table), "refs.0.parq")
    assert record.rows == 3
    assert record.present is not None
    assert record.present.to_pylist() == [True, True, False]


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


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_wrong_columns_in_a_later_record_fail_its_chunks(
    tmp_path: Path, target: str, kind: str
) -> None:
    root = tmp_path / "later.parq"
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, {"a": {0: [target, 0, 1]}}, 2)
    write_table(root / "a" / "refs.1.parq", bad_table(kind, target))
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
