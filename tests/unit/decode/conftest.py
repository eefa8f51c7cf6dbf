"""Shared by the decode tests: a two-chunk zlib array ``x`` in one in-memory target."""

from __future__ import annotations

import json
from typing import Any

import numcodecs
import numpy as np

from refmount.config import MIB
from refmount.model import Inline, Range
from tests.fakes import DictReferences, MemoryTarget

URL = "memory://data.bin"
CACHE = 64 * MIB


def zarray(**changes: Any) -> Inline:
    meta = {
        "zarr_format": 2,
        "shape": [4, 6],
        "chunks": [2, 6],
        "dtype": ">f4",
        "compressor": {"id": "zlib", "level": 1},
        "filters": None,
        "order": "C",
        "fill_value": float("nan"),
    }
    meta.update(changes)
    return Inline(json.dumps(meta).encode())


VALUES = np.arange(24, dtype=">f4").reshape(4, 6)


def make_set(**changes: Any) -> tuple[DictReferences, MemoryTarget]:
    """An array ``x`` of two zlib chunks in one target object, plus a group and attributes."""
    first = numcodecs.Zlib().encode(VALUES[:2].tobytes())
    second = numcodecs.Zlib().encode(VALUES[2:].tobytes())
    target = MemoryTarget({URL: first + second})
    references = DictReferences(
        {
            ".zgroup": Inline(b'{"zarr_format": 2}'),
            ".zattrs": Inline(b'{"title": "t\\u00e9", "v": NaN}'),
            "x/.zarray": zarray(**changes),
            "x/.zattrs": Inline(b'{"_ARRAY_DIMENSIONS": ["a", "b"]}'),
            "x/0.0": Range(URL, 0, len(first)),
            "x/1.0": Range(URL, len(first), len(second)),
        }
    )
    return references, target
