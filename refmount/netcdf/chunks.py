"""The chunks of the file's variables in the reference set: their references by index, and
their stored lengths for the layout.

A chunk of a JSON set is an explicit key; a chunk of a Parquet set is asked of its grid, which
may read a record file (``chunk_now`` never does; ``chunk`` may block, so callers on the event
loop use a worker thread).
"""

from __future__ import annotations

from collections.abc import Iterator

from refmount.model import Inline, Range, Reference, ReferenceSet
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
        for index in range(variable.grid.count):
            if grid is None:
                reference = self._references.get(variable.grid.key(index))
            else:
                start = self._references.skip_absent(grid, index, index + 1, load=True)
                if start > index:
                    continue
                reference = self._references.chunk(grid, index)
            if reference is None:
                continue
            if not variable.filters:
                yield index, variable.chunk_bytes
            elif isinstance(reference, Range):
                yield index, reference.length
            elif isinstance(reference, Inline):
                yield index, len(reference.data)
            else:
                raise WholeFileChunk(
                    f"chunk {variable.grid.key(index)!r} is a whole-file reference; its "
                    "length is not known without asking its target"
                )
