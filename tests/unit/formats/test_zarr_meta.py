"""Zarr v2/v3 array metadata → chunk grids, and chunk names → indices."""

from __future__ import annotations

from typing import Any

import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.zarr_meta import (
    array_of,
    grid_for_key,
    grid_from_zarr_json,
    grid_from_zarray,
)
from refmount.model import ChunkGrid

SOURCE = "refs.parq/.zmetadata"


def zarray(shape: list[int], chunks: list[int], **extra: Any) -> dict[str, Any]:
    return {
        "chunks": chunks,
        "compressor": None,
        "dtype": "<i4",
        "fill_value": 0,
        "filters": None,
        "order": "C",
        "shape": shape,
        "zarr_format": 2,
        **extra,
    }


def zarr_json(shape: list[int], chunk_shape: list[int], **extra: Any) -> dict[str, Any]:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk_shape}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        **extra,
    }


def names_below(grid: ChunkGrid, index: int) -> list[str]:
    """Return the path components of chunk ``index``'s key below the array directory."""
    key = grid.key(index)
    below = key[len(grid.array) + 1 :] if grid.array else key
    return below.split("/")


# ---------------------------------------------------------------- zarr v2


def test_v2_grid_is_ceil_of_shape_over_chunks() -> None:
    grid = grid_from_zarray("x", zarray([4, 6], [2, 3]), SOURCE, "x/.zarray")
    assert grid == ChunkGrid("x", (2, 2), ".")
    assert [grid.key(i) for i in range(grid.count)] == ["x/0.0", "x/0.1", "x/1.0", "x/1.1"]
    assert grid_from_zarray("y", zarray([5, 7], [2, 3]), SOURCE, "y/.zarray").shape == (3, 3)


def test_v2_zero_dimensional_array_has_one_chunk_named_0() -> None:
    grid = grid_from_zarray("deep/s", zarray([], []), SOURCE, "deep/s/.zarray")
    assert grid.shape == ()
    assert grid.count == 1
    assert grid.key(0) == "deep/s/0"


def test_v2_empty_dimension_has_no_chunks() -> None:
    grid = grid_from_zarray("e", zarray([0, 4], [1, 2]), SOURCE, "e/.zarray")
    assert grid.shape == (0, 2)
    assert grid.count == 0


@pytest.mark.parametrize(
    ("separator", "expected"), [(None, "."), (".", "."), ("/", "/")], ids=["null", "dot", "slash"]
)
def test_v2_dimension_separator(separator: str | None, expected: str) -> None:
    document = zarray([4, 6], [2, 3], dimension_separator=separator)
    grid = grid_from_zarray("x", document, SOURCE, "x/.zarray")
    assert grid.separator == expected
    assert grid.key(3) == f"x/1{expected}1"


def test_v2_shape_chunks_mismatch_names_file_key_and_problem() -> None:
    with pytest.raises(ReferenceFormatError) as caught:
        grid_from_zarray("x", zarray([4, 6], [2, 3, 1]), SOURCE, "x/.zarray")
    error = caught.value
    assert error.source == SOURCE
    assert error.key == "x/.zarray"
    assert error.problem == "shape has 2 dimensions but chunks has 3"
    assert str(error) == f"{SOURCE}: key 'x/.zarray': shape has 2 dimensions but chunks has 3"


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"chunks": [1]}, "shape must be a list of integers"),
        (zarray(4, [1]), "shape must be a list of integers"),  # type: ignore[arg-type]
        (zarray([4], None), "chunks must be a list of integers"),  # type: ignore[arg-type]
        (zarray([-1], [1]), "shape must hold non-negative integers"),
        (zarray([4], [0]), "chunks must hold positive integers"),
        (zarray([4], [-2]), "chunks must hold positive integers"),
        (zarray([4.0], [1]), "shape must be a list of integers"),  # type: ignore[list-item]
        (zarray([True], [1]), "shape must be a list of integers"),
        (zarray(["4"], [1]), "shape must be a list of integers"),  # type: ignore[list-item]
        (zarray([4], [1], dimension_separator="-"), 'dimension_separator must be "." or "/"'),
    ],
)
def test_v2_malformed(document: dict[str, Any], problem: str) -> None:
    with pytest.raises(ReferenceFormatError, match=r"x/\.zarray") as caught:
        grid_from_zarray("x", document, SOURCE, "x/.zarray")
    assert caught.value.problem.startswith(problem)


# ---------------------------------------------------------------- zarr v3


def test_v3_default_encoding_prefixes_c_and_nests() -> None:
    grid = grid_from_zarr_json("v", zarr_json([4, 6], [2, 3]), SOURCE, "v/zarr.json")
    assert grid == ChunkGrid("v", (2, 2), "/", "c")
    assert [grid.key(i) for i in range(4)] == ["v/c/0/0", "v/c/0/1", "v/c/1/0", "v/c/1/1"]


def test_v3_default_encoding_with_dot_separator() -> None:
    encoding = {"name": "default", "configuration": {"separator": "."}}
    document = zarr_json([4, 6], [2, 3], chunk_key_encoding=encoding)
    grid = grid_from_zarr_json("v", document, SOURCE, "v/zarr.json")
    assert grid is not None
    assert grid.key(1) == "v/c/0.1"


