"""One array's chunk table, as Icechunk's manifests list it: which chunks exist, their kind and
exact size, and the bytes of inline chunks, in a few flat numpy columns (no object per
chunk), looked up by a chunk's flat index in its grid."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from refmount.model import ChunkGrid


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
        indices: list[npt.NDArray[np.int64]] = []
        kinds: list[npt.NDArray[np.uint8]] = []
        lengths: list[npt.NDArray[np.int64]] = []
        inline_rows: list[tuple[int, bytes]] = []
        offset = 0
        for batch in batches:
            indices.append(flat_indices(batch.coords, grid.shape))
            kinds.append(np.asarray(batch.kinds, dtype=np.uint8))
            lengths.append(np.asarray(batch.lengths, dtype=np.int64))
            inline_rows.extend((offset + row, data) for row, data in batch.inline.items())
            offset += len(batch.kinds)
        if not indices:
            return cls.empty()
        index = np.concatenate(indices)
        kind = np.concatenate(kinds)
        if not np.isin(kind, [k.value for k in ChunkKind]).all():
            raise ValueError(f"unknown chunk kinds {sorted(set(kind.tolist()) - set(ChunkKind))}")
        order = np.argsort(index, kind="stable")
        where = np.empty_like(order)
        where[order] = np.arange(len(order))
        inline = {int(where[row]): data for row, data in inline_rows}
        return cls(index[order], kind[order], np.concatenate(lengths)[order], inline)

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
