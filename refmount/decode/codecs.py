"""The codecs ``--decode`` runs: an allow-list of numeric codecs, each with a bounded output.

numcodecs' registry also holds ``pickle`` and other object codecs: decoding those would run
``pickle.loads`` on bytes from a target. Nothing is looked up in the registry by a name the
metadata gives; only the codecs named here are built, from their known configuration.

Compressors never produce more than the chunk's declared size (``decompress``). Filters work
element by element on what the compressor produced, so their output is bounded too; the
final size must be exactly ``prod(chunks) * itemsize``.

The TIFF codecs tifffile's references name (kerchunk's ``tiff_to_zarr``) are built here by
name too, never through imagecodecs' numcodecs registry (LZW and PackBits: see ``decompress``).
``imagecodecs_zstd`` is a plain zstd frame; ``imagecodecs_delta`` (the horizontal predictor)
keeps its input's size. JPEG and the other image codecs are lossy or carry their own image
size, and are served as stored.
"""

from __future__ import annotations

import lzma
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numcodecs
import numcodecs.blosc
import numpy as np
from numcodecs.abc import Codec

from refmount.decode.decompress import (
    DECOMPRESSORS,
    DecodeFailed,
    Undecodable,
    imagecodecs_module,
    lzma_decompress,
)

COMPRESSORS = (
    "zlib",
    "gzip",
    "bz2",
    "lzma",
    "zstd",
    "blosc",
    "lz4",
    "imagecodecs_lzw",
    "imagecodecs_packbits",
    "imagecodecs_zstd",
)
"""Byte-to-byte codecs decoded with an output bound."""

FILTER_CLASSES: Mapping[str, str] = {
    "shuffle": "Shuffle",
    "delta": "Delta",
    "fixedscaleoffset": "FixedScaleOffset",
    "quantize": "Quantize",
    "packbits": "PackBits",
    "astype": "AsType",
    "bitround": "BitRound",
    "crc32": "CRC32",
    "adler32": "Adler32",
    "fletcher32": "Fletcher32",
    "crc32c": "CRC32C",
}
"""Numeric filters and checksums (by numcodecs id: numcodecs' class name): their output is a
fixed multiple of their input."""

OPTIONAL_FILTERS: Mapping[str, str] = {
    "crc32c": "numcodecs has CRC32C only with google-crc32c installed (pip install google-crc32c)",
}
"""Why a filter numcodecs builds only with an optional package may be missing."""


def available_filters(
    module: object, classes: Mapping[str, str] = FILTER_CLASSES
) -> tuple[dict[str, type[Codec]], dict[str, str]]:
    """Return the filters ``module`` (numcodecs) has, and why each other one is missing.

    numcodecs leaves a codec out when an optional package it needs is absent (``CRC32C``
    without ``google-crc32c``): an array that needs it is served as stored, never a failure
    of the whole ``--decode``.
    """
    present: dict[str, type[Codec]] = {}
    missing: dict[str, str] = {}
    for name, class_name in classes.items():
        codec_class = getattr(module, class_name, None)
        if codec_class is None:
            missing[name] = OPTIONAL_FILTERS.get(name, f"numcodecs here has no {class_name}")
        else:
            present[name] = codec_class
    return present, missing


FILTERS, MISSING_FILTERS = available_filters(numcodecs)
"""The filters this numcodecs has, and the reason each missing one is (served as stored)."""

TIFF_FILTERS = ("imagecodecs_delta",)
"""imagecodecs' filters tifffile's references name: the output has the input's size."""

ALLOWED = frozenset(COMPRESSORS) | frozenset(FILTER_CLASSES) | frozenset(TIFF_FILTERS)
"""Every codec ``--decode`` decodes (by its numcodecs id)."""

CHECKSUMS = frozenset({"crc32", "adler32", "fletcher32", "crc32c"})
CHECKSUM_BYTES = 4
"""What each checksum filter adds to the bytes it encodes (the bound allows for it)."""