def test_v3_v2_encoding() -> None:
    document = zarr_json([4, 6], [2, 3], chunk_key_encoding={"name": "v2"})
    grid = grid_from_zarr_json("v", document, SOURCE, "v/zarr.json")
    assert grid == ChunkGrid("v", (2, 2), ".", "")
    assert grid.key(1) == "v/0.1"
    encoding = {"name": "v2", "configuration": {"separator": "/"}}
    document = zarr_json([4, 6], [2, 3], chunk_key_encoding=encoding)
    nested = grid_from_zarr_json("v", document, SOURCE, "v/zarr.json")
    assert nested is not None
    assert nested.key(1) == "v/0/1"


def test_v3_missing_chunk_key_encoding_is_default() -> None:
    document = zarr_json([4], [2])
    del document["chunk_key_encoding"]
    grid = grid_from_zarr_json("v", document, SOURCE, "v/zarr.json")
    assert grid == ChunkGrid("v", (2,), "/", "c")


def test_v3_zero_dimensional() -> None:
    grid = grid_from_zarr_json("s", zarr_json([], []), SOURCE, "s/zarr.json")
    assert grid is not None
    assert grid.count == 1
    assert grid.key(0) == "s/c"
    v2 = zarr_json([], [], chunk_key_encoding={"name": "v2"})
    grid2 = grid_from_zarr_json("s", v2, SOURCE, "s/zarr.json")
    assert grid2 is not None
    assert grid2.key(0) == "s/0"


def test_v3_group_has_no_grid() -> None:
    document = {"zarr_format": 3, "node_type": "group", "attributes": {}}
    assert grid_from_zarr_json("g", document, SOURCE, "g/zarr.json") is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"node_type": "thing"}, 'node_type must be "array" or "group"'),
        ({"node_type": None}, 'node_type must be "array" or "group"'),
        ({"chunk_grid": {"name": "rectangular"}}, "chunk_grid name 'rectangular'"),
        ({"chunk_grid": "regular"}, "chunk_grid must be an object"),
        ({"chunk_grid": {"name": "regular"}}, "chunk_grid.configuration must be an object"),
        (
            {"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 0]}}},
            "chunk_grid.configuration.chunk_shape must hold positive integers",
        ),
        (
            {"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}}},
            "shape has 2 dimensions but chunk_shape has 1",
        ),
        ({"chunk_key_encoding": {"name": "v4"}}, "chunk_key_encoding name must be"),
        ({"chunk_key_encoding": "default"}, "chunk_key_encoding must be an object"),
        (
            {"chunk_key_encoding": {"name": "default", "configuration": {"separator": ":"}}},
            "chunk_key_encoding.configuration.separator must be",
        ),
        (
            {"chunk_key_encoding": {"name": "default", "configuration": []}},
            "chunk_key_encoding.configuration must be an object",
        ),
        ({"shape": [4, -6]}, "shape must hold non-negative integers"),
    ],
)
def test_v3_malformed(change: dict[str, Any], problem: str) -> None:
    document = {**zarr_json([4, 6], [2, 3]), **change}
    with pytest.raises(ReferenceFormatError) as caught:
        grid_from_zarr_json("v", document, SOURCE, "v/zarr.json")
    assert caught.value.key == "v/zarr.json"
    assert caught.value.source == SOURCE
    assert caught.value.problem.startswith(problem)


# ---------------------------------------------------------------- dispatch


def test_array_of() -> None:
    assert array_of("deep/s/.zarray") == ("deep/s", ".zarray")
    assert array_of(".zarray") == ("", ".zarray")
    assert array_of("g/zarr.json") == ("g", "zarr.json")
    assert array_of("x/.zattrs") is None
    assert array_of("x/0.0") is None
    assert array_of("x.zarray") is None


def test_grid_for_key_dispatches_and_parses_text() -> None:
    assert grid_for_key(".zgroup", {"zarr_format": 2}, SOURCE) is None
    assert grid_for_key("x/.zattrs", {"a": 1}, SOURCE) is None
    assert grid_for_key("x/.zarray", zarray([4], [2]), SOURCE) == ChunkGrid("x", (2,), ".")
    text = '{"shape": [4], "chunks": [2], "dimension_separator": "/"}'
    assert grid_for_key("x/.zarray", text, SOURCE) == ChunkGrid("x", (2,), "/")
    assert grid_for_key(".zarray", zarray([3], [1]), SOURCE) == ChunkGrid("", (3,), ".")
    assert grid_for_key("v/zarr.json", zarr_json([4], [2]), SOURCE) == ChunkGrid(
        "v", (2,), "/", "c"
    )
    assert grid_for_key("g/zarr.json", {"node_type": "group"}, SOURCE) is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [("{not json", "not valid JSON"), ([1, 2], "array metadata must be a JSON object")],
)
def test_grid_for_key_malformed_document(value: object, problem: str) -> None:
    with pytest.raises(ReferenceFormatError) as caught:
        grid_for_key("x/.zarray", value, SOURCE)
    assert caught.value.key == "x/.zarray"
    assert caught.value.problem.startswith(problem)
