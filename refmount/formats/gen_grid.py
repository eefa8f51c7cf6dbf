"""``gen`` items whose keys are a chunk grid: nothing stored per key, references computed.

A Version 1 ``gen`` item whose key template is ``array/{{d0}}.{{d1}}…`` (or ``/`` between the
indices), with dimensions ``{"stop": n}`` counting from 0 in the same order, generates exactly
the chunk keys of a ``ChunkGrid`` of shape ``(n0, n1, …)``, and in the same order: the first
dimension varying slowest is C order. Such an item is kept as that grid plus how to find chunk
``i``'s URL, offset and length: a constant, a text rendered by plain substitution from the
indices of ``i`` (computed when asked, never stored), or, for a text only jinja renders, a
column filled once at load (so that jinja never runs after the load, and a template renders
once per key, as fsspec renders it). Every text is rendered once at load, so every failure is
found then.

``layouts`` decides which items become grids: only those whose keys no other ``gen`` item can
reach (their keys would compete in ways only the stored keys resolve), and, for nested grids
(``/`` between indices), whose directories hold no ``refs`` key other than their chunks.
``refs`` keys equal to a chunk key are hidden: generated keys win.
"""

from __future__ import annotations

import bisect
import collections
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from refmount.model import (
    ChunkGrid,
    ChunkRanges,
    Range,
    Reference,
    Whole,
    canonical_index,
    unravel,
)
from refmount.names import NAME_MAX, key_problem

Pieces = tuple[str | int, ...]
"""A text as literals and dimension numbers (see ``Templates.pieces``)."""

IntField: TypeAlias = "int | Pieces | array[int]"
"""How an offset or a length is found: a constant, a text rendered from the indices, or one
value per chunk (``array("q")``)."""

UrlField: TypeAlias = "str | Pieces | array[int]"
"""How a URL is found: a constant (already resolved), a text rendered from the indices and
resolved, or one URL number per chunk into the item's table (``array("I")``)."""

_SIZES_BATCH = 1 << 14
"""The most chunk sizes ``chunk_sizes`` computes in one call."""


def render(pieces: Pieces, indices: Sequence[int]) -> str:
    """Return the text ``pieces`` spells with dimension ``d`` at ``indices[d]``."""
    return "".join(p if isinstance(p, str) else str(indices[p]) for p in pieces)


def dimensions_of(pieces: Pieces) -> set[int]:
    """Return the dimension numbers a text uses."""
    return {p for p in pieces if isinstance(p, int)}


def grid_layout(key: Pieces | None, axes: Sequence[object]) -> ChunkGrid | None:
    """Return the chunk grid whose keys, in order, are those the key template ``key``
    generates over dimensions ``axes`` (the values of each, in order), or None
    when they are not a grid's: every dimension a ``range(0, n)`` with ``n >= 1``, used once
    in the key, in order, after a directory and between one separator (``.`` or ``/``).
    """
    if key is None or not axes or len(key) != 2 * len(axes):
        return None
    shape: list[int] = []
    for axis in axes:
        if not isinstance(axis, range) or axis.start != 0 or axis.step != 1 or axis.stop < 1:
            return None
        shape.append(axis.stop)
    head, indices, separators = key[0], key[1::2], key[2::2]
    if not isinstance(head, str) or not head.endswith("/") or len(head) < 2:
        return None
    if list(indices) != list(range(len(axes))) or len(set(separators)) > 1:
        return None
    separator = separators[0] if separators else "."
    if separator not in (".", "/"):
        return None
    array_path = head[:-1]
    if key_problem(array_path + "/0") is not None:
        return None  # the keys are refused one by one, as stored keys are
    if separator == "." and sum(len(str(n - 1)) + 1 for n in shape) - 1 > NAME_MAX:
        return None
    return ChunkGrid(array_path, tuple(shape), separator)


def leading_literal(key_text: str, key: Pieces | None) -> str:
    """Return text every key of a template starts with (``""`` when nothing is sure)."""
    if key is not None:
        first = key[0] if key else ""
        return first if isinstance(first, str) else ""
    # jinja: the text before the first tag comes first, though "{%-" may strip its end.
    end = min((i for i in (key_text.find("{"), key_text.find("\r")) if i >= 0), default=-1)
    return "" if end < 0 else key_text[:end].rstrip()


def unreachable(candidates: dict[int, ChunkGrid], literals: Sequence[str | None]) -> set[int]:
    """Return the candidates (item number → grid) whose keys no other item can generate.

    ``literals`` holds, per item, what each of its keys starts with (None: it generates
    none). A candidate survives when no other item's literal starts with its array's
    directory (``array/``), nor is a beginning of it.
    """
    present = collections.Counter(literal for literal in literals if literal is not None)
    ordered = sorted(present.elements())
    alone: set[int] = set()
    for number, grid in candidates.items():
        directory = grid.array + "/"
        inside = bisect.bisect_left(ordered, grid.array + "0") - bisect.bisect_left(
            ordered, directory
        )
        if inside > 1:  # (the candidate itself is one)
            continue
        if any(directory[:cut] in present for cut in range(len(directory))):
            continue
        alone.add(number)
    return alone


