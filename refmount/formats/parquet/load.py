"""Loading a Parquet reference set: ``.zmetadata`` read whole, one record file probed."""

from __future__ import annotations

import json
from typing import Final, cast

from refmount.errors import ReferenceFormatError
from refmount.formats import zarr_meta
from refmount.formats.options import LoadOptions
from refmount.formats.parquet.references import (
    ParquetReferenceSet,
    join_url,
    report_skipped,
)
from refmount.model import (
    ChunkGrid,
    Inline,
    ReferenceSource,
)

ZMETADATA: Final = ".zmetadata"
"""The file that holds a Parquet reference set's metadata and record size."""


def load_parquet(source: ReferenceSource, options: LoadOptions) -> ParquetReferenceSet:
    """Load a Parquet reference set: read ``.zmetadata`` and probe one record file's schema.

    Reads ``.zmetadata`` in full, then the first record file that exists among the first
    ``PROBE_LIMIT`` of the first array that has chunks, whose footer is checked for the
    expected columns (so a directory of unrelated Parquet files is refused before mounting).
    No other record file is read until a chunk in it is asked for.

    Raises ``ReferenceFormatError`` for a missing or malformed ``.zmetadata``, malformed array
    metadata (unless ``options.skip_invalid``: then that array is left out with a warning) and
    a probed record file with the wrong columns or types (a warning with ``skip_invalid``).
    """
    meta_name = join_url(source.url, ZMETADATA)
    try:
        raw = source.read(ZMETADATA)
    except FileNotFoundError as exc:
        raise ReferenceFormatError(source.url, None, f"missing {ZMETADATA}") from exc
    metadata, record_size = _parse_zmetadata(raw, meta_name)

    skipped: set[str] = set()
    found: dict[str, ChunkGrid] = {}
    for key, value in metadata.items():
        try:
            grid = zarr_meta.grid_for_key(key, value, meta_name)
            if grid is not None and grid.array in found:
                raise ReferenceFormatError(
                    meta_name, key, f"array {grid.array!r} has both v2 and v3 metadata"
                )
        except ReferenceFormatError as exc:
            if not options.skip_invalid:
                raise
            report_skipped(options, exc, "skipping array: %s")
            split = zarr_meta.array_of(key)
            if split is not None:
                skipped.add(split[0])
            continue
        if grid is not None:
            found[grid.array] = grid
    for array in skipped:
        found.pop(array, None)

    explicit: dict[str, Inline] = {}
    for key, value in metadata.items():
        if _parent(key) in skipped and _is_array_document(key):
            continue
        explicit[key] = Inline(_metadata_bytes(value))
    explicit[ZMETADATA] = Inline(raw)

    grids = [found[array] for array in sorted(found)]
    references = ParquetReferenceSet(source, options, record_size, explicit, grids)
    references._probe()
    return references


def _parse_zmetadata(raw: bytes, name: str) -> tuple[dict[str, object], int]:
    try:
        document = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise ReferenceFormatError(name, None, f"not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ReferenceFormatError(name, None, "must be a JSON object")
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        problem = "missing" if metadata is None else "must be a JSON object"
        raise ReferenceFormatError(name, "metadata", problem)
    record_size = document.get("record_size")
    if isinstance(record_size, bool) or not isinstance(record_size, int) or record_size <= 0:
        problem = (
            "missing" if record_size is None else f"must be a positive integer, not {record_size!r}"
        )
        raise ReferenceFormatError(name, "record_size", problem)
    return cast(dict[str, object], metadata), record_size


def _metadata_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


def _is_array_document(key: str) -> bool:
    name = key.rpartition("/")[2]
    return name in (zarr_meta.ZARRAY, zarr_meta.ZARR_JSON, ".zattrs")


def _parent(key: str) -> str:
    return key.rpartition("/")[0]
