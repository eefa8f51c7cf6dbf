"""The translation of a v3 ``zarr.json`` into v2 documents: every codec mapping, data types
and byte order, fill values, transpose, dimension names, and what has no v2 form."""

from __future__ import annotations

import math
from typing import Any

import pytest

from refmount.zarr2.metadata import (
    NotViewable,
    array_documents,
    decoded_array_documents,
    fill_value,
    group_documents,
)


def array(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [20, 30],
        "data_type": "float64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [10, 15]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {"units": "K"},
    }
    document.update(changes)
    return document


def with_codecs(*codecs: Any, **changes: Any) -> dict[str, Any]:
    return array(codecs=list(codecs), **changes)


LITTLE = {"name": "bytes", "configuration": {"endian": "little"}}
BIG = {"name": "bytes", "configuration": {"endian": "big"}}


def test_a_plain_array_becomes_zarray_and_zattrs() -> None:
    zarray, zattrs = array_documents(array())
    assert zarray == {
        "zarr_format": 2,
        "shape": [20, 30],
        "chunks": [10, 15],
        "dtype": "<f8",
        "compressor": None,
        "fill_value": 0.0,
        "order": "C",
        "filters": None,
        "dimension_separator": ".",
    }
    assert zattrs == {"units": "K"}


def test_a_group_becomes_zgroup_and_zattrs() -> None:
    group = {"zarr_format": 3, "node_type": "group", "attributes": {"title": "t"}}
    assert group_documents(group) == ({"zarr_format": 2}, {"title": "t"})
    assert group_documents({"zarr_format": 3, "node_type": "group"}) == ({"zarr_format": 2}, {})


@pytest.mark.parametrize(
    ("data_type", "endian", "dtype"),
    [
        ("bool", None, "|b1"),
        ("int8", None, "|i1"),
        ("uint8", "little", "|u1"),
        ("int16", "big", ">i2"),
        ("uint32", "little", "<u4"),
        ("int64", "big", ">i8"),
        ("uint64", "little", "<u8"),
        ("float16", "little", "<f2"),
        ("float32", "big", ">f4"),
        ("complex64", "little", "<c8"),
        ("complex128", "big", ">c16"),
    ],
)
def test_the_dtype_takes_its_byte_order_from_the_bytes_codec(
    data_type: str, endian: str | None, dtype: str
) -> None:
    serializer: dict[str, Any] = {"name": "bytes"}
    if endian is not None:
        serializer["configuration"] = {"endian": endian}
    fill: Any = [0.0, 0.0] if data_type.startswith("complex") else 0
    if data_type == "bool":
        fill = False
    zarray, _ = array_documents(with_codecs(serializer, data_type=data_type, fill_value=fill))
    assert zarray["dtype"] == dtype


def test_a_multibyte_type_needs_an_endian() -> None:
    with pytest.raises(NotViewable, match="endian"):
        array_documents(with_codecs({"name": "bytes"}))


