"""Tests of the Parquet row rule: how a row becomes inline data, a range, a whole file, or
nothing, and what makes it invalid."""

from __future__ import annotations

import pytest

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
