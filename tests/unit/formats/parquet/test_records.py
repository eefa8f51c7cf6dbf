"""Tests of records: the Parquet row rule (how a row becomes inline data, a range, a whole file,
or nothing, and what makes it invalid) and cells read straight from Arrow buffers."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from refmount.formats.parquet import decoding, records
from refmount.formats.parquet.records import Row, number_rule, row_rule


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
