"""Chunks encoded with numcodecs decode to the expected array; hostile chunks never inflate."""

from __future__ import annotations

import pickle
import types
import zlib
from typing import Any

import numcodecs
import numpy as np
import pytest

from refmount.decode import codecs
from refmount.decode.codecs import available_filters, v2_pipeline, v3_pipeline
from refmount.decode.decompress import DecodeFailed, Undecodable

CHUNKS = (6, 10)
VALUES = np.linspace(-5, 5, 60).reshape(CHUNKS)


def zarray(
    dtype: str, compressor: Any = None, filters: Any = None, order: str = "C"
) -> dict[str, Any]:
    return {
        "zarr_format": 2,
        "shape": [12, 10],
        "chunks": list(CHUNKS),
        "dtype": dtype,
        "compressor": compressor,
        "filters": filters,
        "order": order,
        "fill_value": None,
    }


def encode(values: np.ndarray[Any, Any], *codecs: numcodecs.abc.Codec) -> bytes:
    """Encode as zarr v2 does: filters in order, then the compressor."""
    data: Any = values
    for codec in codecs:
        data = codec.encode(data)
    return np.ascontiguousarray(data).tobytes()


COMPRESSORS = [
    numcodecs.Zlib(level=5),
    numcodecs.GZip(level=5),
    numcodecs.BZ2(),
    numcodecs.LZMA(),
    numcodecs.Zstd(),
    numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
    numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE),
    numcodecs.LZ4(),
]


@pytest.mark.parametrize("compressor", COMPRESSORS, ids=lambda c: c.codec_id)
def test_each_compressor_decodes_to_the_array(compressor: numcodecs.abc.Codec) -> None:
    values = VALUES.astype("<f8")
    pipeline = v2_pipeline(zarray("<f8", compressor.get_config()))
    assert pipeline.decode(encode(values, compressor)) == values.tobytes()


