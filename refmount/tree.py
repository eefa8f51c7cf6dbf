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
import collections
import itertools
import logging
import operator
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from refmount.errors import ReferenceFormatError
from refmount.model import ROOT_INODE, ChunkGrid, Inode, ravel, unravel

log = logging.getLogger(__name__)

NAME_MAX = 255
"""Longest name, in bytes, that Linux filesystems accept."""

MAX_INODE = 2**63 - 1
"""The largest inode number handed out (the kernel's are 64 bits; leave the sign bit alone)."""


@dataclass(frozen=True, slots=True)
class StaticFile:
    """A file node whose reference is stored under ``key``."""

    key: str


@dataclass(frozen=True, slots=True)
class GridChunk:
    """A file node that is chunk ``index`` of chunk grid number ``grid``."""

    grid: int
    index: int


FileSource = StaticFile | GridChunk


class Entry(NamedTuple):
    """One directory entry: its name, inode, and whether it is a directory.

    A named tuple rather than a dataclass: listings build one per name, and a tuple is the
    cheapest object Python makes.
    """

    name: str
    inode: Inode
    is_dir: bool


def key_problem(key: str) -> str | None:
    """Return why ``key`` cannot be a path in a FUSE tree, or None when it can."""
    if key == "":
        return "empty key"
    if key.startswith("/"):
        return "key starts with '/'"
    if key.endswith("/"):
        return "key ends with '/'"
    if "\x00" in key:
        return "key contains a NUL character"
    for part in key.split("/"):
        if part == "":
            return "key contains an empty path component ('//')"
        if part in (".", ".."):
            return f"key contains a {part!r} path component"
        try:
            encoded = part.encode("utf-8")
        except UnicodeEncodeError:
            return "key is not valid UTF-8"
        if len(encoded) > NAME_MAX:
            return f"path component is {len(encoded)} bytes long (the limit is {NAME_MAX})"
    return None


def canonical_index(name: str, extent: int) -> int | None:
    """Return the chunk index that ``name`` spells, or None unless it is canonical and in range.

    Canonical means plain ASCII decimal without sign, spaces or leading zeros.
    """
    if not name.isascii() or not name.isdigit() or (len(name) > 1 and name[0] == "0"):
        return None
    value = int(name)
    return value if value < extent else None


class NameTable:
    """Node names as UTF-8 in one blob plus an array of end positions.

    A million short names cost about 15 bytes each this way, instead of about 60 as ``str``
    objects in a list; ``table[i]`` decodes name ``i``. Names are valid UTF-8 (``key_problem``
    refuses the rest).
    """

    __slots__ = ("_blob", "_ends")

    def __init__(self, names: Iterable[str]) -> None:
        blob = bytearray()
        ends = array("q")
        for name in names:
            blob += name.encode("utf-8")
            ends.append(len(blob))
        self._blob: bytes | bytearray = bytes(blob)
        self._ends = ends

    @classmethod
    def from_utf8(cls, blob: bytes | bytearray, ends: array[int]) -> NameTable:
        """Return the table of names already encoded: name ``i`` is ``blob[ends[i-1]:ends[i]]``.

        A ``bytearray`` is kept as it is, and must not change: ``freeze`` makes it ``bytes``
        later, when the copy costs less memory.
        """
        table = cls.__new__(cls)
        table._blob = blob
        table._ends = ends
        return table

    def freeze(self) -> None:
        """Hold the names as ``bytes``, which slice a little faster than a ``bytearray``."""
        if isinstance(self._blob, bytearray):
            self._blob = bytes(self._blob)

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, index: int) -> str:
        ends = self._ends
        start = ends[index - 1] if index > 0 else 0
        return self._blob[start : ends[index]].decode("utf-8")


_BOTH = "is both a file and a directory"

_MERGE_WAYS = 16
"""The most sorted runs of one directory's file names merged at once; more are sorted in blocks
first, so that the merge stays cheap."""