DTYPE_FIELDS = ("dtype", "astype", "encode_dtype", "decode_dtype")
"""Filter configuration fields that name a dtype: the widest bounds the compressor's output."""


Step = Callable[[bytes], bytes]


@dataclass(frozen=True, slots=True)
class Pipeline:
    """How one array's stored chunks become C-order little-endian chunks.

    ``steps`` run in order on the stored bytes (compressor first, then the filters in
    reverse); ``dtype`` is the array's dtype as stored, ``chunks`` its chunk shape (stored
    in ``order``; ``axes`` is the permutation that gives the array's own axes, from zarr
    v3's ``transpose``).
    """

    names: str
    steps: tuple[tuple[str, Step], ...]
    dtype: np.dtype[Any]
    chunks: tuple[int, ...]
    order: str = "C"
    axes: tuple[int, ...] | None = None

    @property
    def size(self) -> int:
        """Return the size of a decoded chunk: ``prod(chunks) * itemsize``."""
        return math.prod(self.chunks) * self.dtype.itemsize

    def decode(self, stored: bytes) -> bytes:
        """Return the decoded chunk; raises ``DecodeFailed`` naming the codec and reason."""
        data = stored
        for name, step in self.steps:
            try:
                data = step(data)
            except DecodeFailed:
                raise
            except Exception as error:  # any codec failure is one answer: EIO
                raise DecodeFailed(name, str(error) or type(error).__name__) from error
        if len(data) != self.size:
            raise DecodeFailed(self.names, f"decoded to {len(data)} bytes, expected {self.size}")
        return self._arranged(data)

    def _arranged(self, data: bytes) -> bytes:
        """Return the chunk in C order and little-endian."""
        little = self.dtype.newbyteorder("<") if self.dtype.byteorder == ">" else self.dtype
        if little is self.dtype and self.order == "C" and self.axes is None:
            return data
        values = np.frombuffer(data, self.dtype)
        if self.axes is None:
            shaped = values.reshape(self.chunks, order="F" if self.order == "F" else "C")
        else:
            stored_shape = tuple(self.chunks[axis] for axis in self.axes)
            shaped = values.reshape(stored_shape).transpose(np.argsort(self.axes))
        return np.ascontiguousarray(shaped, dtype=little).tobytes()


def stored_dtype(value: object) -> np.dtype[Any]:
    """Return the numeric dtype a zarr v2 ``dtype`` names; ``Undecodable`` for the rest."""
    if not isinstance(value, str):
        raise Undecodable("dtype", f"structured dtype {value!r} is served as stored")
    try:
        dtype = np.dtype(value)
    except TypeError as error:
        raise Undecodable("dtype", f"unknown dtype {value!r}") from error
    if dtype.kind not in "biufcmMSUV" or dtype.hasobject or dtype.fields:
        raise Undecodable("dtype", f"object dtype {value!r} is served as stored")
    if dtype.itemsize == 0:
        raise Undecodable("dtype", f"variable-length dtype {value!r} is served as stored")
    return dtype


def v2_pipeline(meta: Mapping[str, Any]) -> Pipeline:
    """Return the pipeline of a ``.zarray`` document; ``Undecodable`` when it has none."""
    dtype = stored_dtype(meta.get("dtype"))
    chunks = tuple(int(c) for c in meta["chunks"])
    order = meta.get("order", "C")
    if order not in ("C", "F"):
        raise Undecodable("order", f"order {order!r} is neither C nor F")
    filters = list(meta.get("filters") or [])
    compressor = meta.get("compressor")
    widest = max([dtype.itemsize, *(_widest(f) for f in filters)])
    bound = math.prod(chunks) * widest + _checksum_bytes(_config(f)["id"] for f in filters)
    steps: list[tuple[str, Step]] = []
    if compressor is not None:
        steps.append(compressor_step(_config(compressor), bound))
    for config in reversed(filters):  # kerchunk puts HDF5's deflate among the filters
        steps.append(compressor_step(_config(config), bound))
    names = codec_names([*filters, *([compressor] if compressor is not None else [])])
    return Pipeline(names, tuple(steps), dtype, chunks, order)


