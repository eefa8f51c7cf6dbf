"""Tests of grid blocks: where a chunk grid's nodes sit in the inode space, and their names,
parents and children computed from positions."""

from __future__ import annotations

from refmount.model import ROOT_INODE, ChunkGrid, Inode
from refmount.namespace.grid import grid_block


def test_a_slash_grid_has_one_level_per_dimension() -> None:
    grid = ChunkGrid(array="a", shape=(2, 3), separator="/")
    block = grid_block(0, grid, Inode(ROOT_INODE), 100)
    assert block.levels == (2, 6)
    assert block.starts == (100, 102)
    assert block.end == 108
    assert [block.name(0, i) for i in range(2)] == ["0", "1"]
    assert block.names_utf8(1, 0, 3) == [b"0", b"1", b"2"]
    assert block.parent(1, 4) == block.inode(0, 1)
    assert block.child_range(0, 1) == (1, 3, 3)
    assert block.child_named(0, 1, "2") == block.inode(1, 5)
    assert block.child_named(0, 1, "3") is None
    assert block.locate(105) == (1, 3)
    assert block.span(0) == 3


def test_a_dot_grid_has_one_level_of_leaves() -> None:
    grid = ChunkGrid(array="a", shape=(2, 3), separator=".")
    block = grid_block(0, grid, Inode(ROOT_INODE), 10)
    assert block.levels == (6,)
    assert block.name(0, 4) == "1.1"
    assert block.child_named(None, 0, "1.2") == block.inode(0, 5)
    assert block.child_named(None, 0, "01.2") is None
    assert block.is_leaf(0)
