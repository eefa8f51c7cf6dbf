"""Checking a reference set: loaded as a mount would load it, every problem kept instead of
stopping at the first; arrays, explicit keys and Parquet rows counted; targets sized on request."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable, Iterator

from refmount.check.summary import UNREADABLE, ArrayInfo, Summary, TargetInfo
from refmount.check.targets import ask_each_target
from refmount.errors import ReferenceFormatError
from refmount.extras import DECODE
from refmount.formats import LoadOptions, load, zarr_meta
from refmount.formats.options import Progress
from refmount.formats.parquet import COLUMN_SETS, ParquetReferenceSet
from refmount.formats.sniff import is_parquet
from refmount.model import Inline, Reference, ReferenceSet, ReferenceSource
from refmount.namespace.tree import Tree
from refmount.zarr2.view import Zarr2References
from refmount.zarr2.view import plan as zarr2_plan

METADATA_NAMES = frozenset({".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"})
"""Names of zarr metadata documents: keys with these names are never chunks."""

FULL_COLUMNS = COLUMN_SETS[0]
"""The columns every reader of Parquet reference sets knows: path, offset, size, raw."""

SizeOf = Callable[[str], Awaitable[int]]
"""Asks a target for its size in bytes (``Store.size``)."""


def check_references(
    source: ReferenceSource,
    options: LoadOptions,
    *,
    quick: bool = False,
    scan_progress: Progress | None = None,
    decode_cache: int | None = None,
    zarr_format: int | None = None,
    netcdf_cache: int | None = None,
) -> Summary:
    """Load ``source`` the way a mount does, collecting every problem instead of stopping.

    Values and arrays that the loader would refuse are collected (it runs with
    ``skip_invalid``), then keys the tree cannot hold. Array metadata is validated even in a
    JSON set. Every chunk row of a Parquet set is read unless ``quick``; ``scan_progress``
    is told ``(rows scanned, rows)`` after each record file (targets are sized afterwards,
    on request: ``ask_sizes``). A set that cannot be loaded at all is ``malformed``. With
    ``decode_cache`` (the cache size of a ``--decode`` mount), the arrays such a mount would
    serve as stored are listed. With ``zarr_format`` 2, the v3 arrays a ``--zarr-format 2``
    mount would serve as stored are listed (and ``--decode`` looks at the v2 view). With
    ``netcdf_cache`` (the cache size of a ``--netcdf`` mount), the arrays its file leaves out
    (of the decoded view with ``decode_cache``; else decoding what it cannot place, where the
    decode extra is installed, as a mount does) and the dimensions it renames.
    """
    parquet = is_parquet(source.url, source.is_directory())
    summary = Summary(source.url, "parquet" if parquet else "json")

    def invalid(error: ReferenceFormatError) -> None:
        summary.problem(error.key, error.problem)

    loading = dataclasses.replace(options, skip_invalid=True, on_invalid=invalid)
    try:
        references = load(source, loading)
    except ReferenceFormatError as error:
        summary.malformed = True
        summary.problem(error.key, error.problem)
        return summary
    except OSError as error:
        summary.malformed = True
        summary.format = UNREADABLE  # whatever its name suggests, nothing of it was read
        summary.problem(None, f"cannot read: {error}")
        return summary
    Tree.build(
        references.keys(),
        references.grids,
        source=source.url,
        skip_invalid=True,
        on_invalid=invalid,
    )
    _count(references, summary, scan_progress, scan=not quick)
    add_views(
        summary,
        references,
        zarr_format=zarr_format,
        decode_cache=decode_cache,
        netcdf_cache=netcdf_cache,
    )
    return summary


def add_views(
    summary: Summary,
    references: ReferenceSet,
    *,
    zarr_format: int | None,
    decode_cache: int | None,
    netcdf_cache: int | None = None,
) -> None:
    """List in ``summary`` what the views a mount may add leave as stored, composed as a
    mount composes them: with ``zarr_format`` 2, the v3 arrays the v2 view serves as v3;
    with ``decode_cache`` (the cache size of a ``--decode`` mount), the arrays a decoded
    mount serves as stored; with ``netcdf_cache``, what the netCDF file leaves out."""
    if zarr_format == 2:
        decodes = None
        if decode_cache is not None:
            from refmount.decode.view import decodes_v3  # numcodecs, only when asked

            decodes = functools.partial(decodes_v3, cache_size=decode_cache)
        view = zarr2_plan(references, decodes)
        summary.served_as_v3 = [(a.path, a.codec, a.reason) for a in view.stored]
        references = Zarr2References(references, view)
    loaded = references  # as the tree serves them, before --decode's view
    if decode_cache is not None:
        from refmount.decode.view import DecodedReferences, plan  # numcodecs, only when asked

        decisions = plan(references, decode_cache)
        summary.served_as_stored = [(a.path, a.codec, a.reason) for a in decisions.stored]
        if netcdf_cache is not None:
            references = DecodedReferences(references, decisions)
    if netcdf_cache is not None:
        if zarr_format != 2:  # the file's own v2 view of v3 nodes, as a mount makes it
            own = zarr2_plan(loaded, None)
            if own.hidden:
                references, decode_cache = Zarr2References(loaded, own), None
        decoded = None
        if decode_cache is None and DECODE.missing() is None:
            from refmount.decode.view import DecodedReferences, plan

            decoded = DecodedReferences(references, plan(references, netcdf_cache))
        _check_netcdf(references, decoded, summary)


def _check_netcdf(references: ReferenceSet, decoded: ReferenceSet | None, summary: Summary) -> None:
    """List what a ``--netcdf`` file of ``references`` leaves out and renames."""
    from refmount.netcdf.schema import schema_of  # numpy, only when asked

    try:
        schema = schema_of(references, "root", decoded)
    except ReferenceFormatError as error:
        summary.problem(error.key, error.problem)
        return
    summary.netcdf_left_out = [(left.path, left.reason) for left in schema.left_out]
    summary.netcdf_renamed = list(schema.renamed)


def _count(
    references: ReferenceSet, summary: Summary, scan_progress: Progress | None, *, scan: bool
) -> None:
    """Count the arrays, the explicit keys and the chunks present of each array (a Parquet
    set's by reading every row when ``scan``; else they are not counted)."""
    arrays = arrays_of(references, summary)
    summary.explicit_keys, present = _count_explicit(
        references, summary, {array.path for array in arrays}
    )
    counted: dict[str, int] | None = present
    if isinstance(references, ParquetReferenceSet):
        counted = _scan(references, summary, scan_progress) if scan else None
        summary.chunk_positions = sum(grid.count for grid in references.grids)
    else:
        summary.chunk_positions = sum(array.chunk_count for array in arrays)
    summary.chunk_keys = None if counted is None else sum(counted.values())
    summary.arrays = [
        dataclasses.replace(a, present=None if counted is None else counted.get(a.path, 0))
        for a in arrays
    ]


def arrays_of(references: ReferenceSet, summary: Summary) -> list[ArrayInfo]:
    """Return the arrays that the set's metadata keys describe; malformed ones are problems."""
    arrays: list[ArrayInfo] = []
    keys = references.keys()  # a ReferenceSet is not a mapping
    for key in keys:
        split = zarr_meta.array_of(key)
        reference = references.get(key)
        if split is None or reference is None:
            continue
        if not isinstance(reference, Inline):
            summary.problem(key, "array metadata is not stored inline: it cannot be checked")
            continue
        try:
            grid = zarr_meta.grid_for_key(key, reference.data, references.source)
        except ReferenceFormatError as error:
            summary.problem(key, error.problem)
            continue
        if grid is None:
            continue  # a zarr v3 group
        document = json.loads(reference.data)
        if split[1] == zarr_meta.ZARRAY:
            chunks, dtype, version = document["chunks"], document.get("dtype"), 2
        else:
            chunks = document["chunk_grid"]["configuration"]["chunk_shape"]
            dtype, version = document.get("data_type"), 3
        arrays.append(
            ArrayInfo(
                grid.array,
                version,
                tuple(document["shape"]),
                tuple(chunks),
                dtype if isinstance(dtype, str) else json.dumps(dtype),
                grid.shape,
                0,
            )
        )
    return sorted(arrays, key=lambda array: array.path)


def _count_explicit(
    references: ReferenceSet, summary: Summary, arrays: set[str]
) -> tuple[int, dict[str, int]]:
    """Count and tally every explicit reference; return the count and chunk keys per array.

    Only a JSON set stores chunks explicitly: a key below an array's path whose name is not
    a metadata document is one of its chunks. The keys of its ``gen`` items kept as chunk
    grids count as explicit keys too (they are written in the file, as templates).
    """
    count = 0
    chunks: dict[str, int] = {}
    deepest = max((path.count("/") for path in arrays), default=0)
    for key, reference in _explicit_references(references):
        count += 1
        summary.add(key, reference)
        array = _array_of_chunk(key, arrays, deepest) if arrays else None
        if array is not None:
            chunks[array] = chunks.get(array, 0) + 1
    return count, chunks


def _explicit_references(references: ReferenceSet) -> Iterator[tuple[str, Reference]]:
    """Yield every explicit key with its reference: stored keys, then (JSON only) the keys
    that ``gen`` items generate as chunk grids."""
    keys = references.keys()  # a ReferenceSet is not a mapping
    for key in keys:
        reference = references.get(key)
        if reference is not None:
            yield key, reference
    if isinstance(references, ParquetReferenceSet):
        return
    for number, grid in enumerate(references.grids):
        for index in range(grid.count):
            chunk = references.chunk(number, index)
            if chunk is not None:
                yield grid.key(index), chunk


def _array_of_chunk(key: str, arrays: set[str], deepest: int) -> str | None:
    """Return the array that ``key`` is a chunk of, or None (metadata, or outside arrays).

    ``deepest`` is the most ``/`` in an array path: only that many leading directories of
    the key are tried, so that a key thousands of directories deep costs no more than a short
    one (each shorter parent as a string would cost the square of the depth).
    """
    parent, _, name = key.rpartition("/")
    if name in METADATA_NAMES:
        return None
    cuts: list[int] = []
    position = -1
    for _ in range(deepest + 1):
        position = parent.find("/", position + 1)
        if position < 0:
            cuts.append(len(parent))
            break
        cuts.append(position)
    for cut in reversed(cuts):
        if parent[:cut] in arrays:
            return parent[:cut]
    return "" if "" in arrays else None


def _scan(
    references: ParquetReferenceSet, summary: Summary, progress: Progress | None
) -> dict[str, int]:
    """Read every record file; count and tally each present chunk, collecting row problems."""
    present: dict[str, int] = {}
    total = sum(grid.count for grid in references.grids)
    done = 0
    size = references.record_size
    for number, grid in enumerate(references.grids):
        found = 0
        for record in references.record_numbers(number):  # those that exist, when listable
            start = record * size
            stop = min(start + size, grid.count)
            try:
                for index in references.chunks_present(number, start, stop):
                    try:
                        reference = references.chunk(number, index)
                    except ReferenceFormatError as error:
                        summary.problem(error.key or grid.key(index), error.problem)
                        continue
                    if reference is not None:
                        found += 1
                        summary.add(grid.key(index), reference)
            except ReferenceFormatError as error:
                summary.problem(error.key, f"{error.source}: {error.problem}")
            except OSError as error:
                summary.problem(None, f"cannot read record {record} of {grid.array!r}: {error}")
            _warn_columns(references, summary, number, record)
            if progress is not None:
                progress(done + stop, total)
        done += grid.count
        present[grid.array] = found
    return present


def _warn_columns(
    references: ParquetReferenceSet, summary: Summary, grid: int, record: int
) -> None:
    """Warn about a record file whose columns are a subset fsspec accepts but others may not."""
    columns = references.record_columns(grid, record)
    if columns is None or frozenset(columns) == FULL_COLUMNS:
        return
    summary.warnings.append(
        f"{references.record_name(grid, record)}: columns are {', '.join(columns)}, not "
        "path, offset, size, raw (fsspec and refmount read it; other readers may not)"
    )


async def ask_sizes(summary: Summary, size_of: SizeOf) -> None:
    """Ask every target of ``summary`` for its size (``REQUESTS`` at a time): whole-target
    references get sizes, and ranges that end beyond their target become problems."""

    async def ask(target: TargetInfo) -> None:
        target.size = await size_of(target.url)

    await ask_each_target(summary, ask, "size")
    whole_bytes: int | None = 0
    for target in summary.targets.values():
        if target.size is None:
            if target.whole:
                whole_bytes = None
            continue
        if whole_bytes is not None:
            whole_bytes += target.whole * target.size
        if target.end > target.size:
            summary.problem(
                target.end_key,
                f"the range ends at byte {target.end:,} but {target.url} has only "
                f"{target.size:,} bytes",
            )
    summary.whole_bytes = whole_bytes