_BATCH = 1 << 16
"""About how many names exist as Python objects at once while a directory's names are sorted."""

_Problem = tuple[int, str, str]
"""A problem found while building: ``(event, key, problem)``.

``event`` is the index of the key (``len(keys) + grid id`` for a grid's array path) whose
arrival caused the problem. Together with the depth of ``key`` it gives the order in which
the problems are reported: a key's problems come shallowest first, and a key causes at most
one problem per depth.
"""


class _Dir:
    """A directory while the tree is being built.

    Subdirectories are in ``dirs`` (None until there is one). File names are kept as UTF-8,
    about 15 bytes a name instead of the 100 or so of a ``str`` in a dict, which matters in a
    directory of a million chunks: ``blob`` is empty while there is no file, is the one name
    while there is one, and otherwise holds the names one after the other, name ``j`` ending
    at ``ends[j]`` (``ends`` is None until then: a directory of one chunk is common too).
    UTF-8 bytes sort like the code points they encode, so encoded names compare as ``str``
    would; names are never empty.

    While keys arrive (``add_file``) the names are in arrival order, made of ascending runs.
    ``runs`` is None while there is one run; otherwise it holds where each later run starts
    (recorded up to ``_MERGE_WAYS + 1`` of them, enough to know there are too many to merge),
    and ``arrivals[j - runs[0]]`` is the key index of name ``j`` for names after the first run.
    A run is strictly ascending, so a name repeated is always in a later run than its first
    arrival, and its key index is there to report it.

    ``settle`` then sorts the names, drops repeats and hides the names that are also
    subdirectories: after it the file names are sorted without repeats, and the names in
    ``hidden`` (also subdirectories, or removed with ``_remove``) are not part of the tree.
    """

    __slots__ = ("arrivals", "blob", "created", "dirs", "ends", "hidden", "runs")

    def __init__(self, created: int | None) -> None:
        self.created = created
        """The index of the key (or grid) whose arrival made this directory, when its parent
        may have had a file of the same name by then (None when it surely had not)."""
        self.dirs: dict[str, _Dir] | None = None
        self.blob: bytes | bytearray = b""
        self.ends: array[int] | None = None
        self.arrivals: array[int] | None = None
        self.runs: array[int] | None = None
        self.hidden: set[str] | None = None

    # ----------------------------------------------------------------- while keys arrive

    def add_file(self, name: bytes, arrival: int) -> None:
        """Append the encoded file name that key number ``arrival`` ends with."""
        ends = self.ends
        if ends is None:
            if not self.blob:
                self.blob = name
                return
            ends = self.ends = array("q", [len(self.blob)])
            self.blob = bytearray(self.blob)
        blob = self.blob
        assert isinstance(blob, bytearray)
        count = len(ends)
        if name <= blob[ends[count - 2] if count > 1 else 0 :]:
            if self.runs is None:
                self.runs = array("q")
                self.arrivals = array("q")
            if len(self.runs) <= _MERGE_WAYS:
                self.runs.append(count)
        if self.arrivals is not None:
            self.arrivals.append(arrival)
        blob += name
        ends.append(len(blob))

    def subdirectory(self, name: str, arrival: int) -> _Dir:
        """Return the subdirectory ``name``, made now (by key number ``arrival``) if need be."""
        dirs = self.dirs
        if dirs is None:
            dirs = self.dirs = {}
        child = dirs.get(name)
        if child is None:
            # With one run so far the names are sorted, and a name not there now is refused
            # later: only a file that came first can also be this directory.
            clash = bool(self.blob) and (
                self.runs is not None or self.find(name.encode()) is not None
            )
            child = dirs[name] = _Dir(arrival if clash else None)
        return child

    # ----------------------------------------------------------------- once they are all in

    def settle(self, path: str, problems: list[_Problem]) -> None:
        """Sort the file names, drop repeats and hide names that are also directories.

        ``path`` is the directory's own path; each repeat, and each file that is also a
        directory, is added to ``problems``.
        """
        if self.runs is not None:
            for arrival, repeat in self._sort():
                problems.append((arrival, _join(path, repeat.decode()), "duplicate key"))
            self.runs = self.arrivals = None
        for name, child in (self.dirs or {}).items():
            if child.created is not None and self.find(name.encode()) is not None:
                self.hide(name)
                problems.append((child.created, _join(path, name), _BOTH))

    def _sort(self) -> list[tuple[int, bytes]]:
        """Sort the names of several runs, keep one of each; return the others' arrivals."""
        blob, ends, runs, arrivals = self.blob, self.ends, self.runs, self.arrivals
        assert isinstance(blob, bytearray)
        assert ends is not None
        assert runs is not None
        assert arrivals is not None
        if len(runs) > _MERGE_WAYS:
            starts = _sort_blocks(blob, ends, arrivals, runs[0])
        else:
            starts = [0, *runs]
        names = _Runs(bytes(blob), ends, arrivals, runs[0])
        del blob
        self.blob = b""  # the snapshot in names replaces the bytearray while they merge
        self.blob, self.ends, repeats = names.merge(starts)
        return repeats

    # ----------------------------------------------------------------- names by position

    def file_count(self) -> int:
        """Return how many file names there are (hidden ones included)."""
        if self.ends is not None:
            return len(self.ends)
        return 1 if self.blob else 0

    def start(self, index: int) -> int:
        """Return where file name ``index`` starts in ``blob``."""
        return self.ends[index - 1] if index and self.ends is not None else 0

    def name(self, index: int) -> bytes:
        """Return file name ``index``, encoded."""
        ends = self.ends
        if ends is None:
            return bytes(self.blob)
        return bytes(self.blob[ends[index - 1] if index else 0 : ends[index]])

    def position(self, name: bytes) -> int:
        """Return how many file names sort before ``name`` (once they are sorted)."""
        return bisect.bisect_left(range(self.file_count()), name, key=self.name)

    def find(self, name: bytes) -> int | None:
        """Return the position of a file name (hidden or not), or None."""
        if self.ends is None:
            return 0 if self.blob == name else None
        position = self.position(name)
        found = position < self.file_count() and self.name(position) == name
        return position if found else None

    # ----------------------------------------------------------------- after settling

    def hide(self, name: str) -> None:
        """Leave the file ``name`` out of the tree."""
        if self.hidden is None:
            self.hidden = set()
        self.hidden.add(name)

    def has_file(self, name: str) -> bool:
        """Return True when ``name`` is a file of this directory."""
        if self.hidden is not None and name in self.hidden:
            return False
        if self.dirs is not None and name in self.dirs:
            return False
        return self.find(name.encode()) is not None

    def listed_ranges(self) -> list[tuple[int, int]]:
        """Return the ranges ``[start, stop)`` of file positions that are not hidden."""
        skipped = (self.find(name.encode()) for name in self.hidden or ())
        ranges = []
        start = 0
        for position in sorted(found for found in skipped if found is not None):
            ranges.append((start, position))
            start = position + 1
        ranges.append((start, self.file_count()))
        return [(start, stop) for start, stop in ranges if start < stop]

    def file_names(self) -> Iterator[str]:
        """Yield the names of the files, sorted, hidden ones left out."""
        hidden = self.hidden or set()
        for index in range(self.file_count()):
            name = self.name(index).decode()
            if name not in hidden:
                yield name


