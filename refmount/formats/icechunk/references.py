"""An Icechunk snapshot as a reference set: every node's ``zarr.json`` as an explicit key, and
each array's chunks as a chunk grid whose existing chunks, kinds and sizes its ``ChunkTable``
knows.

Inline chunks are served from memory. Native and virtual chunks are ``Range`` references to
``icechunk://SNAPSHOT/KEY`` URLs, which the store reads through the repository's session: a
chunk's key there is always ``ARRAY/c/I/J`` (the only encoding Icechunk stores), whatever
name the array's ``chunk_key_encoding`` gives the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from refmount.formats.icechunk.chunks import ChunkKind, ChunkTable
from refmount.model import ChunkGrid, ChunkRanges, Inline, Range, Reference, unravel
from refmount.urls import icechunk_chunk_url


@dataclass(frozen=True, slots=True)
class ArrayChunks:
    """One array's chunk grid (how its files are named) and its chunk table."""

    grid: ChunkGrid
    table: ChunkTable


class IcechunkReferences:
    """The ``ReferenceSet`` of one snapshot of an Icechunk repository (all loaded at once)."""

    def __init__(
        self,
        source: str,
        snapshot_id: str,
        metadata: Mapping[str, bytes],
        arrays: Sequence[ArrayChunks],
    ) -> None:
        self._source = source
        self._snapshot_id = snapshot_id
        self._metadata = dict(metadata)
        self._arrays = list(arrays)
        self._grids = [array.grid for array in self._arrays]

    @property
    def source(self) -> str:
        """Return the repository's path or URL."""
        return self._source

    @property
    def snapshot_id(self) -> str:
        """Return the id of the snapshot served."""
        return self._snapshot_id

    def keys(self) -> Iterable[str]:
        """Return the metadata keys (``zarr.json`` of every group and array)."""
        return self._metadata.keys()

    def get(self, key: str) -> Reference | None:
        """Return a metadata document's bytes as Icechunk's store gives them, or None."""
        data = self._metadata.get(key)
        return None if data is None else Inline(data)

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        """Return the byte length of each metadata key ``prefix + name``, None if absent."""
        found = (self._metadata.get(prefix + name.decode("utf-8")) for name in names)
        return [None if data is None else len(data) for data in found]

    @property
    def grids(self) -> Sequence[ChunkGrid]:
        """Return each array's chunk grid."""
        return self._grids

    def chunk_is_loaded(self, grid: int, index: int) -> bool:
        """Return True: every chunk table is read at mount time."""
        return True

    def chunk_sizes(self, grid: int, start: int, stop: int) -> list[int | None] | None:
        """Return the size of each chunk in ``[start, stop)``, ``-1`` for absent ones."""
        return list(self._arrays[grid].table.sizes(start, stop))

    def chunk_ranges(self, grid: int, start: int, stop: int) -> dict[str, ChunkRanges]:
        """Return nothing: each chunk is an object of its own to the store (no neighbours
        share one), so there are no runs to fetch together; chunks read in order are fetched
        ahead one request each instead (``fuse.neighbours.ChunkChains``)."""
        return {}

    def skip_absent(self, grid: int, start: int, stop: int, *, load: bool) -> int:
        """Return the first chunk index in ``[start, stop)`` that exists, else ``stop``."""
        return self._arrays[grid].table.next_present(start, stop)

    def chunk(self, grid: int, index: int) -> Reference | None:
        """Return chunk ``index`` of array ``grid``: its bytes if inline, a ``Range`` of its
        whole length if native or virtual, None if it was never written."""
        array = self._arrays[grid]
        position = array.table.position(index)
        if position is None:
            return None
        if array.table.kind(position) is ChunkKind.INLINE:
            return Inline(array.table.inline_data(position))
        url = icechunk_chunk_url(self._snapshot_id, icechunk_key(array.grid, index))
        return Range(url, 0, array.table.length(position))

    def chunks_written(self, grid: int) -> int:
        """Return how many chunks of array ``grid`` exist (of any kind)."""
        return len(self._arrays[grid].table)

    def count_by_kind(self) -> dict[ChunkKind, int]:
        """Return how many chunks of each kind the snapshot has."""
        totals = dict.fromkeys(ChunkKind, 0)
        for array in self._arrays:
            for kind, count in array.table.count_by_kind().items():
                totals[kind] += count
        return totals


def icechunk_key(grid: ChunkGrid, index: int) -> str:
    """Return the key Icechunk's store knows chunk ``index`` of ``grid``'s array by."""
    parts = [grid.array] if grid.array else []
    parts.append("c")
    parts.extend(str(i) for i in unravel(index, grid.shape))
    return "/".join(parts)
