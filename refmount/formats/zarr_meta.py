"""Zarr array metadata (v2 ``.zarray``, v3 ``zarr.json``) turned into validated chunk grids."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import cast

from refmount.errors import ReferenceFormatError
from refmount.model import ChunkGrid

ZARRAY = ".zarray"
"""The name of a zarr v2 array's metadata document."""

ZARR_JSON = "zarr.json"
"""The name of a zarr v3 node's metadata document (array or group)."""


def array_of(key: str) -> tuple[str, str] | None:
    """Split an array-metadata key into ``(array path, document name)``, or return None.

    ``"deep/s/.zarray"`` gives ``("deep/s", ".zarray")``; ``".zarray"`` gives ``("", ".zarray")``
    (an array at the root); ``"g/zarr.json"`` gives ``("g", "zarr.json")`` even though it may
    describe a group. Any other key gives None.
    """
    parent, _, name = key.rpartition("/")
    if name in (ZARRAY, ZARR_JSON):
        return parent, name
    return None


def grid_for_key(key: str, value: object, source: str) -> ChunkGrid | None:
    """Return the chunk grid described by metadata ``key`` holding ``value``, or None.

    None means the key is not array metadata (``.zattrs``, ``.zgroup``, a v3 group, …).
    ``value`` is the parsed JSON document or its JSON text. Raises ``ReferenceFormatError``
    naming ``source`` and ``key`` when the document is malformed.
    """
    split = array_of(key)
    if split is None:
        return None
    array, name = split
    document = _document(value, source, key)
    if name == ZARRAY:
        return grid_from_zarray(array, document, source, key)
    return grid_from_zarr_json(array, document, source, key)


def grid_from_zarray(
    array: str, document: Mapping[str, object], source: str, key: str
) -> ChunkGrid:
    """Return the chunk grid of a zarr v2 array from its parsed ``.zarray`` document.

    The grid has ``ceil(shape / chunks)`` chunks along each dimension (one chunk, named
    ``"0"``, for a 0-d array) and joins indices with ``dimension_separator`` (default ``"."``).
    """
    shape = _int_list(document, "shape", source, key, minimum=0)
    chunks = _int_list(document, "chunks", source, key, minimum=1)
    if len(shape) != len(chunks):
        raise ReferenceFormatError(
            source,
            key,
            f"shape has {len(shape)} dimensions but chunks has {len(chunks)}",
        )
    separator = _separator(document.get("dimension_separator", "."), ".")
    if separator is None:
        raise ReferenceFormatError(
            source,
            key,
            f'dimension_separator must be "." or "/", not {document["dimension_separator"]!r}',
        )
    return ChunkGrid(array, _extents(shape, chunks), separator)


def grid_from_zarr_json(
    array: str, document: Mapping[str, object], source: str, key: str
) -> ChunkGrid | None:
    """Return the chunk grid of a zarr v3 array from its ``zarr.json``, or None for a group.

    Only the ``regular`` chunk grid exists in zarr v3. The ``default`` chunk key encoding puts
    keys under ``c`` and joins indices with ``"/"`` (a 0-d array's one chunk is ``c``); the
    ``v2`` encoding has no prefix and joins with ``"."``; ``configuration.separator`` overrides
    either default. A missing ``chunk_key_encoding`` is read as ``default``.
    """
    node_type = document.get("node_type")
    if node_type == "group":
        return None
    if node_type != "array":
        raise ReferenceFormatError(
            source, key, f'node_type must be "array" or "group", not {node_type!r}'
        )
    shape = _int_list(document, "shape", source, key, minimum=0)
    grid = _object(document, "chunk_grid", source, key)
    if grid.get("name") != "regular":
        raise ReferenceFormatError(
            source, key, f'chunk_grid name {grid.get("name")!r} is not supported (only "regular")'
        )
    configuration = _object(grid, "configuration", source, key, where="chunk_grid")
    chunk_shape = _int_list(
        configuration, "chunk_shape", source, key, minimum=1, where="chunk_grid.configuration"
    )
    if len(shape) != len(chunk_shape):
        raise ReferenceFormatError(
            source,
            key,
            f"shape has {len(shape)} dimensions but chunk_shape has {len(chunk_shape)}",
        )
    if "chunk_key_encoding" in document:
        encoding = _object(document, "chunk_key_encoding", source, key)
    else:
        encoding = {"name": "default"}
    name = encoding.get("name")
    if name == "default":
        prefix, separator = "c", "/"
    elif name == "v2":
        prefix, separator = "", "."
    else:
        raise ReferenceFormatError(
            source, key, f'chunk_key_encoding name must be "default" or "v2", not {name!r}'
        )
    options: Mapping[str, object] = {}
    if "configuration" in encoding:
        options = _object(encoding, "configuration", source, key, where="chunk_key_encoding")
    chosen = _separator(options.get("separator", separator), separator)
    if chosen is None:
        raise ReferenceFormatError(
            source,
            key,
            'chunk_key_encoding.configuration.separator must be "." or "/", '
            f"not {options['separator']!r}",
        )
    return ChunkGrid(array, _extents(shape, chunk_shape), chosen, prefix)


def _extents(shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    return tuple(-(-size // chunk) for size, chunk in zip(shape, chunks, strict=True))


def _separator(value: object, default: str) -> str | None:
    if value is None:
        return default
    if value == ".":
        return "."
    if value == "/":
        return "/"
    return None


def _document(value: object, source: str, key: str) -> Mapping[str, object]:
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise ReferenceFormatError(source, key, f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ReferenceFormatError(source, key, "array metadata must be a JSON object")
    return cast(dict[str, object], value)


def _object(
    document: Mapping[str, object], name: str, source: str, key: str, where: str = ""
) -> Mapping[str, object]:
    value = document.get(name)
    if not isinstance(value, dict):
        label = f"{where}.{name}" if where else name
        raise ReferenceFormatError(source, key, f"{label} must be an object")
    return cast(dict[str, object], value)


def _int_list(
    document: Mapping[str, object],
    name: str,
    source: str,
    key: str,
    *,
    minimum: int,
    where: str = "",
) -> list[int]:
    label = f"{where}.{name}" if where else name
    value = document.get(name)
    if not isinstance(value, list):
        raise ReferenceFormatError(source, key, f"{label} must be a list of integers")
    out: list[int] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise ReferenceFormatError(
                source, key, f"{label} must be a list of integers, not {value!r}"
            )
        if item < minimum:
            kind = "positive" if minimum > 0 else "non-negative"
            raise ReferenceFormatError(
                source, key, f"{label} must hold {kind} integers, not {value!r}"
            )
        out.append(item)
    return out
