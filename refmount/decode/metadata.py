"""Metadata as a decoded mount serves it: strict UTF-8 JSON, arrays without codecs.

The strict JSON helpers (no ``NaN`` literals, UTF-8) are ``formats.zarr_json``'s, which the
zarr v2 view shares without numpy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from refmount.formats.zarr_json import ZATTRS, ZGROUP, ZMETADATA, dumps, parse, strict
from refmount.formats.zarr_meta import ZARR_JSON, ZARRAY

__all__ = ["ZMETADATA", "dumps", "parse", "strict"]  # (shared with the zarr v2 view)

JSON_NAMES = frozenset({ZARRAY, ZATTRS, ZGROUP, ZMETADATA, ZARR_JSON})
"""The names of the JSON documents a decoded mount rewrites."""


def little_endian(dtype: str) -> str:
    """Return a zarr v2 dtype string in little-endian (``|`` for one-byte types)."""
    parsed = np.dtype(dtype)
    if parsed.itemsize == 1 or parsed.byteorder == "|":
        return "|" + parsed.str[1:]
    return "<" + parsed.str[1:]


def decoded_zarray(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``.zarray`` of a decoded array: no codecs, little-endian, C order."""
    out = dict(meta)
    out["compressor"] = None
    out["filters"] = None
    out["order"] = "C"
    out["dtype"] = little_endian(str(meta["dtype"]))
    return out


def decoded_zarr_json(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``zarr.json`` of a decoded v3 array: its codecs only ``bytes``, little-endian."""
    out = dict(meta)
    out["codecs"] = [{"name": "bytes", "configuration": {"endian": "little"}}]
    return out


Rewrite = Callable[[str, Any], Any]
"""Rewrites one metadata document (by its key) as the decoded mount serves it."""


def consolidated(document: Any, rewrite: Rewrite, base: str = "") -> Any:
    """Return consolidated metadata with each entry rewritten by ``rewrite(key, entry)``.

    zarr v2's ``.zmetadata`` (and a Parquet set's) holds ``{"metadata": {key: document}}``,
    each document an object or its JSON text; a v3 group's ``zarr.json`` holds
    ``consolidated_metadata.metadata``, keyed by node path. Keys are relative to ``base``,
    the directory of the document (``""`` or ``"group/"``).
    """
    if not isinstance(document, dict):
        return document
    out = dict(document)
    entries = out.get("metadata")
    if isinstance(entries, dict):
        out["metadata"] = {
            key: _entry(base + key, value, rewrite) for key, value in entries.items()
        }
    nested = out.get("consolidated_metadata")
    if isinstance(nested, dict) and isinstance(nested.get("metadata"), dict):
        out["consolidated_metadata"] = dict(nested)
        out["consolidated_metadata"]["metadata"] = {
            path: rewrite(f"{base}{path}/{ZARR_JSON}", value)
            for path, value in nested["metadata"].items()
        }
    return out


def _entry(key: str, value: Any, rewrite: Rewrite) -> Any:
    if isinstance(value, str):
        try:
            parsed = parse(value)
        except ValueError:
            return value
        return json.dumps(strict(rewrite(key, parsed)), ensure_ascii=False, allow_nan=False)
    return rewrite(key, value)
