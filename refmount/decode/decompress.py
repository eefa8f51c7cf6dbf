"""Decompressors with a bound: none produces more than the chunk's declared size, and the
errors of decoding (``Undecodable``: served as stored; ``DecodeFailed``: one chunk).

zlib, gzip, bz2, lzma and zstd decompress with an output limit; blosc and lz4 have the size
their header declares checked against the bound before anything is allocated; LZW and
PackBits (imagecodecs) carry no decoded size, so they decode into a buffer of the bound plus
one byte: a chunk that fills it is larger than declared.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numcodecs
import numcodecs.blosc
import zstandard


class Undecodable(Exception):
    """An array whose codecs or dtype ``--decode`` does not decode; it is served as stored."""

    def __init__(self, codec: str, reason: str) -> None:
        self.codec = codec
        self.reason = reason
        super().__init__(f"{codec}: {reason}")


class DecodeFailed(Exception):
    """One chunk could not be decoded (corrupt, or larger than its declared size)."""

    def __init__(self, codec: str, reason: str) -> None:
        self.codec = codec
        self.reason = reason
        super().__init__(f"{codec}: {reason}")


def _too_large(name: str, bound: int) -> DecodeFailed:
    return DecodeFailed(name, f"inflates past the declared chunk size of {bound} bytes")


def zlib_like(name: str, wbits: int) -> Callable[[bytes, int], bytes]:
    def decode(data: bytes, bound: int) -> bytes:
        inflater = zlib.decompressobj(wbits)
        out = inflater.decompress(data, bound + 1)
        if len(out) > bound or inflater.unconsumed_tail:
            raise _too_large(name, bound)
        return out

    return decode


def bz2_decompress(data: bytes, bound: int) -> bytes:
    out = bz2.BZ2Decompressor().decompress(data, max_length=bound + 1)
    if len(out) > bound:
        raise _too_large("bz2", bound)
    return out


def lzma_decompress(data: bytes, bound: int, lzma_format: int, filters: object) -> bytes:
    chain = filters if lzma_format == lzma.FORMAT_RAW else None
    decompressor = lzma.LZMADecompressor(lzma_format, filters=chain)  # type: ignore[arg-type]
    out = decompressor.decompress(data, max_length=bound + 1)
    if len(out) > bound:
        raise _too_large("lzma", bound)
    return out


def zstd_decompress(data: bytes, bound: int) -> bytes:
    declared = zstandard.frame_content_size(data)
    if declared > bound:
        raise _too_large("zstd", bound)
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    parts: list[bytes] = []
    total = 0
    while total <= bound:
        part = reader.read(bound + 1 - total)
        if not part:
            break
        parts.append(part)
        total += len(part)
    if total > bound:
        raise _too_large("zstd", bound)
    return b"".join(parts)


def blosc_decompress(data: bytes, bound: int) -> bytes:
    declared, compressed, _ = numcodecs.blosc._cbuffer_sizes(data)
    if declared > bound:
        raise _too_large("blosc", bound)
    if compressed > len(data):
        raise DecodeFailed("blosc", f"header declares {compressed} bytes, chunk has {len(data)}")
    return bytes(numcodecs.blosc.decompress(data))


def lz4_decompress(data: bytes, bound: int) -> bytes:
    if len(data) < 4:
        raise DecodeFailed("lz4", "shorter than its 4-byte header")
    (declared,) = struct.unpack("<i", data[:4])
    if not 0 <= declared <= bound:
        raise _too_large("lz4", bound)
    return bytes(numcodecs.LZ4().decode(data))


def imagecodecs_module() -> Any:
    try:
        import imagecodecs
    except ImportError as error:  # an optional dependency, like numcodecs
        raise Undecodable("imagecodecs", "imagecodecs is not installed") from error
    return imagecodecs


def headerless(name: str, function: str) -> Callable[[bytes, int], bytes]:
    """Return a bounded decoder for a codec whose stream carries no decoded size."""

    def decode(data: bytes, bound: int) -> bytes:
        decoder = getattr(imagecodecs_module(), function)
        try:
            out = decoder(data, out=bound + 1)
        except Exception as error:
            if "OUTPUT_TOO_SMALL" in str(error):
                raise _too_large(name, bound) from error
            raise
        if len(out) > bound:
            raise _too_large(name, bound)
        return bytes(out)

    return decode


DECOMPRESSORS: Mapping[str, Callable[[bytes, int], bytes]] = {
    "imagecodecs_lzw": headerless("imagecodecs_lzw", "lzw_decode"),
    "imagecodecs_packbits": headerless("imagecodecs_packbits", "packbits_decode"),
    "imagecodecs_zstd": zstd_decompress,
    "zlib": zlib_like("zlib", 15),
    "gzip": zlib_like("gzip", 31),
    "bz2": bz2_decompress,
    "zstd": zstd_decompress,
    "blosc": blosc_decompress,
    "lz4": lz4_decompress,
    "lzma": lambda data, bound: lzma_decompress(data, bound, lzma.FORMAT_AUTO, None),
}
