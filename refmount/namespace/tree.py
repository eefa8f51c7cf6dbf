"""The immutable namespace: names to inodes, directories inferred from ``/`` in keys.

Two kinds of node share one inode space:

* **static nodes** (inodes ``1 … static_count``) come from the explicitly stored keys. They are
  numbered breadth-first with each directory's children contiguous and sorted by name, so a
  lookup is a binary search and the numbering is the same on every mount of the same set;
* **grid nodes** come after, one block of inodes per chunk grid (Parquet arrays). Nothing is
  stored per chunk: a grid node's name, parent and children are computed from its position
  in the block, so a 5-million-chunk array costs a few integers.

Whether a grid leaf really exists (its Parquet row may be null) is the reference set's
business; the tree only knows the names that could exist.
"""

from __future__ import annotations

import bisect
import logging
from array import array
from collections.abc import Iterable, Iterator, Sequence

from refmount.errors import OnInvalid, ReferenceFormatError
from refmount.model import ROOT_INODE, ChunkGrid, Inode
from refmount.names import key_problem
from refmount.namespace.build import descend, in_order, insert_keys, number_static, remove, settle
from refmount.namespace.directory import BuildDir, Problem
from refmount.namespace.grid import GridBlock, grid_block
from refmount.namespace.nodes import (
    MAX_INODE,
    ChildRun,
    ChunkSpans,
    Entry,
    FileSource,
    GridChunk,
    LeafChunks,
    StaticFile,
)
from refmount.packed import PackedStrings

log = logging.getLogger(__name__)


