"""Checking an Icechunk repository: opened and read at one snapshot as a mount would, then
summarised: the snapshot resolved, the virtual chunk containers its config declares (each
authorized or not, and how many chunks point into it), the chunks by kind, and the arrays.

A container that chunks point at but ``--authorize-container`` does not name is a warning
(the mount would answer those reads with ``EACCES``); virtual chunks that no declared
container holds are a problem (no reader may read them).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from refmount.check.summary import ContainerInfo, Problem, RepositoryInfo, Summary
from refmount.check.validate import add_views, arrays_of
from refmount.config import RepositoryVersion
from refmount.errors import ReferenceFormatError
from refmount.formats.icechunk import ContainerOptions, FileLimit, load_repository
from refmount.formats.icechunk.containers import count_virtual_chunks
from refmount.formats.icechunk.runtime import settle_runtime
from refmount.namespace.tree import Tree

if TYPE_CHECKING:
    from refmount.formats.icechunk.load import LoadedRepository

REPOSITORY_FORMAT = "icechunk"
"""``Summary.format`` of an Icechunk repository."""


def check_repository(
    url: str,
    version: RepositoryVersion,
    authorize: Sequence[str] = (),
    storage_options: Mapping[str, Any] | None = None,
    limit: FileLimit | None = None,
    container_options: ContainerOptions | None = None,
    decode_cache: int | None = None,
    zarr_format: int | None = None,
) -> Summary:
    """Open the repository at ``url`` at ``version`` and summarise that snapshot.

    A repository that cannot be opened or read (no repository, a missing or corrupted
    file, a version that does not exist, a container to authorize it does not declare) is
    ``malformed``, with the reason as its problem (as is one whose files Icechunk reads
    whole are larger than ``limit`` allows). With ``decode_cache`` (the cache size of a
    ``--decode`` mount), the arrays such a mount would serve as stored are listed; with
    ``zarr_format`` 2, the arrays a ``--zarr-format 2`` mount serves as v3.
    """
    summary = Summary(url, REPOSITORY_FORMAT)
    try:
        loaded = load_repository(url, version, authorize, storage_options, limit, container_options)
    except ReferenceFormatError as error:
        summary.malformed = True
        summary.problem(error.key, error.problem)
        return summary
    try:
        _describe(summary, loaded, version)
    finally:
        settle_runtime()  # the command exits next
    add_views(summary, loaded.references, zarr_format=zarr_format, decode_cache=decode_cache)
    return summary


def _describe(summary: Summary, loaded: LoadedRepository, version: RepositoryVersion) -> None:
    """Fill ``summary`` with what ``loaded`` holds: arrays, chunks, containers."""
    opened, references = loaded.opened, loaded.references

    def invalid(error: ReferenceFormatError) -> None:
        summary.problem(error.key, error.problem)

    Tree.build(
        references.keys(),
        references.grids,
        source=summary.source,
        skip_invalid=True,
        on_invalid=invalid,
    )
    written = {grid.array: references.chunks_written(n) for n, grid in enumerate(references.grids)}
    summary.arrays = [
        dataclasses.replace(array, present=written.get(array.path, 0))
        for array in arrays_of(references, summary)
    ]
    summary.explicit_keys = len(list(references.keys()))
    summary.chunk_keys = sum(written.values())
    summary.chunk_positions = sum(grid.count for grid in references.grids)
    kinds = {kind.name.lower(): count for kind, count in references.count_by_kind().items()}
    summary.inline = kinds["inline"]
    try:
        counts, homeless = asyncio.run(
            count_virtual_chunks(opened.session.store, list(written), opened.containers)
        )
    except ValueError as error:
        from refmount.formats.icechunk.opening import first_line  # icechunk is installed

        summary.problem(None, f"cannot list the virtual chunks: {first_line(error)}")
        counts, homeless = dict.fromkeys(opened.containers, 0), {}
    containers = [
        ContainerInfo(prefix, prefix in opened.authorized, counts.get(prefix, 0))
        for prefix in opened.containers
    ]
    summary.warnings.extend(_unauthorized(containers))
    for array, count in homeless.items():
        summary.problems.append(
            Problem(
                array,
                f"{count:,} virtual chunks lie in no virtual chunk container the repository "
                "declares: no reader may read them",
            )
        )
    summary.repository = RepositoryInfo(
        version.describe(),
        opened.snapshot_id,
        containers,
        kinds,
    )


def _unauthorized(containers: Sequence[ContainerInfo]) -> list[str]:
    """Return a warning for each container that chunks point into but may not be read."""
    return [
        f"{container.chunks:,} virtual chunks lie in container {container.prefix}, which "
        f"the mount may not read (their reads fail with EACCES): "
        f"--authorize-container {container.prefix} (or all) lets it"
        for container in containers
        if container.chunks and not container.authorized
    ]
