"""Tests of decoding record files: columns checked, integers and paths made compact."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.parquet.decoding import (
    compact_integers,
    compact_path,
    parse_record,
    read_schema,
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
