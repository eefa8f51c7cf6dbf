"""Tests of an array's chunk table: lookups, sizes, kinds and bad coordinates, and its builder
(batches taken one at a time, in grid order or not)."""

from __future__ import annotations

import numpy as np
import pytest

from refmount.formats.icechunk.chunks import (
    ChunkBatch,
    ChunkKind,
    ChunkTable,
    ChunkTableBuilder,
    flat_indices,
)
from refmount.model import ChunkGrid

GRID = ChunkGrid("a", (3, 4), "/", "c")


def batch(
    coords: list[list[int]], kinds: list[int], lengths: list[int], **inline: bytes
) -> ChunkBatch:
    return ChunkBatch(
        np.array(coords, dtype=np.uint32).reshape(len(coords), -1),
        np.array(kinds, dtype=np.uint8),
        np.array(lengths, dtype=np.uint64),
        {int(row.removeprefix("row")): data for row, data in inline.items()},
    )


def test_batches_in_any_order_make_one_sorted_table() -> None:
    table = ChunkTable.from_batches(
        GRID,
        [
            batch([[2, 3], [0, 1]], [2, 3], [100, 2], row1=b"ab"),
            batch([[1, 0]], [1], [50]),
        ],
    )
    assert len(table) == 3
    assert table.position(0) is None
    first = table.position(1)
    assert first is not None
    assert (table.kind(first), table.length(first), table.inline_data(first)) == (
        ChunkKind.INLINE,
        2,
        b"ab",
    )
    last = table.position(11)
    assert last is not None
    assert (table.kind(last), table.length(last)) == (ChunkKind.VIRTUAL, 100)
    assert table.count_by_kind() == {ChunkKind.NATIVE: 1, ChunkKind.VIRTUAL: 1, ChunkKind.INLINE: 1}


def test_batches_in_grid_order_keep_their_rows_and_inline_chunks() -> None:
    builder = ChunkTableBuilder(GRID)
    builder.add(batch([[0, 0], [0, 2]], [1, 3], [10, 3], row1=b"xyz"))
    builder.add(batch([[2, 1], [2, 3]], [2, 3], [20, 1], row1=b"q"))
    table = builder.build()
    assert [table.position(i) for i in (0, 2, 9, 11)] == [0, 1, 2, 3]
    assert (table.inline_data(1), table.inline_data(3)) == (b"xyz", b"q")
    assert table.sizes(0, 12) == [10, -1, 3, -1, -1, -1, -1, -1, -1, 20, -1, 1]


def test_a_repeated_chunk_is_sorted_like_any_other() -> None:
    builder = ChunkTableBuilder(GRID)
    builder.add(batch([[0, 1], [0, 1]], [3, 1], [2, 8], row0=b"ab"))
    table = builder.build()
    assert len(table) == 2
    first = table.position(1)
    assert first is not None
    assert table.inline_data(first) == b"ab"


def test_sizes_and_the_next_present_chunk() -> None:
    table = ChunkTable.from_batches(GRID, [batch([[0, 1], [1, 0]], [1, 1], [7, 9])])
    assert table.sizes(0, 6) == [-1, 7, -1, -1, 9, -1]
    assert table.sizes(5, 12) == [-1] * 7
    assert table.next_present(0, 12) == 1
    assert table.next_present(2, 12) == 4
    assert table.next_present(2, 4) == 4  # none below the stop: the stop
    assert table.next_present(5, 12) == 12


def test_an_empty_array_has_an_empty_table() -> None:
    table = ChunkTable.from_batches(GRID, [])
    assert len(table) == 0
    assert table.position(0) is None
    assert table.next_present(0, 12) == 12


def test_a_scalar_arrays_one_chunk() -> None:
    scalar = ChunkGrid("s", (), "/", "c")
    table = ChunkTable.from_batches(scalar, [batch([[]], [1], [8])])
    assert table.position(0) == 0


@pytest.mark.parametrize(
    ("coords", "problem"),
    [
        ([[3, 0]], "outside the grid"),
        ([[0, 4]], "outside the grid"),
        ([[0, 0, 0]], "do not fit"),
    ],
)
def test_coordinates_outside_the_grid_are_refused(coords: list[list[int]], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        flat_indices(np.array(coords, dtype=np.uint32), GRID.shape)


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown chunk kinds"):
        ChunkTable.from_batches(GRID, [batch([[0, 0]], [0], [1])])
