"""What the namespace's answers are made of: the two kinds of file node (a stored key, a chunk
of a grid), directory entries, and the column runs and chunk spans listings walk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from refmount.model import Inode

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


@dataclass(frozen=True, slots=True)
class ChildRun:
    """Entries of one directory that follow each other, as columns: a listing's hot path.

    Entry ``i`` is at position ``start + i`` (as ``children`` numbers them), is called
    ``names[i]`` (UTF-8) and has inode ``first_inode + i``. ``dirs[i]`` is true for a
    directory. ``grid`` is true when the entries are grid nodes (else stored keys).
    """

    start: int
    first_inode: int
    names: list[bytes]
    dirs: Sequence[int]
    grid: bool


class LeafChunks(NamedTuple):
    """The chunk files among a directory's entries: from entry ``position`` on (counting from
    0), ``total`` chunks of grid ``grid``, the first being chunk ``first``."""

    grid: int
    first: int
    position: int
    total: int


class ChunkSpans(NamedTuple):
    """Which chunks a directory's grid entries hold: from entry ``position`` on (counting from
    0), ``total`` entries, entry ``position + k`` holding chunks ``first + k * span`` to
    ``first + (k + 1) * span`` of grid ``grid`` (a chunk file holds itself: ``span`` 1)."""

    grid: int
    first: int
    position: int
    total: int
    span: int


class Entry(NamedTuple):
    """One directory entry: its name, inode, and whether it is a directory.

    A named tuple rather than a dataclass: listings build one per name, and a tuple is the
    cheapest object Python makes.
    """

    name: str
    inode: Inode
    is_dir: bool
