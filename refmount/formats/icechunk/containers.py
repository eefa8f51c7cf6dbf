"""Which virtual chunk containers the chunks of a snapshot point at: one pass over each
array's chunk table (``array_chunk_iterator``: the manifests only, no chunk is read), each
virtual chunk's location counted under the longest declared prefix it starts with.

``refmount check`` reports it: a container that chunks point at but the mount may not read
is worth a warning, and a chunk that no declared container holds cannot be read by anyone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VIRTUAL_KIND = 2
"""Icechunk's ``ChunkType`` value of a virtual chunk."""

BATCH_SIZE = 100_000
"""How many chunk references one batch of a chunk table brings."""


def container_of(location: str, prefixes: Sequence[str]) -> str | None:
    """Return the longest of ``prefixes`` that ``location`` starts with, or None."""
    matches = [prefix for prefix in prefixes if location.startswith(prefix)]
    return max(matches, key=len) if matches else None


async def count_virtual_chunks(
    store: Any, arrays: Sequence[str], prefixes: Sequence[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """Count the virtual chunks of ``arrays`` (their paths in ``store``'s snapshot) by the
    container of ``prefixes`` that holds them.

    Returns the counts by prefix (every prefix, 0 where no chunk points) and, for chunks that
    no prefix holds, their count by array path. Raises ``ValueError`` with Icechunk's message
    when a chunk table cannot be read.
    """
    try:
        return await _count(store, arrays, prefixes)
    except Exception as error:  # Icechunk's errors, whatever their class
        raise ValueError(str(error)) from error


async def _count(
    store: Any, arrays: Sequence[str], prefixes: Sequence[str]
) -> tuple[dict[str, int], dict[str, int]]:
    counts = dict.fromkeys(prefixes, 0)
    homeless: dict[str, int] = {}
    known: dict[str, str | None] = {}  # location → container (files hold many chunks)
    for array in arrays:
        iterator = store.array_chunk_iterator("/" + array, BATCH_SIZE)
        async for _, kinds, paths, _, _, _ in iterator:
            for row in (kinds == VIRTUAL_KIND).nonzero()[0].tolist():
                location = paths[row]
                if location not in known:
                    if len(known) > BATCH_SIZE:
                        known.clear()  # bounded: a repository of distinct files costs more
                    known[location] = container_of(location, prefixes)
                prefix = known[location]
                if prefix is None:
                    homeless[array] = homeless.get(array, 0) + 1
                else:
                    counts[prefix] += 1
    return counts, homeless
