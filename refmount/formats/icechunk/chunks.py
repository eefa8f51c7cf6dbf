"""One array's chunk table, as Icechunk's manifests list it: which chunks exist, their kind and
exact size, and the bytes of inline chunks, in a few flat numpy columns (no object per
chunk), looked up by a chunk's flat index in its grid."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from refmount.model import ChunkGrid

T = TypeVar("T", bound=np.generic)


class ChunkKind(IntEnum):
    """Where a chunk's bytes are kept: Icechunk's ``ChunkType`` values."""

    NATIVE = 1
    """In the repository's own storage."""
    VIRTUAL = 2
    """In another object, at an offset (a virtual chunk container)."""
    INLINE = 3
    """In the manifest itself."""


@dataclass(frozen=True, slots=True)
class ChunkBatch:
    """One batch of ``array_chunk_iterator``: row ``i`` of each column is one chunk."""

    coords: npt.NDArray[np.uint32]
    """Shape ``(n, ndim)``: each chunk's grid coordinates."""
    kinds: npt.NDArray[np.uint8]
    lengths: npt.NDArray[np.uint64]
    inline: dict[int, bytes] = field(default_factory=dict)
    """The bytes of the inline rows, by row."""


class ChunkTable:
    """The chunks of one array that exist, sorted by flat index (C order of the grid).

    Made once from the batches of the array's manifests; immutable and safe to share.
    """

    def __init__(
        self,
        indices: npt.NDArray[np.int64],
        kinds: npt.NDArray[np.uint8],
        lengths: npt.NDArray[np.int64],
        inline: dict[int, bytes],
    ) -> None:
        self._indices = indices
        self._kinds = kinds
        self._lengths = lengths
        self._inline = inline
        """Inline chunks' bytes by position in the table."""

    @classmethod
    def from_batches(cls, grid: ChunkGrid, batches: Iterable[ChunkBatch]) -> ChunkTable:
        """Build the table of ``grid``'s array from its chunk batches (in any order).

        Raises ``ValueError`` when a coordinate lies outside the grid or a chunk's kind is
        not one of ``ChunkKind``.
        """
        builder = ChunkTableBuilder(grid)
        for batch in batches:
            builder.add(batch)
        return builder.build()

    @classmethod
    def empty(cls) -> ChunkTable:
        """Return the table of an array without chunks."""
        return cls(np.empty(0, np.int64), np.empty(0, np.uint8), np.empty(0, np.int64), {})

    def __len__(self) -> int:
        return len(self._indices)

    def position(self, index: int) -> int | None:
        """Return where chunk ``index`` is in the table, or None when it does not exist."""
        position = int(np.searchsorted(self._indices, index))
        if position < len(self._indices) and self._indices[position] == index:
            return position
        return None

    def kind(self, position: int) -> ChunkKind:
        """Return the kind of the chunk at ``position``."""
        return ChunkKind(int(self._kinds[position]))

    def length(self, position: int) -> int:
        """Return the size in bytes of the chunk at ``position``."""
        return int(self._lengths[position])

    def inline_data(self, position: int) -> bytes:
        """Return the bytes of the inline chunk at ``position``."""
        return self._inline[position]

    def next_present(self, start: int, stop: int) -> int:
        """Return the first chunk index in ``[start, stop)`` that exists, else ``stop``."""
        position = int(np.searchsorted(self._indices, start))
        if position < len(self._indices) and self._indices[position] < stop:
            return int(self._indices[position])
        return stop

    def sizes(self, start: int, stop: int) -> list[int]:
        """Return the size of each chunk in ``[start, stop)``, ``-1`` for absent ones."""
        sizes = np.full(stop - start, -1, dtype=np.int64)
        first, last = np.searchsorted(self._indices, [start, stop])
        sizes[self._indices[first:last] - start] = self._lengths[first:last]
        return [int(size) for size in sizes]

    def count_by_kind(self) -> dict[ChunkKind, int]:
        """Return how many chunks of each kind the array has."""
        counts = np.bincount(self._kinds, minlength=len(ChunkKind) + 1)
        return {kind: int(counts[kind.value]) for kind in ChunkKind}


