"""Chunk grids in the inode space: one block of inode numbers per array, laid out level by
level, every grid node's name, parent and children computed from its position."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from refmount.model import ChunkGrid, Inode, canonical_index, ravel, unravel


@dataclass(frozen=True, slots=True)
class GridBlock:
    """Where one chunk grid's nodes sit in the inode space, level by level.

    Level ``l`` holds ``levels[l]`` nodes numbered from ``starts[l]``. With a prefix (zarr v3's
    ``c``) level 0 is the prefix directory. The index levels follow: one level of leaves for the
    ``.`` separator, one level per dimension for ``/`` (the last level holds the leaves).
    """

    grid_id: int
    grid: ChunkGrid
    owner: Inode
    levels: tuple[int, ...]
    starts: tuple[int, ...]

    @property
    def end(self) -> int:
        """Return one past the last inode of the block."""
        return self.starts[-1] + self.levels[-1]

    @property
    def first_index_level(self) -> int:
        """Return the level of the first index component (after the prefix directory)."""
        return 1 if self.grid.prefix and self.grid.shape else 0

    def is_leaf(self, level: int) -> bool:
        """Return True when nodes at ``level`` are chunk files."""
        return level == len(self.levels) - 1

    def inode(self, level: int, index: int) -> Inode:
        """Return the inode of node ``index`` at ``level``."""
        return Inode(self.starts[level] + index)

    def locate(self, inode: int) -> tuple[int, int]:
        """Return ``(level, index)`` of an inode inside the block."""
        level = bisect.bisect_right(self.starts, inode) - 1
        return level, inode - self.starts[level]

    def dimension(self, level: int) -> int:
        """Return the grid dimension that an index level spells (``/`` separator only)."""
        return level - self.first_index_level

    def name(self, level: int, index: int) -> str:
        """Return the name of a node."""
        grid = self.grid
        if not grid.shape:
            return grid.scalar_name()
        if level < self.first_index_level:
            return grid.prefix
        if grid.separator != "/":
            return grid.separator.join(str(i) for i in unravel(index, grid.shape))
        return str(index % grid.shape[self.dimension(level)])

    def names_utf8(self, level: int, start: int, stop: int) -> list[bytes]:
        """Return the names of nodes ``[start, stop)`` at ``level``, UTF-8 encoded."""
        grid = self.grid
        if grid.shape and level >= self.first_index_level and grid.separator == "/":
            extent = grid.shape[self.dimension(level)]
            return [b"%d" % (index % extent) for index in range(start, stop)]
        return [self.name(level, index).encode("utf-8") for index in range(start, stop)]

    def parent(self, level: int, index: int) -> Inode:
        """Return the inode of a node's parent directory."""
        if level == 0:
            return self.owner
        if level == self.first_index_level:
            return self.inode(0, 0)
        extent = self.grid.shape[self.dimension(level)]
        return self.inode(level - 1, index // extent)

    def child_range(self, level: int | None, index: int) -> tuple[int, int, int]:
        """Return ``(child level, first index, count)`` for the children of a grid directory.

        ``level`` None means the owning array directory.
        """
        child_level = 0 if level is None else level + 1
        if level is None or level < self.first_index_level:
            return child_level, 0, self.levels[child_level]
        extent = self.grid.shape[self.dimension(child_level)]
        return child_level, index * extent, extent

    def child_named(self, level: int | None, index: int, name: str) -> Inode | None:
        """Return the child of a grid directory called ``name``, if the grid has one."""
        grid = self.grid
        child_level, first, count = self.child_range(level, index)
        if child_level < self.first_index_level or not grid.shape:
            return self.inode(child_level, 0) if name == self.name(child_level, 0) else None
        if grid.separator != "/":
            parts = name.split(grid.separator)
            if len(parts) != len(grid.shape):
                return None
            indices = [canonical_index(p, e) for p, e in zip(parts, grid.shape, strict=True)]
            if any(i is None for i in indices):
                return None
            return self.inode(child_level, ravel([i or 0 for i in indices], grid.shape))
        value = canonical_index(name, count)
        return None if value is None else self.inode(child_level, first + value)

    def span(self, level: int) -> int:
        """Return how many chunks a node at ``level`` holds (1 for a chunk file)."""
        grid = self.grid
        if self.is_leaf(level):
            return 1
        if level < self.first_index_level:
            return grid.count
        span = 1
        for extent in grid.shape[self.dimension(level) + 1 :]:
            span *= extent
        return span

    def chunk_index(self, level: int, index: int) -> int:
        """Return the chunk number of a leaf node (leaves are numbered in C order)."""
        return index


def grid_block(grid_id: int, grid: ChunkGrid, owner: Inode, start: int) -> GridBlock:
    """Return the block of grid ``grid_id`` below the directory ``owner``, from inode ``start``."""
    levels: list[int] = []
    if grid.prefix and grid.shape:
        levels.append(1)
    if not grid.shape:
        levels.append(1)
    elif grid.separator != "/":
        levels.append(grid.count)
    else:
        nodes = 1
        for extent in grid.shape:
            nodes *= extent
            levels.append(nodes)
    starts: list[int] = []
    position = start
    for count in levels:
        starts.append(position)
        position += count
    return GridBlock(grid_id, grid, owner, tuple(levels), tuple(starts))
