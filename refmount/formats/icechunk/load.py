"""Loading an Icechunk snapshot for a mount: the repository opened at one snapshot
(``opening``), its hierarchy walked from the root group and each array's chunk table read
once (``array_chunk_iterator``: kinds and sizes from the manifests, no chunk data), on an
event loop of its own for the duration of the load."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zarr.core.buffer import default_buffer_prototype

from refmount.config import RepositoryVersion
from refmount.errors import ReferenceFormatError
from refmount.formats.icechunk.chunks import ChunkBatch, ChunkTableBuilder
from refmount.formats.icechunk.layout import ContainerOptions, FileLimit
from refmount.formats.icechunk.opening import OpenedSnapshot, first_line, open_snapshot
from refmount.formats.icechunk.references import ArrayChunks, IcechunkReferences
from refmount.formats.icechunk.runtime import settle_runtime
from refmount.formats.zarr_meta import ZARR_JSON, grid_for_key

BATCH_SIZE = 10_000
"""How many chunk references one batch of an array's chunk table brings: each batch is a
Python list of every chunk's location beside its numpy columns, so batches of 100 000 made
the load's peak about 60 MB higher (a million virtual chunks), at the same speed."""


@dataclass(frozen=True, slots=True)
class LoadedRepository:
    """A snapshot opened and read: the session that serves its chunks, and its references."""

    opened: OpenedSnapshot
    references: IcechunkReferences


def load_repository(
    url: str,
    version: RepositoryVersion,
    authorize: Sequence[str] = (),
    s3_options: Mapping[str, Any] | None = None,
    limit: FileLimit | None = None,
    container_options: ContainerOptions | None = None,
) -> LoadedRepository:
    """Open the repository at ``url`` at ``version`` and read its hierarchy and chunk tables.

    Raises ``ReferenceFormatError`` naming the repository (and the key, where one is at
    fault) when it cannot be opened or read, or holds metadata refmount cannot mount.
    """
    opened = open_snapshot(url, version, authorize, s3_options, limit, container_options)
    try:
        references = asyncio.run(read_snapshot(opened))
    except ReferenceFormatError:
        raise
    except Exception as error:  # Icechunk's errors, whatever their class
        settle_runtime()
        raise ReferenceFormatError(url, None, f"cannot read: {first_line(error)}") from error
    return LoadedRepository(opened, references)


async def read_snapshot(opened: OpenedSnapshot) -> IcechunkReferences:
    """Return the references of every node of ``opened``'s snapshot, depth first."""
    store = opened.session.store
    metadata: dict[str, bytes] = {}
    arrays: list[ArrayChunks] = []
    pending = [""]
    while pending:
        path = pending.pop()
        key = f"{path}/{ZARR_JSON}" if path else ZARR_JSON
        found = await store.get(key, default_buffer_prototype())
        if found is None:
            raise ReferenceFormatError(opened.url, key, "the node has no metadata")
        data = found.to_bytes()
        metadata[key] = data
        grid = grid_for_key(key, data, opened.url)
        if grid is None:
            pending.extend(sorted(await _children(store, path), reverse=True))
            continue
        builder = ChunkTableBuilder(grid)
        try:
            async for coords, kinds, _, _, lengths, inline in store.array_chunk_iterator(
                "/" + path, BATCH_SIZE
            ):
                builder.add(ChunkBatch(coords, kinds, lengths, inline))
            table = builder.build()
        except ValueError as error:
            raise ReferenceFormatError(opened.url, key, str(error)) from error
        arrays.append(ArrayChunks(grid, table))
    return IcechunkReferences(opened.url, opened.snapshot_id, metadata, arrays)


async def _children(store: Any, path: str) -> list[str]:
    """Return the paths of the nodes directly below group ``path``."""
    names = [name async for name in store.list_dir(path) if name != ZARR_JSON]
    return [f"{path}/{name}" if path else name for name in names]
