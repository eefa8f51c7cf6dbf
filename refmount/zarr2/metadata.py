"""A zarr v3 ``zarr.json`` translated into zarr v2 documents, or the reason it cannot be.

A group becomes ``.zgroup`` and ``.zattrs``. An array becomes ``.zarray`` and ``.zattrs``
(its attributes, and ``_ARRAY_DIMENSIONS`` from ``dimension_names`` when every name is set,
as netCDF-C, GDAL and xarray read dimensions in zarr v2):

- ``data_type`` and the ``bytes`` codec's ``endian`` become the ``dtype`` (``<f4``, ``>i2``,
  ``|u1``); a ``transpose`` that reverses the axes becomes ``order`` ``"F"`` (zarr-python's
  own v2 to v3 migration writes ``F`` so), the identity none;
- the codecs around ``bytes`` become ``filters`` and ``compressor`` in encoding order: the
  ``numcodecs.*`` array-to-array codecs first, then every bytes-to-bytes codec but the last,
  which is the ``compressor`` (v2 encodes with the filters in order, then the compressor;
  v3 runs its codecs in list order, so both chains encode alike);
- ``fill_value`` is written as v2 writes it: ``"NaN"``/``"Infinity"``/``"-Infinity"`` for
  non-finite floats (v3's ``"0x..."`` bit patterns are read as the float they spell), complex
  numbers as ``[re, im]``;
- chunks are named ``I.J`` (``dimension_separator`` ``"."``), a 0-d array's ``0``.

What has no v2 form (sharding, variable-length or other data types v2 lacks, array-to-bytes
codecs other than ``bytes``, a transpose other than the identity or the reversal, storage
transformers) raises ``NotViewable``: that array is served as stored. Nothing here needs
numpy or numcodecs.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

ARRAY_DIMENSIONS = "_ARRAY_DIMENSIONS"
"""The attribute in which zarr v2 readers (xarray, netCDF-C, GDAL) find dimension names."""

FILL_VALUE_ATTRIBUTE = "_FillValue"
"""The CF attribute of the value that marks missing data."""

V3_TYPES = {
    "bool": "b1",
    **{f"int{b}": f"i{b // 8}" for b in (8, 16, 32, 64)},
    **{f"uint{b}": f"u{b // 8}" for b in (8, 16, 32, 64)},
    **{f"float{b}": f"f{b // 8}" for b in (16, 32, 64)},
    "complex64": "c8",
    "complex128": "c16",
}
"""The zarr v3 data types with a v2 ``dtype`` (without its byte order character)."""

FLOAT_FORMATS = {2: "e", 4: "f", 8: "d"}
"""struct formats of the IEEE floats, by size in bytes (for ``"0x..."`` fill values)."""

BYTES_TO_BYTES = {"gzip": "gzip", "zstd": "zstd", "blosc": "blosc", "crc32c": "crc32c"}
"""The v3 core bytes-to-bytes codecs, by their numcodecs (v2) id; ``zlib`` is taken too."""

NUMCODECS_PREFIX = "numcodecs."
"""zarr-python 3 names a numcodecs codec it wraps ``numcodecs.<id>``, configured as v2 is."""

ARRAY_TO_BYTES = frozenset({"numcodecs.pcodec", "numcodecs.zfpy"})
"""numcodecs' array-to-bytes codecs: they would replace ``bytes``, which v2 cannot say."""

BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
"""v3's blosc ``shuffle`` names, as numcodecs' numbers."""


class NotViewable(Exception):
    """An array with no zarr v2 form: ``codec`` names what stands in the way (a codec, the
    data type, ...), ``reason`` says why."""

    def __init__(self, codec: str, reason: str) -> None:
        super().__init__(f"{codec}: {reason}")
        self.codec = codec
        self.reason = reason


