"""The chunks of the file's variables in the reference set: their references by index, and
their stored lengths for the layout.

A chunk of a JSON set is an explicit key; a chunk of a Parquet set is asked of its grid, which
may read a record file (``chunk_now`` never does; ``chunk`` may block, so callers on the event
loop use a worker thread).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from refmount.model import ChunkGrid, Inline, Range, Reference, ReferenceSet
from refmount.netcdf.schema import Variable


class WholeFileChunk(Exception):
    """A filtered chunk is a whole-file reference: its length is not known without asking its
    target, so the file cannot be laid out."""


class Chunks:
    """The references of the variables' chunks in one reference set."""

    def __init__(self, references: ReferenceSet) -> None:
        self._references = references
        self._grids = {grid.array: number for number, grid in enumerate(references.grids)}

    def key(self, variable: Variable, index: int) -> str:
        """Return the key of chunk ``index`` of ``variable``."""
        return variable.grid.key(index)

    def chunk_now(self, variable: Variable, index: int) -> tuple[bool, Reference | None]:
        """Return ``(True, reference or None)`` if the chunk is known without I/O, else
        ``(False, None)``."""
        grid = self._grids.get(variable.path)
        if grid is None:
            return True, self._references.get(variable.grid.key(index))
        if not self._references.chunk_is_loaded(grid, index):
            return False, None
        return True, self._references.chunk(grid, index)

    def chunk(self, variable: Variable, index: int) -> Reference | None:
        """Return the reference of a chunk, or None when it does not exist (may block)."""
        grid = self._grids.get(variable.path)
        if grid is None:
            return self._references.get(variable.grid.key(index))
        return self._references.chunk(grid, index)

    def lengths(self, variable: Variable) -> Iterator[tuple[int, int]]:
        """Yield ``(index, stored length)`` of each existing chunk, in order (may block).

        An unfiltered chunk is as long as a whole chunk, whatever its reference says (a
        chunk decoded by ``--decode`` is; a stored one that is not fails when read).
        """
        grid = self._grids.get(variable.path)
        if grid is None:
            yield from self._explicit_lengths(variable)
            return
        count, index = variable.grid.count, 0
        while (index := self._references.skip_absent(grid, index, count, load=True)) < count:
            length = self._length(variable, index, self._references.chunk(grid, index))
            if length is not None:
                yield index, length
            index += 1

    def _explicit_lengths(self, variable: Variable) -> Iterator[tuple[int, int]]:
        """The lengths of a JSON set's chunks, asked in batches of names (no references are
        built but for whole-file ones)."""
        grid = variable.grid
        if not grid.shape:  # one chunk
            length = self._length(variable, 0, self._references.get(grid.key(0)))
            if length is not None:
                yield 0, length
            return
        prefix = f"{grid.array}/" if grid.array else ""
        if grid.prefix:
            prefix += grid.prefix + "/"
        names = _chunk_names(grid)
        index = 0
        while batch := list(itertools.islice(names, NAMES_BATCH)):
            lengths = self._known_lengths(prefix, batch)
            for offset, known in enumerate(lengths):
                if known is not None and variable.filters:
                    yield index + offset, known
                    continue
                if known is not None:
                    yield index + offset, variable.chunk_bytes
                    continue
                reference = self._references.get(prefix + batch[offset].decode())
                length = self._length(variable, index + offset, reference)
                if length is not None:
                    yield index + offset, length
            index += len(batch)

    def _known_lengths(self, prefix: str, names: list[bytes]) -> list[int | None]:
        """``known_lengths`` of names in C order, asked in sorted order: a set's keys are
        kept sorted, and names asked in their order are found by stepping, not searching."""
        order = sorted(range(len(names)), key=names.__getitem__)
        found = self._references.known_lengths(prefix, [names[i] for i in order])
        lengths: list[int | None] = [None] * len(names)
        for position, length in zip(order, found, strict=True):
            lengths[position] = length
        return lengths

    def _length(self, variable: Variable, index: int, reference: Reference | None) -> int | None:
        if reference is None:
            return None
        if not variable.filters:
            return variable.chunk_bytes
        if isinstance(reference, Range):
            return reference.length
        if isinstance(reference, Inline):
            return len(reference.data)
        raise WholeFileChunk(
            f"chunk {variable.grid.key(index)!r} is a whole-file reference; its "
            "length is not known without asking its target"
        )


NAMES_BATCH = 4096
"""How many chunk names are looked up at once."""


def _chunk_names(grid: ChunkGrid) -> Iterator[bytes]:
    """Yield the names of a grid's chunks below the array and its prefix (UTF-8), in C
    order."""
    separator = grid.separator.encode()
    digits = [[str(i).encode() for i in range(extent)] for extent in grid.shape]
    return map(separator.join, itertools.product(*digits))