@pytest.mark.parametrize(
    ("codecs", "filters", "compressor"),
    [
        (
            [LITTLE, {"name": "gzip", "configuration": {"level": 5}}],
            None,
            {"id": "gzip", "level": 5},
        ),
        (
            [LITTLE, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
            None,
            {"id": "zstd", "level": 3},
        ),
        (
            [LITTLE, {"name": "zstd", "configuration": {"level": 0, "checksum": True}}],
            None,
            {"id": "zstd", "level": 0, "checksum": True},
        ),
        (
            [
                LITTLE,
                {
                    "name": "blosc",
                    "configuration": {
                        "cname": "zstd",
                        "clevel": 3,
                        "shuffle": "bitshuffle",
                        "typesize": 8,
                        "blocksize": 0,
                    },
                },
            ],
            None,
            {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0},
        ),
        ([LITTLE, {"name": "crc32c"}], None, {"id": "crc32c", "location": "end"}),
        (
            [LITTLE, {"name": "zlib", "configuration": {"level": 9}}],
            None,
            {"id": "zlib", "level": 9},
        ),
        (
            [LITTLE, {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}],
            None,
            {"id": "lz4", "acceleration": 1},
        ),
        (
            [LITTLE, {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}],
            [{"id": "gzip", "level": 1}],
            {"id": "crc32c", "location": "end"},
        ),
        (
            [
                {"name": "numcodecs.delta", "configuration": {"dtype": "<f8"}},
                LITTLE,
                {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
                {"name": "zstd", "configuration": {"level": 1}},
            ],
            [{"id": "delta", "dtype": "<f8"}, {"id": "shuffle", "elementsize": 8}],
            {"id": "zstd", "level": 1},
        ),
    ],
)
def test_codecs_after_bytes_become_filters_then_the_compressor(
    codecs: list[Any], filters: Any, compressor: Any
) -> None:
    zarray, _ = array_documents(with_codecs(*codecs))
    assert zarray["filters"] == filters
    assert zarray["compressor"] == compressor


@pytest.mark.parametrize(
    ("shuffle", "number"), [("noshuffle", 0), ("shuffle", 1), ("bitshuffle", 2)]
)
def test_blosc_shuffle_names_are_numbers(shuffle: str, number: int) -> None:
    blosc = {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": shuffle}}
    zarray, _ = array_documents(with_codecs(LITTLE, blosc))
    assert zarray["compressor"]["shuffle"] == number


def test_a_reversing_transpose_is_order_f_and_the_identity_c() -> None:
    reverse = {"name": "transpose", "configuration": {"order": [1, 0]}}
    identity = {"name": "transpose", "configuration": {"order": [0, 1]}}
    assert array_documents(with_codecs(reverse, LITTLE))[0]["order"] == "F"
    assert array_documents(with_codecs(identity, LITTLE))[0]["order"] == "C"


@pytest.mark.parametrize(
    ("document", "codec"),
    [
        (
            with_codecs(
                {"name": "transpose", "configuration": {"order": [2, 0, 1]}},
                LITTLE,
                shape=[2, 3, 4],
                chunk_grid={"name": "regular", "configuration": {"chunk_shape": [1, 3, 4]}},
            ),
            "transpose",
        ),
        (
            with_codecs(
                {"name": "sharding_indexed", "configuration": {"chunk_shape": [5, 5]}},
            ),
            "sharding_indexed",
        ),
        (with_codecs({"name": "vlen-utf8"}, data_type="string", fill_value=""), "data_type"),
        (with_codecs({"name": "vlen-bytes"}), "vlen-bytes"),
        (with_codecs({"name": "numcodecs.zfpy"}), "numcodecs.zfpy"),
        (with_codecs(LITTLE, {"name": "mystery"}), "mystery"),
        (with_codecs({"name": "mystery"}, LITTLE), "mystery"),
        (with_codecs(LITTLE, data_type="r16"), "data_type"),
        (with_codecs(LITTLE, storage_transformers=[{"name": "x"}]), "storage_transformers"),
        (
            with_codecs(LITTLE, chunk_grid={"name": "rectilinear", "configuration": {}}),
            "chunk_grid",
        ),
        (
            with_codecs(
                {"name": "numcodecs.delta", "configuration": {"dtype": ">i4"}},
                BIG,
                data_type="int32",
                fill_value=0,
            ),
            "numcodecs.delta",
        ),
        (
            with_codecs(
                LITTLE, {"name": "blosc", "configuration": {"cname": "lz4", "shuffle": "x"}}
            ),
            "blosc",
        ),
    ],
)
def test_what_has_no_v2_form_is_refused_with_its_reason(
    document: dict[str, Any], codec: str
) -> None:
    with pytest.raises(NotViewable) as refused:
        array_documents(document)
    assert refused.value.codec == codec
    assert refused.value.reason


def test_a_transpose_after_a_filter_is_refused() -> None:
    document = with_codecs(
        {"name": "numcodecs.delta", "configuration": {"dtype": "<f8"}},
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        LITTLE,
    )
    with pytest.raises(NotViewable, match="before every filter"):
        array_documents(document)


@pytest.mark.parametrize(
    ("value", "kind", "itemsize", "expected"),
    [
        ("NaN", "f", 8, "NaN"),
        ("Infinity", "f", 4, "Infinity"),
        ("-Infinity", "f", 2, "-Infinity"),
        ("0x7fc00000", "f", 4, "NaN"),
        ("0x3ff0000000000000", "f", 8, 1.0),
        ("0x3c00", "f", 2, 1.0),
        ("0xff800000", "f", 4, "-Infinity"),
        (float("inf"), "f", 8, "Infinity"),
        (1.5, "f", 8, 1.5),
        (3, "f", 8, 3),
        (-7, "i", 4, -7),
        (2**64 - 1, "u", 8, 2**64 - 1),
        (True, "b", 1, True),
        ([1.0, "NaN"], "c", 16, [1.0, "NaN"]),
        (["0x3f800000", -2.0], "c", 8, [1.0, -2.0]),
        (None, "f", 8, None),
    ],
)
def test_fill_values_are_written_as_v2_writes_them(
    value: Any, kind: str, itemsize: int, expected: Any
) -> None:
    assert fill_value(value, kind, itemsize) == expected


@pytest.mark.parametrize(
    ("value", "kind", "itemsize"),
    [
        ("0x123", "f", 8),
        ("nan", "f", 4),
        (1.5, "i", 4),
        (1, "b", 1),
        ([1.0], "c", 16),
        (True, "i", 4),
    ],
)
def test_malformed_fill_values_are_refused(value: Any, kind: str, itemsize: int) -> None:
    with pytest.raises(NotViewable):
        fill_value(value, kind, itemsize)


def test_a_hex_fill_value_is_read_as_the_float_it_spells() -> None:
    assert math.isclose(float(fill_value("0x40490fdb", "f", 4)), 3.1415927, rel_tol=1e-7)


def test_dimension_names_become_array_dimensions_when_every_name_is_set() -> None:
    _, zattrs = array_documents(array(dimension_names=["y", "x"]))
    assert zattrs == {"units": "K", "_ARRAY_DIMENSIONS": ["y", "x"]}
    _, partial = array_documents(array(dimension_names=["y", None]))
    assert "_ARRAY_DIMENSIONS" not in partial
    _, given = array_documents(
        array(dimension_names=["y", "x"], attributes={"_ARRAY_DIMENSIONS": ["a", "b"]})
    )
    assert given["_ARRAY_DIMENSIONS"] == ["a", "b"]


def test_a_scalar_has_no_dimensions_and_no_chunk_shape() -> None:
    zarray, zattrs = array_documents(
        array(
            shape=[],
            chunk_grid={"name": "regular", "configuration": {"chunk_shape": []}},
            dimension_names=[],
        )
    )
    assert (zarray["shape"], zarray["chunks"]) == ([], [])
    assert zattrs["_ARRAY_DIMENSIONS"] == []


def test_the_decoded_form_has_no_codecs_and_is_little_endian() -> None:
    document = with_codecs(
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        BIG,
        {"name": "mystery"},
        data_type="int16",
        fill_value=-1,
        dimension_names=["y", "x"],
    )
    zarray, zattrs = decoded_array_documents(document)
    assert (zarray["dtype"], zarray["order"]) == ("<i2", "C")
    assert (zarray["compressor"], zarray["filters"], zarray["fill_value"]) == (None, None, -1)
    assert zattrs["_ARRAY_DIMENSIONS"] == ["y", "x"]
    with pytest.raises(NotViewable):
        decoded_array_documents(with_codecs(LITTLE, data_type="string"))


@pytest.mark.parametrize(
    ("data_type", "fill", "attribute", "expected"),
    [
        ("float32", 0.0, "AAAAAAA4j8A=", -999.0),
        ("float64", 0.0, "AAAAAAAA+H8=", "NaN"),
        ("complex128", [0.0, 0.0], ["AAAAAAAA8D8=", "AAAAAAAAAAA="], [1.0, 0.0]),
        ("float32", 0.0, "not base64!!", "not base64!!"),
        ("float32", 0.0, -1.5, -1.5),
        ("int32", 0, "AAAAAAA4j8A=", "AAAAAAA4j8A="),
    ],
)
def test_xarrays_v3_fill_value_attribute_is_written_as_v2_has_it(
    data_type: str, fill: Any, attribute: Any, expected: Any
) -> None:
    document = array(data_type=data_type, fill_value=fill, attributes={"_FillValue": attribute})
    assert array_documents(document)[1]["_FillValue"] == expected