class _Runs:
    """One directory's file names while they are sorted: ascending runs of UTF-8 names.

    ``data`` holds the names one after the other, name ``j`` ending at ``ends[j]``. The names
    before ``first`` are the first run, each the first arrival of its name; the key index of
    name ``j >= first`` is ``arrivals[j - first]``.
    """

    __slots__ = ("arrivals", "data", "ends", "first")

    def __init__(self, data: bytes, ends: array[int], arrivals: array[int], first: int) -> None:
        self.data = data
        self.ends = ends
        self.arrivals = arrivals
        self.first = first

    def name(self, index: int) -> bytes:
        """Return name ``index``."""
        ends = self.ends
        return self.data[ends[index - 1] if index else 0 : ends[index]]

    def names(self, start: int, stop: int) -> list[bytes]:
        """Return names ``start … stop - 1``."""
        if stop <= start:
            return []
        ends = self.ends
        firsts = ends[start - 1 : stop - 1] if start else itertools.chain((0,), ends[: stop - 1])
        return list(map(self.data.__getitem__, map(slice, firsts, ends[start:stop])))

    def arrival(self, index: int) -> int:
        """Return the key index of name ``index`` (-1 in the first run, which came first)."""
        return -1 if index < self.first else self.arrivals[index - self.first]

    def merge(self, starts: list[int]) -> tuple[bytearray, array[int], list[tuple[int, bytes]]]:
        """Merge the sorted runs that begin at ``starts``, keeping one name of each.

        Return the names sorted without repeats, as a blob and end offsets, and the
        ``(key index, name)`` of each repeat dropped.
        """
        blob = bytearray()
        ends = array("q")
        repeats: list[tuple[int, bytes]] = []
        bounds = [[start, stop] for start, stop in itertools.pairwise([*starts, len(self.ends)])]
        while bounds:
            batch = self._next_batch(bounds, repeats)
            base = len(blob)
            blob += b"".join(batch)
            ends.extend(
                map(operator.add, itertools.accumulate(map(len, batch)), itertools.repeat(base))
            )
            bounds = [bound for bound in bounds if bound[0] < bound[1]]
        return blob, ends, repeats

    def _next_batch(self, bounds: list[list[int]], repeats: list[tuple[int, bytes]]) -> list[bytes]:
        """Take the next names in sorted order from the runs ``[start, stop)`` in ``bounds``.

        Every run gives up its names up to a cutoff, the smallest of the runs' names a step
        ahead, so that the batch holds every name up to the cutoff and no run gives more
        than a step (or a few more: a sorted block may hold a name twice). The batch comes
        back sorted without repeats; ``(key index, name)`` of each repeat goes to ``repeats``.
        """
        step = max(1, _BATCH // len(bounds))
        cutoff = min(self.name(min(start + step, stop) - 1) for start, stop in bounds)
        taken: list[tuple[int, int]] = []
        batch: list[bytes] = []
        for bound in bounds:
            start, stop = bound
            bound[0] = bisect.bisect_right(range(stop), cutoff, start, stop, key=self.name)
            taken.append((start, bound[0]))
            batch += self.names(start, bound[0])
        batch.sort()
        if any(map(operator.eq, batch, itertools.islice(batch, 1, None))):
            batch = self._without_repeats(taken, repeats)
        return batch

    def _without_repeats(
        self, taken: list[tuple[int, int]], repeats: list[tuple[int, bytes]]
    ) -> list[bytes]:
        """Sort the names ``taken``, keeping each one's first arrival; others go to ``repeats``."""
        named = sorted(
            (self.name(index), self.arrival(index))
            for start, stop in taken
            for index in range(start, stop)
        )
        unique: list[bytes] = []
        for name, arrival in named:
            if unique and unique[-1] == name:
                repeats.append((arrival, name))
            else:
                unique.append(name)
        return unique


def _sort_blocks(blob: bytearray, ends: array[int], arrivals: array[int], first: int) -> list[int]:
    """Sort the names after the first run in place, in blocks; return where the runs start.

    For names that arrived in too many runs to merge at once: the blocks are few enough to
    merge, and small enough to sort as Python objects. The arrivals move with their names.
    """
    names = _Runs(bytes(blob), ends, arrivals, first)
    count = len(ends)
    size = max(_BATCH, -(-(count - first) // _MERGE_WAYS))
    starts = [0]
    for start in range(first, count, size):
        stop = min(start + size, count)
        block = names.names(start, stop)
        order = sorted(range(len(block)), key=block.__getitem__)
        block = [block[position] for position in order]
        offset = ends[start - 1]
        blob[offset : ends[stop - 1]] = b"".join(block)
        lengths = itertools.accumulate(map(len, block))
        ends[start:stop] = array("q", map(operator.add, lengths, itertools.repeat(offset)))
        moved = arrivals[start - first : stop - first]
        arrivals[start - first : stop - first] = array("q", [moved[position] for position in order])
        starts.append(start)
    return starts


@dataclass(frozen=True, slots=True)
class _GridBlock:
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

    def chunk_index(self, level: int, index: int) -> int:
        """Return the chunk number of a leaf node (leaves are numbered in C order)."""
        return index


def _grid_block(grid_id: int, grid: ChunkGrid, owner: Inode, start: int) -> _GridBlock:
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
    return _GridBlock(grid_id, grid, owner, tuple(levels), tuple(starts))


class Tree:
    """The mounted namespace. Immutable once built; safe to share between tasks and threads."""

    def __init__(
        self,
        names: NameTable,
        parents: array[int],
        first_child: array[int],
        child_count: array[int],
        is_dir: bytearray,
        blocks: list[_GridBlock],
    ) -> None:
        self._names = names
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
    ) -> Tree:
        """Build the tree of ``keys`` plus the chunk ``grids``.

        Keys FUSE cannot represent (see ``key_problem``), a key that is both a file and a
        directory, a key that is also the name of a chunk of its array, an array whose path
        FUSE cannot represent and an array with more chunks than there are inode numbers raise
        ``ReferenceFormatError`` naming them; with ``skip_invalid`` they are left out with one
        warning each (an array whose path is invalid is left out with its metadata key).
        """
        root = _Dir(0)
        problems: list[_Problem] = []
        key_count = _insert_keys(root, keys, problems)
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
            end = _grid_block(grid_id, grid, ROOT_INODE, next_inode).end
            if end > MAX_INODE:
                active[grid_id] = False
                problem = f"array has {grid.count} chunks, too many to mount"
                problems.append((event, grid.array, problem))
                continue
            next_inode = end
            if grid.array:
                _descend(root, grid.array.split("/"), event)
        _settle(root, problems)
        _report(_in_order(problems), source, skip_invalid)
        tree = cls._number(root, grids, active)
        collisions = tree._grid_collisions()
        if collisions and skip_invalid:
            skipped: list[tuple[str, str]] = []
            for path, problem in collisions:
                removed = _remove(root, path)
                skipped.extend(
                    (key, problem if key == path else f"{path!r}: {problem}") for key in removed
                )
                for grid_id, grid in enumerate(grids):
                    if grid.array == path or grid.array.startswith(path + "/"):
                        active[grid_id] = False
            _report(skipped, source, skip_invalid)
            tree = cls._number(root, grids, active)
        else:
            _report(collisions, source, skip_invalid)
        del root  # the directories as built are garbage now: copy the names in their place
        tree._names.freeze()
        return tree

    @classmethod
    def _number(cls, root: _Dir, grids: Sequence[ChunkGrid], active: Sequence[bool]) -> Tree:
        columns = _number_static(root)
        table = NameTable.from_utf8(columns.blob, columns.ends)
        parents, first_child, child_count = (
            columns.parents,
            columns.first_child,
            columns.child_count,
        )
        tree = cls(table, parents, first_child, child_count, columns.is_dir, [])
        blocks: list[_GridBlock] = []
        next_inode = len(parents)
        for grid_id, grid in enumerate(grids):
            if not active[grid_id]:
                continue
            owner = tree._static_path(grid.array)
            block = _grid_block(grid_id, grid, owner, next_inode)
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
        return 1 <= inode < len(self._names)

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

    def leaf_chunks(self, inode: Inode) -> tuple[int, int, int] | None:
        """Say which chunks a directory lists, for listings that fetch sizes in bulk.

        For a directory whose grid children are chunk files, return ``(grid id, chunk index
        of the first, its position)``: the entry at position ``p`` (as ``children`` numbers
        them, from 0) at or after that position is chunk ``first + p - position``. None for
        any other directory.
        """
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
        child_level, first, _ = block.child_range(level, index)
        if not block.is_leaf(child_level):
            return None
        return block.grid_id, block.chunk_index(child_level, first), skip

    def _grid_children(
        self, block: _GridBlock, level: int | None, index: int, start: int, offset: int
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
        end = first + self._child_count[parent]
        position = bisect.bisect_left(self._names, name, first, end)
        if position < end and self._names[position] == name:
            return Inode(position)
        return None

    def _grid_node(self, inode: int) -> tuple[_GridBlock, int, int]:
        position = bisect.bisect_right(self._block_starts, inode) - 1
        if position < 0 or inode >= self._blocks[position].end:
            raise KeyError(inode)
        block = self._blocks[position]
        level, index = block.locate(inode)
        return block, level, index


def _insert_keys(root: _Dir, keys: Iterable[str], problems: list[_Problem]) -> int:
    """Add every file key below ``root``; return how many keys there were.

    Keys FUSE cannot represent, and files whose name is already a directory, go to
    ``problems`` now; repeats, and files that later become directories, when settling.
    """
    index = -1
    last_path: str | None = None  # consecutive keys are often in the same directory
    directory = root
    for index, key in enumerate(keys):
        problem = key_problem(key)
        if problem is not None:
            problems.append((index, key, problem))
            continue
        cut = key.rfind("/")
        path = key[:cut] if cut > 0 else ""  # a valid key does not start with "/"
        if path != last_path:
            directory = _descend(root, path.split("/") if path else [], index)
            last_path = path
        leaf = key[cut + 1 :]
        if directory.dirs is not None and leaf in directory.dirs:
            problems.append((index, key, _BOTH))
        else:
            directory.add_file(leaf.encode(), index)
    return index + 1


def _descend(root: _Dir, parts: list[str], arrival: int) -> _Dir:
    """Walk the directories ``parts``, making those missing (by key number ``arrival``)."""
    directory = root
    for part in parts:
        directory = directory.subdirectory(part, arrival)
    return directory


def _settle(root: _Dir, problems: list[_Problem]) -> None:
    """Settle every directory (see ``_Dir.settle``), adding what they find to ``problems``."""
    root.settle("", problems)
    stack = [("", iter((root.dirs or {}).items()))]
    while stack:
        path, children = stack[-1]
        for name, child in children:
            child_path = _join(path, name)
            child.settle(child_path, problems)
            if child.dirs:
                stack.append((child_path, iter(child.dirs.items())))
                break
        else:
            stack.pop()


def _in_order(problems: list[_Problem]) -> list[tuple[str, str]]:
    """Return ``(key, problem)`` in the order the problems arose as the keys arrived."""
    problems.sort(key=lambda found: (found[0], found[1].count("/")))
    return [(key, problem) for _, key, problem in problems]


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


class _Columns:
    """The columns of ``Tree`` while the static nodes are numbered, with the names encoded.

    Index 0 is unused so that inode == index; index 1 is the root.
    """

    __slots__ = ("blob", "child_count", "ends", "first_child", "is_dir", "parents")

    def __init__(self) -> None:
        self.blob = bytearray()
        self.ends = array("q", [0, 0])
        self.parents = array("q", [0, ROOT_INODE])
        self.first_child = array("q", [0, 0])
        self.child_count = array("q", [0, 0])
        self.is_dir = bytearray([0, 1])

    def add_files(self, parent: int, directory: _Dir, start: int, stop: int) -> None:
        """Add the file names ``start … stop - 1`` of ``directory`` as children of ``parent``."""
        count = stop - start
        if count <= 1:
            if count == 1:
                self.add(parent, directory.name(start), is_dir=False)
            return
        ends = directory.ends
        assert ends is not None  # there are two names or more
        first = directory.start(start)
        offset = len(self.blob) - first
        # No temporary copies, however many names: they would add to the peak.
        with memoryview(directory.blob) as names, memoryview(ends) as positions:
            self.blob += names[first : ends[stop - 1]]
            self.ends.extend(map(operator.add, positions[start:stop], itertools.repeat(offset)))
        self.parents.extend(itertools.repeat(parent, count))
        self.first_child.extend(itertools.repeat(0, count))
        self.child_count.extend(itertools.repeat(0, count))
        self.is_dir.extend(itertools.repeat(0, count))

    def add(self, parent: int, name: bytes, *, is_dir: bool) -> int:
        """Add the node ``name`` as a child of ``parent``; return its inode."""
        inode = len(self.parents)
        self.blob += name
        self.ends.append(len(self.blob))
        self.parents.append(parent)
        self.first_child.append(0)
        self.child_count.append(0)
        self.is_dir.append(is_dir)
        return inode


def _number_static(root: _Dir) -> _Columns:
    """Number the settled nodes breadth-first, each directory's children sorted by name."""
    columns = _Columns()
    queue = [root]  # the directories in the order of their inodes
    inodes = array("q", [ROOT_INODE])
    position = 0
    while position < len(queue):
        inode = inodes[position]
        first = len(columns.parents)
        columns.first_child[inode] = first
        _number_children(columns, inode, queue[position], queue, inodes)
        columns.child_count[inode] = len(columns.parents) - first
        position += 1
    return columns


def _number_children(
    columns: _Columns, inode: int, directory: _Dir, queue: list[_Dir], inodes: array[int]
) -> None:
    """Add the children of ``directory`` (inode ``inode``); queue its subdirectories.

    The file names are sorted already: the subdirectories go in between them, the hidden
    names are left out, and the runs of file names in between are copied in bulk.
    """
    if directory.dirs is None and directory.hidden is None:
        columns.add_files(inode, directory, 0, directory.file_count())
        return
    dirs = directory.dirs or {}
    ranges = collections.deque(directory.listed_ranges())
    for name in sorted(dirs):
        encoded = name.encode()
        at = directory.position(encoded) if ranges else 0
        while ranges and ranges[0][0] < at:
            start, stop = ranges.popleft()
            if stop > at:
                ranges.appendleft((at, stop))
            columns.add_files(inode, directory, start, min(stop, at))
        inodes.append(columns.add(inode, encoded, is_dir=True))
        queue.append(dirs[name])
    for start, stop in ranges:
        columns.add_files(inode, directory, start, stop)


def _remove(root: _Dir, path: str) -> list[str]:
    """Remove the node at ``path`` from the settled tree; return the file keys it held."""
    *parents, name = path.split("/")
    directory = root
    for part in parents:
        child = (directory.dirs or {}).get(part)
        if child is None:
            return []
        directory = child
    if directory.dirs is not None and name in directory.dirs:
        return _file_keys(directory.dirs.pop(name), path)
    if directory.has_file(name):
        directory.hide(name)
        return [path]
    return []


def _file_keys(directory: _Dir, path: str) -> list[str]:
    """Return the sorted keys of the files in and below ``directory``, whose path is ``path``."""
    keys: list[str] = []
    stack = [(path, directory)]
    while stack:
        prefix, current = stack.pop()
        keys.extend(f"{prefix}/{name}" for name in current.file_names())
        stack.extend((f"{prefix}/{name}", child) for name, child in (current.dirs or {}).items())
    return sorted(keys)


def _report(problems: list[tuple[str, str]], source: str, skip_invalid: bool) -> None:
    if not problems:
        return
    if not skip_invalid:
        key, problem = problems[0]
        more = f" (and {len(problems) - 1} more invalid keys)" if len(problems) > 1 else ""
        raise ReferenceFormatError(source, key, problem + more)
    for key, problem in problems:
        log.warning("%s: skipping key %r: %s", source, key, problem)
