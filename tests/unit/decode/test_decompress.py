"""Tests of the bounded decompressors: each returns what fits the declared size and refuses,
before allocating it, what would not."""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib

import numcodecs
import pytest
import zstandard

from refmount.decode.decompress import DECOMPRESSORS, DecodeFailed

PAYLOAD = bytes(range(256)) * 64  # 16 KiB
ENCODED = {
    "zlib": zlib.compress(PAYLOAD),
    "gzip": numcodecs.GZip().encode(PAYLOAD),
    "bz2": bz2.compress(PAYLOAD),
    "lzma": lzma.compress(PAYLOAD),
    "zstd": zstandard.ZstdCompressor().compress(PAYLOAD),
    "blosc": numcodecs.Blosc().encode(PAYLOAD),
    "lz4": numcodecs.LZ4().encode(PAYLOAD),
}


@pytest.mark.parametrize("name", sorted(ENCODED))
def test_a_chunk_of_its_declared_size_decodes(name: str) -> None:
    assert bytes(DECOMPRESSORS[name](ENCODED[name], len(PAYLOAD))) == PAYLOAD


@pytest.mark.parametrize("name", sorted(ENCODED))
def test_a_chunk_larger_than_declared_is_refused(name: str) -> None:
    with pytest.raises(DecodeFailed) as refused:
        DECOMPRESSORS[name](ENCODED[name], len(PAYLOAD) - 1)
    assert refused.value.codec == name


def test_an_lz4_header_claiming_more_than_the_bound_is_refused_before_decoding() -> None:
    lying = struct.pack("<i", 2**30) + ENCODED["lz4"][4:]
    with pytest.raises(DecodeFailed, match="inflates past"):
        DECOMPRESSORS["lz4"](lying, len(PAYLOAD))
    with pytest.raises(DecodeFailed, match="4-byte header"):
        DECOMPRESSORS["lz4"](b"\x01", len(PAYLOAD))