V3_TYPES = {
    "bool": "|b1",
    **{f"int{b}": f"<i{b // 8}" for b in (8, 16, 32, 64)},
    **{f"uint{b}": f"<u{b // 8}" for b in (8, 16, 32, 64)},
    **{f"float{b}": f"<f{b // 8}" for b in (16, 32, 64)},
    "complex64": "<c8",
    "complex128": "<c16",
}
"""zarr v3 data types ``--decode`` decodes, as little-endian numpy dtypes."""

V3_COMPRESSORS = {"gzip": "gzip", "zstd": "zstd", "blosc": "blosc", "crc32c": "crc32c"}
"""zarr v3 bytes-to-bytes codecs, by their numcodecs id."""


def v3_pipeline(meta: Mapping[str, Any]) -> Pipeline:
    """Return the pipeline of a v3 array's ``zarr.json``; ``Undecodable`` when it has none."""
    data_type = meta.get("data_type")
    if not isinstance(data_type, str) or data_type not in V3_TYPES:
        raise Undecodable("data_type", f"data type {data_type!r} is served as stored")
    little = np.dtype(V3_TYPES[data_type])
    chunks = tuple(int(c) for c in meta["chunk_grid"]["configuration"]["chunk_shape"])
    codecs = [_v3_codec(c) for c in meta.get("codecs") or []]
    names = "+".join(name for name, _ in codecs) or "none"
    serializer = [i for i, (name, _) in enumerate(codecs) if name == "bytes"]
    if "sharding_indexed" in (name for name, _ in codecs):
        raise Undecodable("sharding_indexed", "sharded arrays are served as stored for now")
    if len(serializer) != 1:
        raise Undecodable(names, "no single bytes codec")
    at = serializer[0]
    endian = codecs[at][1].get("endian", "little")
    dtype = little.newbyteorder(">") if endian == "big" and little.itemsize > 1 else little
    axes: tuple[int, ...] | None = None
    array_steps: list[tuple[str, Step]] = []
    for name, config in codecs[:at]:
        if name == "transpose" and axes is None:
            axes = tuple(int(a) for a in config.get("order", ()))
            if sorted(axes) != list(range(len(chunks))):
                raise Undecodable("transpose", f"order {list(axes)} is not a permutation")
        elif name.startswith("numcodecs."):
            array_steps.append(filter_step({**config, "id": name.removeprefix("numcodecs.")}))
        else:
            raise Undecodable(name, "not among the codecs --decode decodes (served as stored)")
    bound = math.prod(chunks) * little.itemsize + _checksum_bytes(
        name.removeprefix("numcodecs.") for name, _ in codecs
    )
    steps: list[tuple[str, Step]] = []
    for name, config in reversed(codecs[at + 1 :]):
        plain = V3_COMPRESSORS.get(name) or name.removeprefix("numcodecs.")
        if plain not in ALLOWED or not (name in V3_COMPRESSORS or name.startswith("numcodecs.")):
            raise Undecodable(name, _refusal(plain))
        steps.append(compressor_step({**_v3_settings(plain, config), "id": plain}, bound))
    steps.extend(reversed(array_steps))
    return Pipeline(names, tuple(steps), dtype, chunks, "C", axes)


def _v3_codec(config: object) -> tuple[str, dict[str, Any]]:
    if isinstance(config, str):
        return config, {}
    if not isinstance(config, Mapping) or not isinstance(config.get("name"), str):
        raise Undecodable(repr(config), "a codec without a name")
    settings = config.get("configuration") or {}
    return config["name"], dict(settings) if isinstance(settings, Mapping) else {}