class Tree:
    """The mounted namespace. Immutable once built; safe to share between tasks and threads."""

    def __init__(
        self,
        names: PackedStrings,
        parents: array[int],
        first_child: array[int],
        child_count: array[int],
        is_dir: bytearray,
        blocks: list[GridBlock],
    ) -> None:
        self._names = names
        self._static_end = len(names)  # static inodes are 1 … _static_end - 1
        self._parents = parents
        self._first_child = first_child
        self._child_count = child_count
        self._is_dir = is_dir
        self._blocks = blocks
        self._block_starts = [block.starts[0] for block in blocks]
        self._blocks_by_owner = {block.owner: block for block in blocks}

    # ----------------------------------------------------------------- building

    @classmethod
    def build(
        cls,
        keys: Iterable[str],
        grids: Sequence[ChunkGrid] = (),
        *,
        source: str,
        skip_invalid: bool = False,
        on_invalid: OnInvalid | None = None,
    ) -> Tree:
        """Build the tree of ``keys`` plus the chunk ``grids``.

        Keys FUSE cannot represent (see ``key_problem``), a key that is both a file and a
        directory, a key that is also the name of a chunk of its array, an array whose path
        FUSE cannot represent and an array with more chunks than there are inode numbers raise
        ``ReferenceFormatError`` naming them; with ``skip_invalid`` they are left out (an
        array whose path is invalid with its metadata key), each reported to ``on_invalid``
        or, without one, in a warning.
        """
        root = BuildDir(0)
        problems: list[Problem] = []
        key_count = insert_keys(root, keys, problems)
        active = _admit_grids(root, grids, key_count, problems)
        settle(root, problems)
        _report(in_order(problems), source, skip_invalid, on_invalid)
        tree = cls._number(root, grids, active)
        collisions = tree._grid_collisions()
        if collisions and skip_invalid:
            skipped = _remove_collisions(root, grids, active, collisions)
            _report(skipped, source, skip_invalid, on_invalid)
            tree = cls._number(root, grids, active)
        else:
            _report(collisions, source, skip_invalid, on_invalid)
        del root  # the directories as built are garbage now: copy the names in their place
        tree._names.compact()
        return tree

    @classmethod
    def _number(cls, root: BuildDir, grids: Sequence[ChunkGrid], active: Sequence[bool]) -> Tree:
        columns = number_static(root)
        table = columns.names.table()
        parents, first_child, child_count = (
            columns.parents,
            columns.first_child,
            columns.child_count,
        )
        tree = cls(table, parents, first_child, child_count, columns.is_dir, [])
        blocks: list[GridBlock] = []
        next_inode = len(parents)
        for grid_id, grid in enumerate(grids):
            if not active[grid_id]:
                continue
            owner = tree._static_path(grid.array)
            block = grid_block(grid_id, grid, owner, next_inode)
            blocks.append(block)
            next_inode = block.end
        return cls(table, parents, first_child, child_count, columns.is_dir, blocks)

    def _static_path(self, path: str) -> Inode:
        inode = ROOT_INODE
        for part in path.split("/") if path else ():
            child = self._static_child(inode, part)
            assert child is not None, path
            inode = child
        return inode

    def _grid_collisions(self) -> list[tuple[str, str]]:
        collisions = []
        for block in self._blocks:
            start = self._first_child[block.owner]
            for child in range(start, start + self._child_count[block.owner]):
                if block.child_named(None, 0, self._names[child]) is not None:
                    key = self.path(Inode(child))
                    collisions.append((key, "name is also a chunk key of its array"))
        return collisions

    # ----------------------------------------------------------------- queries

    @property
    def static_count(self) -> int:
        """Return how many static nodes there are (inodes ``1 … static_count``)."""
        return len(self._names) - 1

    @property
    def node_count(self) -> int:
        """Return how many nodes could exist, counting every grid position."""
        return (self._blocks[-1].end - 1) if self._blocks else self.static_count

    def is_static(self, inode: Inode) -> bool:
        """Return True when the node comes from an explicitly stored key."""
        return 1 <= inode < self._static_end

    def exists(self, inode: int) -> bool:
        """Return True when ``inode`` is a number this tree gave out."""
        return 1 <= inode <= self.node_count

    def is_dir(self, inode: Inode) -> bool:
        """Return True for directories."""
        if self.is_static(inode):
            return bool(self._is_dir[inode])
        block, level, _ = self._grid_node(inode)
        return not block.is_leaf(level)

    def parent(self, inode: Inode) -> Inode:
        """Return the parent directory (the root is its own parent)."""
        if self.is_static(inode):
            return Inode(self._parents[inode])
        block, level, index = self._grid_node(inode)
        return block.parent(level, index)

    def name(self, inode: Inode) -> str:
        """Return the node's own name (``""`` for the root)."""
        if self.is_static(inode):
            return self._names[inode]
        block, level, index = self._grid_node(inode)
        return block.name(level, index)

    def path(self, inode: Inode) -> str:
        """Return the node's full path below the mountpoint, which is its key for files."""
        parts: list[str] = []
        while inode != ROOT_INODE:
            parts.append(self.name(inode))
            inode = self.parent(inode)
        return "/".join(reversed(parts))

    def file_source(self, inode: Inode) -> FileSource:
        """Return where a file's reference comes from."""
        if self.is_static(inode):
            return StaticFile(self.path(inode))
        block, level, index = self._grid_node(inode)
        return GridChunk(block.grid_id, block.chunk_index(level, index))

    def lookup(self, parent: Inode, name: str) -> Inode | None:
        """Return the child of directory ``parent`` called ``name``; handles ``.`` and ``..``."""
        if name == ".":
            return parent
        if name == "..":
            return self.parent(parent)
        if self.is_static(parent):
            child = self._static_child(parent, name)
            if child is not None:
                return child
            block = self._blocks_by_owner.get(parent)
            return None if block is None else block.child_named(None, 0, name)
        block, level, index = self._grid_node(parent)
        if block.is_leaf(level):
            return None
        return block.child_named(level, index, name)

    def children(self, inode: Inode, start: int = 0) -> Iterator[tuple[Entry, int]]:
        """Yield a directory's entries from position ``start``, each with the next position.

        Positions are stable (the tree never changes), so they serve as readdir offsets.
        Static children come first, sorted by name; grid children follow in index order.
        """
        if self.is_static(inode):
            first = self._first_child[inode]
            count = self._child_count[inode]
            for position in range(start, count):
                child = Inode(first + position)
                yield Entry(self._names[child], child, bool(self._is_dir[child])), position + 1
            block = self._blocks_by_owner.get(inode)
            if block is not None:
                yield from self._grid_children(block, None, 0, max(start - count, 0), count)
            return
        block, level, index = self._grid_node(inode)
        if not block.is_leaf(level):
            yield from self._grid_children(block, level, index, start, 0)

    def child_run(self, inode: Inode, start: int, most: int) -> ChildRun | None:
        """Return up to ``most`` entries of a directory from position ``start``, as
        ``children`` gives them, in one run: stored keys and grid nodes are never mixed.
        None at the end."""
        if self.is_static(inode):
            first = self._first_child[inode]
            count = self._child_count[inode]
            if start < count:
                stop = min(count, start + most)
                return ChildRun(
                    start,
                    first + start,
                    self._names.utf8_run(first + start, first + stop),
                    self._is_dir[first + start : first + stop],
                    grid=False,
                )
            block = self._blocks_by_owner.get(inode)
            if block is None:
                return None
            return self._grid_run(block, None, 0, start - count, most, count)
        block, level, index = self._grid_node(inode)
        if block.is_leaf(level):
            return None
        return self._grid_run(block, level, index, start, most, 0)

    def _grid_run(
        self, block: GridBlock, level: int | None, index: int, start: int, most: int, offset: int
    ) -> ChildRun | None:
        child_level, first, count = block.child_range(level, index)
        if start >= count:
            return None
        stop = min(count, start + most)
        names = block.names_utf8(child_level, first + start, first + stop)
        is_dir = 0 if block.is_leaf(child_level) else 1
        return ChildRun(
            offset + start,
            block.inode(child_level, first + start),
            names,
            bytes([is_dir]) * len(names),
            grid=True,
        )

    def leaf_chunks(self, inode: Inode) -> LeafChunks | None:
        """Say which chunks a directory lists, for work done on them in bulk (listing sizes,
        the neighbour index).

        For a directory whose grid children are chunk files: the entry at position ``p`` (as
        ``children`` numbers them, from 0) at or after ``position`` is chunk
        ``first + p - position``. None for any other directory.
        """
        found = self._grid_entries(inode)
        if found is None:
            return None
        block, child_level, first, skip, count = found
        if not block.is_leaf(child_level):
            return None
        return LeafChunks(block.grid_id, block.chunk_index(child_level, first), skip, count)

    def chunk_spans(self, inode: Inode) -> ChunkSpans | None:
        """Say which chunks each grid entry of a directory holds (a listing skips the entries
        that hold no present chunk); None for a directory without grid entries."""
        found = self._grid_entries(inode)
        if found is None:
            return None
        block, child_level, first, skip, count = found
        span = block.span(child_level)
        return ChunkSpans(block.grid_id, first * span, skip, count, span)

    def _grid_entries(self, inode: Inode) -> tuple[GridBlock, int, int, int, int] | None:
        """Return the grid entries a directory lists: their block, level, first index, how
        many static entries come before them, and how many; None for a grid leaf or a static
        directory without grid entries."""
        if self.is_static(inode):
            block = self._blocks_by_owner.get(inode)
            if block is None:
                return None
            level: int | None = None
            index, skip = 0, self._child_count[inode]
        else:
            block, level, index = self._grid_node(inode)
            if block.is_leaf(level):
                return None
            skip = 0
        child_level, first, count = block.child_range(level, index)
        return block, child_level, first, skip, count

    def _grid_children(
        self, block: GridBlock, level: int | None, index: int, start: int, offset: int
    ) -> Iterator[tuple[Entry, int]]:
        child_level, first, count = block.child_range(level, index)
        is_dir = not block.is_leaf(child_level)
        for position in range(start, count):
            child_index = first + position
            child = block.inode(child_level, child_index)
            name = block.name(child_level, child_index)
            yield Entry(name, child, is_dir), offset + position + 1

    def _static_child(self, parent: Inode, name: str) -> Inode | None:
        if not self._is_dir[parent]:
            return None
        first = self._first_child[parent]
        wanted = name.encode("utf-8", "surrogateescape")
        position = self._names.find(wanted, first, first + self._child_count[parent])
        return None if position is None else Inode(position)

    def _grid_node(self, inode: int) -> tuple[GridBlock, int, int]:
        position = bisect.bisect_right(self._block_starts, inode) - 1
        if position < 0 or inode >= self._blocks[position].end:
            raise KeyError(inode)
        block = self._blocks[position]
        level, index = block.locate(inode)
        return block, level, index