def group_documents(document: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the ``.zgroup`` and ``.zattrs`` of a v3 group's ``zarr.json``."""
    return {"zarr_format": 2}, attributes_of(document)


def array_documents(document: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the ``.zarray`` and ``.zattrs`` of a v3 array's ``zarr.json``; raises
    ``NotViewable`` when it has no v2 form."""
    shape = _ints(document.get("shape"), "shape")
    chunk_shape = _chunk_shape(document, len(shape))
    transformers = document.get("storage_transformers")
    if transformers:
        raise NotViewable("storage_transformers", "v2 has no storage transformers")
    codecs = [_codec(item) for item in _list(document.get("codecs"), "codecs")]
    names = [name for name, _ in codecs]
    if "sharding_indexed" in names:
        raise NotViewable("sharding_indexed", "a shard holds many chunks; v2 has no shards")
    kind, itemsize = _data_type(document.get("data_type"))
    if names.count("bytes") != 1:
        others = [name for name in names if not _known(name)]
        raise NotViewable("+".join(others) or "codecs", "v2 serializes with plain bytes only")
    at = names.index("bytes")
    endian = codecs[at][1].get("endian")
    dtype = _dtype(kind, itemsize, endian)
    order, filters = _array_codecs(codecs[:at], len(shape), itemsize > 1 and endian == "big")
    after = [_bytes_codec(name, config) for name, config in codecs[at + 1 :]]
    filters += after[:-1]
    zarray = {
        "zarr_format": 2,
        "shape": shape,
        "chunks": chunk_shape,
        "dtype": dtype,
        "compressor": after[-1] if after else None,
        "fill_value": fill_value(document.get("fill_value"), kind, itemsize),
        "order": order,
        "filters": filters or None,
        "dimension_separator": ".",
    }
    return zarray, _attributes_with_dimensions(document, len(shape), kind)


def _attributes_with_dimensions(
    document: Mapping[str, Any], ndim: int, kind: str
) -> dict[str, Any]:
    """Return an array's attributes, with ``_ARRAY_DIMENSIONS`` when every name is set and,
    for floats, xarray's v3 ``_FillValue`` written as v2 has it."""
    attributes = attributes_of(document)
    if kind in "fc" and FILL_VALUE_ATTRIBUTE in attributes:
        attributes[FILL_VALUE_ATTRIBUTE] = xarray_fill_value(attributes[FILL_VALUE_ATTRIBUTE])
    dimensions = document.get("dimension_names")
    if (
        ARRAY_DIMENSIONS not in attributes
        and isinstance(dimensions, list)
        and len(dimensions) == ndim
        and all(isinstance(name, str) for name in dimensions)
    ):
        attributes[ARRAY_DIMENSIONS] = list(dimensions)
    return attributes


def decoded_array_documents(
    document: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the ``.zarray`` and ``.zattrs`` of a v3 array as ``--decode`` serves it: no
    compressor or filters, little-endian, C order (for an array whose codecs have no v2 form
    but which ``--decode`` decodes); raises ``NotViewable`` when the data type has none."""
    shape = _ints(document.get("shape"), "shape")
    chunk_shape = _chunk_shape(document, len(shape))
    kind, itemsize = _data_type(document.get("data_type"))
    zarray = {
        "zarr_format": 2,
        "shape": shape,
        "chunks": chunk_shape,
        "dtype": _dtype(kind, itemsize, "little"),
        "compressor": None,
        "fill_value": fill_value(document.get("fill_value"), kind, itemsize),
        "order": "C",
        "filters": None,
        "dimension_separator": ".",
    }
    return zarray, _attributes_with_dimensions(document, len(shape), kind)


def xarray_fill_value(value: Any) -> Any:
    """Return a ``_FillValue`` attribute as zarr v2 stores keep it.

    In zarr v3 stores xarray writes a float's ``_FillValue`` as the base64 of a little-endian
    double (a complex one as two of them); in v2 it writes the number, which netCDF-C and GDAL
    read. Anything else is returned as it is.
    """
    if isinstance(value, list) and len(value) == 2:
        parts = [xarray_fill_value(part) for part in value]
        return (
            parts if all(not isinstance(part, str) or part in _SPECIAL for part in parts) else value
        )
    if not isinstance(value, str) or len(value) != 12:
        return value
    try:
        data = base64.b64decode(value, validate=True)
    except ValueError:
        return value
    if len(data) != 8:
        return value
    number = struct.unpack("<d", data)[0]
    if math.isfinite(number):
        return number
    return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")


_SPECIAL = frozenset({"NaN", "Infinity", "-Infinity"})


def attributes_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """Return a node's attributes (``{}`` when it has none)."""
    attributes = document.get("attributes")
    return dict(attributes) if isinstance(attributes, Mapping) else {}


def _known(name: str) -> bool:
    """Return True for a codec with a v2 form where it stands (``bytes`` aside)."""
    if name.startswith(NUMCODECS_PREFIX):
        return name not in ARRAY_TO_BYTES
    return name == "transpose" or name == "zlib" or name in BYTES_TO_BYTES


def _array_codecs(
    codecs: Sequence[tuple[str, dict[str, Any]]], ndim: int, big_endian: bool
) -> tuple[str, list[dict[str, Any]]]:
    """Return the ``order`` and the filters that the codecs before ``bytes`` stand for."""
    order = "C"
    filters: list[dict[str, Any]] = []
    for position, (name, config) in enumerate(codecs):
        if name == "transpose":
            if position != 0:
                raise NotViewable("transpose", "v2's order applies before every filter")
            axes = config.get("order")
            if axes == list(range(ndim)):
                continue
            if axes != list(range(ndim - 1, -1, -1)):
                raise NotViewable("transpose", f"order {axes!r} is neither C nor F order")
            order = "F"
        elif name.startswith(NUMCODECS_PREFIX) and name not in ARRAY_TO_BYTES:
            if big_endian:
                raise NotViewable(name, "an array-to-array codec on big-endian data")
            filters.append(_numcodecs(name, config))
        else:
            raise NotViewable(name, "has no zarr v2 form")
    return order, filters


def _bytes_codec(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the numcodecs configuration of a bytes-to-bytes codec."""
    if name == "gzip":
        return {"id": "gzip", "level": _int(config.get("level", 1), "gzip level")}
    if name == "zlib":
        return {"id": "zlib", "level": _int(config.get("level", 1), "zlib level")}
    if name == "zstd":
        out = {"id": "zstd", "level": _int(config.get("level", 0), "zstd level")}
        if config.get("checksum"):
            out["checksum"] = True  # said only when set: older numcodecs lack the argument
        return out
    if name == "blosc":
        return _blosc(config)
    if name == "crc32c":
        return {"id": "crc32c", "location": "end"}  # v3 appends it; numcodecs prepends by default
    if name.startswith(NUMCODECS_PREFIX) and name not in ARRAY_TO_BYTES:
        return _numcodecs(name, config)
    raise NotViewable(name, "has no zarr v2 form")


def _blosc(config: Mapping[str, Any]) -> dict[str, Any]:
    shuffle = config.get("shuffle", "noshuffle")
    if shuffle not in BLOSC_SHUFFLE:
        raise NotViewable("blosc", f"shuffle {shuffle!r} is not one blosc knows")
    cname = config.get("cname", "lz4")
    if not isinstance(cname, str):
        raise NotViewable("blosc", f"cname {cname!r} is not a name")
    return {
        "id": "blosc",
        "cname": cname,
        "clevel": _int(config.get("clevel", 5), "blosc clevel"),
        "shuffle": BLOSC_SHUFFLE[shuffle],
        "blocksize": _int(config.get("blocksize", 0), "blosc blocksize"),
    }


def _numcodecs(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the v2 form of a codec zarr-python 3 wraps: its id, then its configuration."""
    codec_id = name.removeprefix(NUMCODECS_PREFIX)
    return {"id": codec_id, **{k: v for k, v in config.items() if k not in ("id", "name")}}


def _data_type(value: object) -> tuple[str, int]:
    """Return the kind and itemsize of a v3 data type that v2 has."""
    code = V3_TYPES.get(value) if isinstance(value, str) else None
    if code is None:
        raise NotViewable("data_type", f"data type {value!r} has no zarr v2 form here")
    return code[0], int(code[1:])


def _dtype(kind: str, itemsize: int, endian: object) -> str:
    if itemsize == 1:
        return f"|{kind}1"
    if endian not in ("little", "big"):
        raise NotViewable("bytes", f"endian {endian!r} must be little or big")
    return f"{'<' if endian == 'little' else '>'}{kind}{itemsize}"


def fill_value(value: Any, kind: str, itemsize: int) -> Any:
    """Return a v3 ``fill_value`` as zarr v2 writes it for a dtype of ``kind``."""
    if value is None:
        return None
    if kind == "b":
        if not isinstance(value, bool):
            raise NotViewable("fill_value", f"{value!r} is not a boolean")
        return value
    if kind in "iu":
        if isinstance(value, bool) or not isinstance(value, int):
            raise NotViewable("fill_value", f"{value!r} is not an integer")
        return value
    if kind == "f":
        return _float(value, itemsize)
    if not isinstance(value, list) or len(value) != 2:
        raise NotViewable("fill_value", f"{value!r} is not a complex number [re, im]")
    return [_float(part, itemsize // 2) for part in value]


def _float(value: Any, itemsize: int) -> float | int | str:
    """Return a float fill value as v2 JSON: a number or ``NaN``/``Infinity``/``-Infinity``."""
    if isinstance(value, str) and value.startswith("0x"):
        try:
            if len(value) != 2 + 2 * itemsize:
                raise ValueError("one hex digit per half byte")
            bits = int(value, 16).to_bytes(itemsize, "big")
        except (ValueError, OverflowError) as error:
            raise NotViewable("fill_value", f"{value!r} is not {itemsize} bytes") from error
        value = struct.unpack(">" + FLOAT_FORMATS[itemsize], bits)[0]
    if value in ("NaN", "Infinity", "-Infinity"):
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NotViewable("fill_value", f"{value!r} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _chunk_shape(document: Mapping[str, Any], ndim: int) -> list[int]:
    grid = document.get("chunk_grid")
    if not isinstance(grid, Mapping) or grid.get("name") != "regular":
        raise NotViewable("chunk_grid", "only a regular chunk grid has a v2 form")
    configuration = grid.get("configuration")
    chunks = _ints(
        configuration.get("chunk_shape") if isinstance(configuration, Mapping) else None,
        "chunk_shape",
    )
    if len(chunks) != ndim:
        raise NotViewable("chunk_grid", f"chunk_shape {chunks} does not match the shape")
    return chunks


def _codec(item: object) -> tuple[str, dict[str, Any]]:
    if isinstance(item, str):
        return item, {}
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        raise NotViewable("codecs", f"{item!r} is not a codec")
    configuration = item.get("configuration") or {}
    if not isinstance(configuration, Mapping):
        raise NotViewable(item["name"], "its configuration is not an object")
    return item["name"], dict(configuration)


def _list(value: object, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise NotViewable(name, f"{name} must be a list")
    return value


def _ints(value: object, name: str) -> list[int]:
    items = _list(value, name)
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
        raise NotViewable(name, f"{name} {items!r} is not a list of sizes")
    return list(items)


def _int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotViewable(name.split()[0], f"{name} {value!r} is not an integer")
    return value