def _v3_settings(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Return a v3 codec's configuration as numcodecs takes it (decoding needs none of it
    but lzma's, and the checksums' locations)."""
    if name in ("gzip", "zstd", "blosc"):
        return {}
    return dict(config)


def _checksum_bytes(names: Iterable[str]) -> int:
    return CHECKSUM_BYTES * sum(name in CHECKSUMS for name in names)


def _config(config: object) -> dict[str, Any]:
    if not isinstance(config, Mapping) or not isinstance(config.get("id"), str):
        raise Undecodable(repr(config), "a codec without an id")
    return dict(config)


def _widest(config: object) -> int:
    """Return the widest itemsize a filter's configuration names (1 if none)."""
    if not isinstance(config, Mapping):
        return 1
    sizes = [1]
    for field in DTYPE_FIELDS:
        value = config.get(field)
        if isinstance(value, str):
            try:
                sizes.append(np.dtype(value).itemsize)
            except TypeError:
                continue
    return max(sizes)


def filter_step(config: Mapping[str, Any]) -> tuple[str, Step]:
    """Return the decoding step of an allowed filter; ``Undecodable`` for any other codec."""
    name = config["id"]
    if name == "imagecodecs_delta":
        return name, _delta_step(config)
    codec_class = FILTERS.get(name)
    if codec_class is None:
        raise Undecodable(name, MISSING_FILTERS.get(name) or _refusal(name))
    arguments = {k: v for k, v in config.items() if k != "id"}
    try:
        codec = codec_class(**arguments)
    except (TypeError, ValueError) as error:
        raise Undecodable(name, f"bad configuration {dict(config)!r}: {error}") from error

    def step(data: bytes) -> bytes:
        return _as_bytes(codec.decode(data))

    return name, step


def compressor_step(config: Mapping[str, Any], bound: int) -> tuple[str, Step]:
    """Return the bounded decoding step of an allowed compressor (or filter in its place)."""
    name = config["id"]
    if name in FILTER_CLASSES or name in TIFF_FILTERS:
        return filter_step(config)
    decoder = DECOMPRESSORS.get(name)
    if decoder is None:
        raise Undecodable(name, _refusal(name))
    if name in ("imagecodecs_lzw", "imagecodecs_packbits"):
        imagecodecs_module()  # without it the array is served as stored
    if name == "lzma":
        lzma_format = int(config.get("format", lzma.FORMAT_AUTO))
        lzma_filters = config.get("filters")
        return name, lambda data: lzma_decompress(data, bound, lzma_format, lzma_filters)
    return name, lambda data: decoder(data, bound)


def _refusal(name: str) -> str:
    if name in ("pickle", "json2", "vlen-utf8", "vlen-bytes", "vlen-array", "categorize", "base64"):
        return "an object codec, never decoded (served as stored)"
    return "not among the codecs --decode decodes (served as stored)"


def _as_bytes(value: object) -> bytes:
    array = np.ascontiguousarray(value)
    return array.view(np.uint8).tobytes() if array.ndim else array.tobytes()


def _delta_step(config: Mapping[str, Any]) -> Step:
    """Return the decoding step of tifffile's horizontal predictor (a cumulative sum)."""
    try:
        dtype = np.dtype(config["dtype"])
        shape = tuple(int(n) for n in config["shape"])
        axis, dist = int(config.get("axis", -1)), int(config.get("dist", 1))
    except (KeyError, TypeError, ValueError) as error:
        raise Undecodable("imagecodecs_delta", f"bad configuration {dict(config)!r}") from error
    if dtype.kind not in "iu" or dist != 1 or not shape or not -len(shape) <= axis < len(shape):
        raise Undecodable("imagecodecs_delta", f"configuration {dict(config)!r} not decoded")
    delta_decode = imagecodecs_module().delta_decode

    def step(data: bytes) -> bytes:
        if len(data) != math.prod(shape) * dtype.itemsize:
            raise DecodeFailed("imagecodecs_delta", f"{len(data)} bytes, not of shape {shape}")
        values = np.frombuffer(data, dtype).reshape(shape)
        return _as_bytes(delta_decode(values, axis=axis, dist=dist))

    return step


def codec_names(configs: Sequence[object]) -> str:
    """Name a list of codec configurations for messages (``shuffle+zlib``)."""
    return "+".join(_config(c)["id"] for c in configs) or "none"