FILTERS: list[tuple[str, list[numcodecs.abc.Codec], np.ndarray[Any, Any]]] = [
    ("shuffle", [numcodecs.Shuffle(elementsize=8)], VALUES.astype("<f8")),
    ("delta", [numcodecs.Delta(dtype="<i4")], np.arange(60, dtype="<i4").reshape(CHUNKS)),
    (
        "fixedscaleoffset",
        [numcodecs.FixedScaleOffset(offset=0, scale=10, dtype="<f8", astype="<i2")],
        np.round(VALUES, 1).astype("<f8"),
    ),
    ("quantize", [numcodecs.Quantize(digits=2, dtype="<f8")], VALUES.astype("<f8")),
    ("packbits", [numcodecs.PackBits()], (np.arange(60) % 3 == 0).reshape(CHUNKS)),
    ("astype", [numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")], VALUES.astype("<f8")),
    ("bitround", [numcodecs.BitRound(keepbits=10)], VALUES.astype("<f4")),
    ("fletcher32", [numcodecs.Fletcher32()], VALUES.astype("<f8")),
    ("crc32", [numcodecs.CRC32()], VALUES.astype("<f8")),
]


@pytest.mark.parametrize(("name", "filters", "values"), FILTERS, ids=[f[0] for f in FILTERS])
def test_each_filter_decodes_as_numcodecs_does(
    name: str, filters: list[numcodecs.abc.Codec], values: np.ndarray[Any, Any]
) -> None:
    compressor = numcodecs.Zlib()
    configs = [f.get_config() for f in filters]
    pipeline = v2_pipeline(zarray(values.dtype.str, compressor.get_config(), configs))
    expected = values
    for codec in filters:
        expected = codec.decode(codec.encode(expected))
    decoded = pipeline.decode(encode(values, *filters, compressor))
    assert decoded == np.ascontiguousarray(expected).reshape(-1).view(np.uint8).tobytes()


def test_big_endian_becomes_little_endian() -> None:
    values = VALUES.astype(">f4")
    pipeline = v2_pipeline(zarray(">f4", numcodecs.Zlib().get_config()))
    decoded = np.frombuffer(pipeline.decode(encode(values, numcodecs.Zlib())), "<f4")
    np.testing.assert_array_equal(decoded.reshape(CHUNKS), VALUES.astype("<f4"))


def test_fortran_order_becomes_c_order() -> None:
    values = VALUES.astype("<i8")
    stored = np.asfortranarray(values).tobytes(order="F")
    decoded = v2_pipeline(zarray("<i8", order="F")).decode(stored)
    assert decoded == values.tobytes()


def test_v3_bytes_big_endian_transpose_and_gzip() -> None:
    values = VALUES.astype(">f8")
    meta = {
        "node_type": "array",
        "data_type": "float64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(CHUNKS)}},
        "codecs": [
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            {"name": "bytes", "configuration": {"endian": "big"}},
            {"name": "gzip", "configuration": {"level": 5}},
        ],
    }
    gzipped = numcodecs.GZip().encode(values.transpose(1, 0).tobytes())
    assert v3_pipeline(meta).decode(bytes(gzipped)) == VALUES.astype("<f8").tobytes()


@pytest.mark.parametrize("codec", ["pickle", "json2", "vlen-utf8", "categorize", "base64", "x"])
def test_a_codec_off_the_list_is_never_decoded(codec: str) -> None:
    with pytest.raises(Undecodable) as refused:
        v2_pipeline(zarray("<f8", {"id": codec}))
    assert refused.value.codec == codec


def test_a_pickle_filter_is_refused_before_any_chunk_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing is looked up in the registry: pickle.loads is never reached."""
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("pickle.loads was called"))
    with pytest.raises(Undecodable):
        v2_pipeline(zarray("<f8", None, [{"id": "pickle", "protocol": 5}]))


@pytest.mark.parametrize("dtype", ["|O", [["a", "<f4"]], "<U0"])
def test_object_and_structured_dtypes_are_served_as_stored(dtype: Any) -> None:
    with pytest.raises(Undecodable):
        v2_pipeline(zarray(dtype))


def test_v3_sharding_is_served_as_stored() -> None:
    meta = {
        "node_type": "array",
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "codecs": [{"name": "sharding_indexed", "configuration": {}}],
    }
    with pytest.raises(Undecodable, match="sharded"):
        v3_pipeline(meta)


def test_a_filter_numcodecs_lacks_is_named_with_what_brings_it() -> None:
    """numcodecs builds CRC32C only when google-crc32c is installed."""
    without_crc32c = types.SimpleNamespace(Shuffle=numcodecs.Shuffle)
    present, missing = available_filters(without_crc32c, {"shuffle": "Shuffle", "crc32c": "CRC32C"})
    assert present == {"shuffle": numcodecs.Shuffle}
    assert missing == {"crc32c": codecs.OPTIONAL_FILTERS["crc32c"]}
    assert "pip install google-crc32c" in missing["crc32c"]


def test_an_array_that_needs_a_missing_filter_is_served_as_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the arrays that need the absent codec are affected, and the reason says why."""
    present, missing = available_filters(types.SimpleNamespace(Shuffle=numcodecs.Shuffle))
    monkeypatch.setattr(codecs, "FILTERS", present)
    monkeypatch.setattr(codecs, "MISSING_FILTERS", missing)
    meta = {
        "node_type": "array",
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, "crc32c"],
    }
    with pytest.raises(Undecodable, match="google-crc32c") as refused:
        v3_pipeline(meta)
    assert refused.value.codec == "crc32c"
    shuffled = v2_pipeline(zarray("<i4", None, [{"id": "shuffle", "elementsize": 4}]))
    values = VALUES.astype("<i4")
    assert shuffled.decode(encode(values, numcodecs.Shuffle(elementsize=4))) == values.tobytes()


# A chunk that inflates past its declared size: 8 MiB of zeros in a few KiB.
BOMB = b"\0" * (8 * 1024 * 1024)


@pytest.mark.parametrize(
    "compressor",
    [
        numcodecs.Zlib(),
        numcodecs.GZip(),
        numcodecs.BZ2(),
        numcodecs.LZMA(),
        numcodecs.Zstd(),
        numcodecs.Blosc(),
        numcodecs.LZ4(),
    ],
    ids=lambda c: c.codec_id,
)
def test_a_chunk_that_inflates_past_its_size_fails(compressor: numcodecs.abc.Codec) -> None:
    pipeline = v2_pipeline(zarray("<f8", compressor.get_config()))
    with pytest.raises(DecodeFailed, match="inflates past"):
        pipeline.decode(bytes(compressor.encode(BOMB)))


def test_a_short_chunk_fails_with_both_sizes() -> None:
    pipeline = v2_pipeline(zarray("<f8", numcodecs.Zlib().get_config()))
    with pytest.raises(DecodeFailed, match="decoded to 8 bytes, expected 480"):
        pipeline.decode(zlib.compress(b"\0" * 8))


def test_a_corrupt_chunk_names_the_codec() -> None:
    pipeline = v2_pipeline(zarray("<f8", numcodecs.Zlib().get_config()))
    with pytest.raises(DecodeFailed) as failed:
        pipeline.decode(b"not zlib at all")
    assert failed.value.codec == "zlib"


def test_a_compressor_among_the_filters_is_decoded_and_bounded() -> None:
    """kerchunk's HDF5 scanner writes deflate as a filter: ``filters: [shuffle, zlib]``."""
    values = VALUES.astype("<f8")
    filters = [numcodecs.Shuffle(elementsize=8), numcodecs.Zlib()]
    pipeline = v2_pipeline(zarray("<f8", None, [f.get_config() for f in filters]))
    assert pipeline.decode(encode(values, *filters)) == values.tobytes()
    with pytest.raises(DecodeFailed, match="inflates past"):
        pipeline.decode(zlib.compress(BOMB))


# The codecs tifffile's references name for TIFF tiles (kerchunk's tiff_to_zarr).
TIFF_TILE = ((np.arange(60, dtype="<u2") * 977) % 4099).reshape(CHUNKS).astype("<u2")


def tiff_encoders() -> dict[str, Any]:
    imagecodecs = pytest.importorskip("imagecodecs")
    return {
        "imagecodecs_lzw": imagecodecs.lzw_encode,
        "imagecodecs_packbits": imagecodecs.packbits_encode,
        "imagecodecs_zstd": imagecodecs.zstd_encode,
    }


@pytest.mark.parametrize("name", ["imagecodecs_lzw", "imagecodecs_packbits", "imagecodecs_zstd"])
def test_each_tiff_compressor_decodes_to_the_tile(name: str) -> None:
    packed = bytes(tiff_encoders()[name](TIFF_TILE.tobytes()))
    assert v2_pipeline(zarray("<u2", {"id": name})).decode(packed) == TIFF_TILE.tobytes()


def test_the_horizontal_predictor_with_lzw_decodes_to_the_tile() -> None:
    imagecodecs = pytest.importorskip("imagecodecs")
    delta = {"id": "imagecodecs_delta", "axis": -1, "dist": 1, "dtype": "<u2", "shape": CHUNKS}
    packed = imagecodecs.lzw_encode(imagecodecs.delta_encode(TIFF_TILE, axis=-1).tobytes())
    pipeline = v2_pipeline(zarray("<u2", {"id": "imagecodecs_lzw"}, [delta]))
    assert pipeline.decode(bytes(packed)) == TIFF_TILE.tobytes()


@pytest.mark.parametrize("name", ["imagecodecs_lzw", "imagecodecs_packbits", "imagecodecs_zstd"])
def test_a_tiff_chunk_that_decodes_past_its_size_fails(name: str) -> None:
    encoders = tiff_encoders()
    # PackBits runs of 128 zeros (imagecodecs' encoder is slow on 8 MiB)
    bomb = b"\x81\x00" * (len(BOMB) // 128) if name == "imagecodecs_packbits" else None
    packed = bomb or bytes(encoders[name](BOMB))
    with pytest.raises(DecodeFailed, match="inflates past"):
        v2_pipeline(zarray("<u2", {"id": name})).decode(packed)


@pytest.mark.parametrize("name", ["imagecodecs_lzw", "imagecodecs_packbits", "imagecodecs_zstd"])
def test_a_tiff_chunk_that_decodes_short_fails(name: str) -> None:
    packed = bytes(tiff_encoders()[name](b"\1" * 8))
    with pytest.raises(DecodeFailed, match="decoded to 8 bytes, expected 120"):
        v2_pipeline(zarray("<u2", {"id": name})).decode(packed)


def test_a_predictor_on_a_chunk_of_the_wrong_size_fails() -> None:
    pytest.importorskip("imagecodecs")
    delta = {"id": "imagecodecs_delta", "axis": -1, "dist": 1, "dtype": "<u2", "shape": CHUNKS}
    with pytest.raises(DecodeFailed, match="not of shape"):
        v2_pipeline(zarray("<u2", None, [delta])).decode(b"\0" * 8)


@pytest.mark.parametrize(
    "config",
    [
        {"id": "imagecodecs_jpeg"},
        {"id": "imagecodecs_delta", "axis": -1, "dist": 2, "dtype": "<u2", "shape": [6, 10]},
        {"id": "imagecodecs_delta", "axis": -1, "dist": 1, "dtype": "<f4", "shape": [6, 10]},
        {"id": "imagecodecs_delta", "dtype": "<u2"},
    ],
    ids=["jpeg", "dist-2", "float", "no-shape"],
)
def test_other_tiff_codecs_are_served_as_stored(config: dict[str, Any]) -> None:
    pytest.importorskip("imagecodecs")
    with pytest.raises(Undecodable):
        v2_pipeline(zarray("<u2", None, [config]))