def refs_inside(
    grids: dict[int, ChunkGrid], keys: Iterable[str]
) -> tuple[dict[int, list[str]], set[int]]:
    """Sort the ``refs`` keys inside the grids' directories: return, per grid, the keys that
    are its chunk keys (to hide), and the grids with other keys below one of their nodes
    (below a chunk file, or inside an index directory), which must be stored key by key
    instead: the tree would refuse such a key with another message than it gives stored keys
    (or, inside an index directory, refuse what stored keys allow). Beside its nodes, a grid's
    directory may hold any key (``.zarray``, ``zarr.json``)."""
    arrays = {grid.array: number for number, grid in grids.items()}
    deepest = max((path.count("/") for path in arrays), default=0) + 1
    hidden: dict[int, list[str]] = {}
    spoiled: set[int] = set()
    for key in keys:
        position = -1
        for _ in range(deepest):
            position = key.find("/", position + 1)
            if position < 0:
                break
            number = arrays.get(key[:position])
            if number is None:
                continue
            grid = grids[number]
            if grid.index_of(key) is not None:
                hidden.setdefault(number, []).append(key)
            elif _first_is_a_grid_name(grid, key[position + 1 :].split("/", 1)[0]):
                spoiled.add(number)  # below a chunk file, or inside an index directory
            break
    return hidden, spoiled


def _first_is_a_grid_name(grid: ChunkGrid, name: str) -> bool:
    """Return True when ``name`` is a node of ``grid`` right inside its array's directory."""
    if grid.separator == "/" and len(grid.shape) > 1:
        return canonical_index(name, grid.shape[0]) is not None
    return grid.index_of(f"{grid.array}/{name}") is not None


@dataclass(frozen=True, slots=True)
class GenGrid:
    """One ``gen`` item kept as a chunk grid: chunk ``i``'s reference computed from ``i``.

    ``offset`` and ``length`` are None for whole-file references. ``urls`` is the table a
    per-chunk URL column numbers into; ``resolve`` makes a rendered URL absolute.
    """

    grid: ChunkGrid
    url: UrlField
    offset: IntField | None
    length: IntField | None
    urls: tuple[str, ...]
    resolve: Callable[[str], str]

    def reference(self, index: int) -> Reference:
        """Return the reference of chunk ``index`` (in range)."""
        indices = unravel(index, self.grid.shape)
        url = self._url(index, indices)
        if self.offset is None or self.length is None:
            return Whole(url)
        return Range(
            url, _number(self.offset, index, indices), _number(self.length, index, indices)
        )

    def _url(self, index: int, indices: Sequence[int]) -> str:
        url = self.url
        if isinstance(url, str):
            return url
        if isinstance(url, array):
            return self.urls[int(url[index])]
        return self.resolve(render(url, indices))

    def lengths(self, start: int, stop: int) -> list[int | None]:
        """Return the lengths of chunks ``[start, stop)`` (None for a whole file)."""
        length = self.length
        if length is None:
            return [None] * (stop - start)
        if isinstance(length, int):
            return [length] * (stop - start)
        if isinstance(length, array):
            return list(length[start:stop])
        shape = self.grid.shape
        return [int(render(length, unravel(index, shape))) for index in range(start, stop)]


def _number(field: IntField, index: int, indices: Sequence[int]) -> int:
    if isinstance(field, int):
        return field
    if isinstance(field, array):
        return int(field[index])
    return int(render(field, indices))


class GenGrids:
    """The ``gen`` items of one file kept as grids, and the ``refs`` keys they replace."""

    __slots__ = ("hidden", "items")

    def __init__(self, items: Sequence[GenGrid], hidden: Iterable[str]) -> None:
        self.items = tuple(items)
        self.hidden = frozenset(hidden)

    @property
    def grids(self) -> tuple[ChunkGrid, ...]:
        """Return the chunk grids, in the order of their items."""
        return tuple(item.grid for item in self.items)

    @property
    def count(self) -> int:
        """Return how many keys the grids generate."""
        return sum(item.grid.count for item in self.items)

    def chunk(self, grid: int, index: int) -> Reference | None:
        """Return the reference of chunk ``index`` of grid ``grid`` (None out of range)."""
        item = self.items[grid]
        return item.reference(index) if 0 <= index < item.grid.count else None

    def chunk_sizes(self, grid: int, start: int, stop: int) -> list[int | None] | None:
        """Return the sizes of chunks from ``start`` on (a batch at most), as
        ``ReferenceSet.chunk_sizes`` says; None when ``start`` is out of range."""
        item = self.items[grid]
        count = item.grid.count
        if not 0 <= start < count:
            return None
        return item.lengths(start, min(stop, count, start + _SIZES_BATCH))

    def chunk_ranges(self, grid: int, start: int, stop: int) -> dict[str, ChunkRanges]:
        """Return, per URL, the ranges of at least one byte among chunks ``[start, stop)``."""
        item = self.items[grid]
        found: dict[str, ChunkRanges] = {}
        if item.offset is None:
            return found
        for index in range(max(start, 0), min(stop, item.grid.count)):
            reference = item.reference(index)
            if isinstance(reference, Range) and reference.length > 0:
                ranges = found.get(reference.url)
                if ranges is None:
                    ranges = found[reference.url] = ChunkRanges()
                ranges.offsets.append(reference.offset)
                ranges.lengths.append(reference.length)
        return found

    def skip_absent(self, grid: int, start: int, stop: int) -> int:
        """Return ``start``, or ``stop`` when the range is empty: every chunk is present."""
        stop = min(stop, self.items[grid].grid.count)
        start = max(start, 0)
        return start if start < stop else stop

    def references(self) -> Iterator[tuple[str, Reference]]:
        """Yield every generated key with its reference, grid after grid (slow: for checks
        and tests)."""
        for item in self.items:
            for index in range(item.grid.count):
                yield item.grid.key(index), item.reference(index)