def _admit_grids(
    root: BuildDir, grids: Sequence[ChunkGrid], key_count: int, problems: list[Problem]
) -> list[bool]:
    """Return which grids can be mounted, making the directories of those that can; an array
    path FUSE cannot represent, or too many chunks for the inode space, go to ``problems``."""
    active = [True] * len(grids)
    next_inode = 1 << 32  # grid inodes follow the static ones: leave room for 2**32 of those
    for grid_id, grid in enumerate(grids):
        event = key_count + grid_id
        problem = key_problem(grid.array) if grid.array else None
        if problem is not None:
            active[grid_id] = False
            # Only keys FUSE cannot represent can start with an invalid path plus "/", and
            # those are found as they arrive: the problems found later do not matter here.
            below = grid.array + "/"
            if not any(key.startswith(below) for _, key, _ in problems):
                problems.append((event, grid.array, f"array path: {problem}"))
            continue
        end = grid_block(grid_id, grid, ROOT_INODE, next_inode).end
        if end > MAX_INODE:
            active[grid_id] = False
            problem = f"array has {grid.count} chunks, too many to mount"
            problems.append((event, grid.array, problem))
            continue
        next_inode = end
        if grid.array:
            descend(root, grid.array.split("/"), event)
    return active


def _remove_collisions(
    root: BuildDir,
    grids: Sequence[ChunkGrid],
    active: list[bool],
    collisions: list[tuple[str, str]],
) -> list[tuple[str, str]]:
    """Remove each stored key that is also a chunk of its array, with whatever is below it
    (grids included, marked inactive); return ``(key, problem)`` of every key removed."""
    skipped: list[tuple[str, str]] = []
    for path, problem in collisions:
        removed = remove(root, path)
        skipped.extend((key, problem if key == path else f"{path!r}: {problem}") for key in removed)
        for grid_id, grid in enumerate(grids):
            if grid.array == path or grid.array.startswith(path + "/"):
                active[grid_id] = False
    return skipped


def _report(
    problems: list[tuple[str, str]], source: str, skip_invalid: bool, on_invalid: OnInvalid | None
) -> None:
    if not problems:
        return
    if not skip_invalid:
        key, problem = problems[0]
        more = f" (and {len(problems) - 1} more invalid keys)" if len(problems) > 1 else ""
        raise ReferenceFormatError(source, key, problem + more)
    for key, problem in problems:
        if on_invalid is not None:
            on_invalid(ReferenceFormatError(source, key, problem))
        else:
            log.warning("%s: skipping key %r: %s", source, key, problem)