class ChunkTableBuilder:
    """Collects an array's chunk batches as they come, each reduced at once to the table's
    columns (flat index, kind, length; the coordinates and Icechunk's buffers are let go),
    and makes the ``ChunkTable`` of them.

    Icechunk lists a manifest's chunks in grid order, so the columns are usually sorted
    already: then no sort and no reordered copies are made (with a million chunks, those
    copies were most of the load's peak memory).
    """

    def __init__(self, grid: ChunkGrid) -> None:
        self._shape = grid.shape
        self._indices: list[npt.NDArray[np.int64]] = []
        self._kinds: list[npt.NDArray[np.uint8]] = []
        self._lengths: list[npt.NDArray[np.int64]] = []
        self._inline: list[tuple[int, bytes]] = []
        self._rows = 0

    def add(self, batch: ChunkBatch) -> None:
        """Take one batch; raises ``ValueError`` when a coordinate lies outside the grid or
        a chunk's kind is not one of ``ChunkKind``."""
        kinds = np.array(batch.kinds, dtype=np.uint8)
        if not np.isin(kinds, KIND_VALUES).all():
            raise ValueError(f"unknown chunk kinds {sorted(set(kinds.tolist()) - set(ChunkKind))}")
        self._indices.append(flat_indices(batch.coords, self._shape))
        self._kinds.append(kinds)
        self._lengths.append(np.array(batch.lengths, dtype=np.int64))
        self._inline.extend((self._rows + row, data) for row, data in batch.inline.items())
        self._rows += len(kinds)

    def build(self) -> ChunkTable:
        """Return the table of every batch taken, sorted by flat index."""
        if not self._indices:
            return ChunkTable.empty()
        index = _joined(self._indices)
        kind = _joined(self._kinds)
        length = _joined(self._lengths)
        self._indices, self._kinds, self._lengths = [], [], []
        if len(index) < 2 or bool((index[1:] > index[:-1]).all()):
            return ChunkTable(index, kind, length, dict(self._inline))
        order = np.argsort(index, kind="stable")
        index = index[order]
        kind = kind[order]
        length = length[order]
        where = np.empty_like(order)
        where[order] = np.arange(len(order))
        inline = {int(where[row]): data for row, data in self._inline}
        return ChunkTable(index, kind, length, inline)


KIND_VALUES = np.array([kind.value for kind in ChunkKind], dtype=np.uint8)


def _joined(columns: list[npt.NDArray[T]]) -> npt.NDArray[T]:
    """Return the one column ``columns`` make (without a copy when there is one)."""
    return columns[0] if len(columns) == 1 else np.concatenate(columns)


def flat_indices(coords: npt.NDArray[np.uint32], shape: Sequence[int]) -> npt.NDArray[np.int64]:
    """Return the flat C-order index of each row of ``coords`` in a grid of ``shape``.

    Raises ``ValueError`` when a row has the wrong number of coordinates or lies outside.
    """
    if len(coords) == 0:
        return np.empty(0, np.int64)
    rows = np.asarray(coords, dtype=np.int64)
    if rows.ndim != 2:
        rows = rows.reshape(len(rows), -1 if rows.size else 0)
    if not shape:
        if rows.shape[1] != 0:
            raise ValueError(f"a 0-d array's chunk has coordinates {rows[0].tolist()}")
        return np.zeros(len(rows), np.int64)
    if rows.shape[1] != len(shape):
        raise ValueError(f"chunk coordinates {rows[0].tolist()} do not fit a grid of {shape}")
    outside = (rows >= np.asarray(shape, dtype=np.int64)).any(axis=1)
    if outside.any():
        row = rows[int(np.argmax(outside))].tolist()
        raise ValueError(f"chunk {row} lies outside the grid of {list(shape)} chunks")
    flat: npt.NDArray[np.int64] = np.ravel_multi_index(tuple(rows.T), tuple(shape)).astype(np.int64)
    return flat
