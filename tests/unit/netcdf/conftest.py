"""Shared by the netCDF tests: a small set in one in-memory target, as kerchunk writes them
from a netCDF-4 file: a zlib + shuffle array with a fill value, a coordinate variable, a 0-d
array inline, a group with its own dimension, attributes of every kind."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numcodecs
import numpy as np

from refmount.config import MIB
from refmount.model import Inline, Range, Reference
from tests.fakes import DictReferences, MemoryTarget

URL = "memory://data.bin"
CACHE = 64 * MIB

TEMP = (np.arange(4 * 6, dtype="<f4").reshape(4, 6) / 4 + 250).astype("<f4")
TIME = np.arange(4, dtype="<f8") * 0.5
DEPTH = np.array([7, 8, 9], dtype=">i2")


def document(value: Any) -> Inline:
    return Inline(json.dumps(value).encode())


def zarray(shape: list[int], chunks: list[int], dtype: str, **changes: Any) -> Inline:
    meta: dict[str, Any] = {
        "zarr_format": 2,
        "shape": shape,
        "chunks": chunks,
        "dtype": dtype,
        "compressor": None,
        "filters": None,
        "order": "C",
        "fill_value": None,
    }
    meta.update(changes)
    return document(meta)


def make_set(
    temp: dict[str, Any] | None = None, extra: Mapping[str, Reference] | None = None
) -> tuple[DictReferences, MemoryTarget]:
    """The set and its target; ``temp`` changes ``temp/.zarray``, ``extra`` adds keys."""
    shuffle, zlib = numcodecs.Shuffle(4), numcodecs.Zlib(4)
    pieces = [zlib.encode(shuffle.encode(TEMP[i : i + 2].tobytes())) for i in (0, 2)]
    time_chunk = np.resize(TIME, 8).tobytes()  # a whole chunk: an unfiltered chunk is
    blob = pieces[0] + pieces[1] + time_chunk + DEPTH.tobytes()
    offsets = np.cumsum([0, len(pieces[0]), len(pieces[1]), len(time_chunk)])
    filters = [{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 4}]
    keys: dict[str, Reference] = {
        ".zgroup": document({"zarr_format": 2}),
        ".zattrs": document({"title": "ascii text", "note": "ünïcode ☃", "version": 3}),
        "temp/.zarray": zarray([4, 6], [2, 6], "<f4", filters=filters, fill_value=-999.0),
        "temp/.zattrs": document(
            {"_ARRAY_DIMENSIONS": ["time", "x"], "units": "K", "valid_range": [0.5, 400.0]}
        ),
        "temp/0.0": Range(URL, int(offsets[0]), len(pieces[0])),
        "temp/1.0": Range(URL, int(offsets[1]), len(pieces[1])),
        "time/.zarray": zarray([4], [8], "<f8"),
        "time/.zattrs": document({"_ARRAY_DIMENSIONS": ["time"], "units": "days since 2000-1-1"}),
        "time/0": Range(URL, int(offsets[2]), len(time_chunk)),
        "height/.zarray": zarray([], [], "<f8", fill_value="NaN"),
        "height/.zattrs": document({"_ARRAY_DIMENSIONS": []}),
        "height/0": Inline(np.float64(2.5).tobytes()),
        "deep/.zgroup": document({"zarr_format": 2}),
        "deep/depth/.zarray": zarray([3], [3], ">i2"),
        "deep/depth/.zattrs": document({"_ARRAY_DIMENSIONS": ["/deep/level"]}),
        "deep/depth/0": Range(URL, int(offsets[3]), DEPTH.nbytes),
    }
    if temp:
        meta = json.loads(keys["temp/.zarray"].data)  # type: ignore[union-attr]
        meta.update(temp)
        keys["temp/.zarray"] = document(meta)
    keys.update(extra or {})
    return DictReferences(keys), MemoryTarget({URL: blob})
