"""Zarr metadata as JSON text: parsed as stored, written strict (no numpy needed).

Strict JSON has no ``NaN`` or ``Infinity`` literals: they become the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"`` (what the zarr v2 and v3 specs write for a
``fill_value``, and what attributes get too). Non-ASCII characters are written as UTF-8, not
``\\uXXXX`` escapes; control characters stay escaped, as JSON requires.
"""

from __future__ import annotations

import json
import math
from typing import Any

ZMETADATA = ".zmetadata"
"""The name of zarr v2 consolidated metadata (also the head of a Parquet set)."""

ZATTRS = ".zattrs"
"""The name of a zarr v2 node's attributes document."""

ZGROUP = ".zgroup"
"""The name of a zarr v2 group's metadata document."""


def strict(value: Any) -> Any:
    """Return ``value`` with every non-finite float replaced by its spec string."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: strict(item) for key, item in value.items()}
    if isinstance(value, list):
        return [strict(item) for item in value]
    return value


def dumps(document: Any) -> bytes:
    """Return ``document`` as strict UTF-8 JSON."""
    return json.dumps(strict(document), ensure_ascii=False, allow_nan=False).encode("utf-8")


def parse(data: bytes | str) -> Any:
    """Parse a JSON document as stored (``NaN`` literals accepted); ``ValueError`` if not JSON."""
    return json.loads(data)
