"""Metadata as a decoded mount serves it: strict UTF-8 JSON, arrays without codecs."""

from __future__ import annotations

import json
from typing import Any

from refmount.decode.metadata import (
    consolidated,
    decoded_zarr_json,
    decoded_zarray,
    dumps,
    little_endian,
)


def strict_loads(data: bytes) -> Any:
    """Parse JSON refusing the NaN/Infinity literals Python's json otherwise accepts."""

    def refuse(literal: str) -> None:
        raise ValueError(f"{literal} is not JSON")

    return json.loads(data.decode("utf-8"), parse_constant=refuse)


def test_non_finite_floats_become_their_spec_strings() -> None:
    document = {"fill_value": float("nan"), "a": [float("inf"), -float("inf"), 1.5]}
    assert strict_loads(dumps(document)) == {
        "fill_value": "NaN",
        "a": ["Infinity", "-Infinity", 1.5],
    }


def test_non_ascii_is_utf8_and_control_characters_stay_escaped() -> None:
    data = dumps({"title": "température\n"})
    assert "température".encode() in data
    assert b"\\n" in data
    assert b"\\u" not in data


def test_dtypes_become_little_endian_or_byte_order_free() -> None:
    assert little_endian(">f4") == "<f4"
    assert little_endian("<i8") == "<i8"
    assert little_endian(">u1") == "|u1"
    assert little_endian("|b1") == "|b1"
    assert little_endian(">S5") == "|S5"
    assert little_endian(">M8[ns]") == "<M8[ns]"


def test_zarray_loses_its_codecs_and_keeps_the_rest() -> None:
    meta = {
        "zarr_format": 2,
        "shape": [4],
        "chunks": [2],
        "dtype": ">f8",
        "compressor": {"id": "zlib", "level": 4},
        "filters": [{"id": "shuffle", "elementsize": 8}],
        "order": "F",
        "fill_value": float("nan"),
        "dimension_separator": "/",
    }
    decoded = strict_loads(dumps(decoded_zarray(meta)))
    assert decoded == {
        "zarr_format": 2,
        "shape": [4],
        "chunks": [2],
        "dtype": "<f8",
        "compressor": None,
        "filters": None,
        "order": "C",
        "fill_value": "NaN",
        "dimension_separator": "/",
    }


def test_zarr_json_codecs_become_bytes_little_endian() -> None:
    meta = {
        "node_type": "array",
        "data_type": "float32",
        "codecs": [{"name": "transpose"}, {"name": "bytes"}, {"name": "zstd"}],
        "fill_value": "NaN",
    }
    decoded = decoded_zarr_json(meta)
    assert decoded["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
    assert decoded["fill_value"] == "NaN"


def test_consolidated_entries_are_rewritten_objects_or_text() -> None:
    seen: list[str] = []

    def rewrite(key: str, document: Any) -> Any:
        seen.append(key)
        return {"rewritten": key}

    document = {
        "zarr_consolidated_format": 1,
        "metadata": {"x/.zarray": {"a": 1}, "y/.zattrs": '{"b": NaN}'},
        "record_size": 10,
    }
    out = consolidated(document, rewrite, "g/")
    assert out["metadata"]["x/.zarray"] == {"rewritten": "g/x/.zarray"}
    assert json.loads(out["metadata"]["y/.zattrs"]) == {"rewritten": "g/y/.zattrs"}
    assert out["record_size"] == 10
    assert seen == ["g/x/.zarray", "g/y/.zattrs"]


def test_v3_consolidated_metadata_is_rewritten_by_node_path() -> None:
    document = {
        "node_type": "group",
        "consolidated_metadata": {"kind": "inline", "metadata": {"a/b": {"node_type": "array"}}},
    }
    out = consolidated(document, lambda key, value: key, "")
    assert out["consolidated_metadata"]["metadata"] == {"a/b": "a/b/zarr.json"}
    assert out["consolidated_metadata"]["kind"] == "inline"
