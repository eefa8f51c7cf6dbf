"""The decoded view: which arrays are decoded, rewritten documents, sizes without fetching."""

from __future__ import annotations

import json
from typing import Any

import pytest

from refmount.decode.view import DecodedReferences, Plan, plan
from refmount.model import ChunkGrid, Inline, Range
from tests.unit.decode.conftest import CACHE, URL, make_set


def test_plan_decodes_an_allowed_array_and_rewrites_its_metadata() -> None:
    references, _ = make_set()
    decisions = plan(references, CACHE)
    assert list(decisions.arrays) == ["x"]
    assert decisions.stored == []
    meta = json.loads(decisions.documents["x/.zarray"])
    assert (meta["dtype"], meta["compressor"], meta["fill_value"]) == ("<f4", None, "NaN")
    assert decisions.documents[".zattrs"].decode() == '{"title": "té", "v": "NaN"}'


@pytest.mark.parametrize(
    ("changes", "codec"),
    [
        ({"compressor": {"id": "pickle"}}, "pickle"),
        ({"filters": [{"id": "vlen-utf8"}], "dtype": "|O"}, "dtype"),
        ({"compressor": {"id": "imagecodecs_jpeg"}}, "imagecodecs_jpeg"),
    ],
)
def test_an_undecodable_array_is_served_as_stored_with_a_warning(
    changes: dict[str, Any], codec: str, caplog: pytest.LogCaptureFixture
) -> None:
    references, _ = make_set(**changes)
    decisions = plan(references, CACHE)
    assert decisions.arrays == {}
    assert [(s.path, s.codec) for s in decisions.stored] == [("x", codec)]
    decisions.warn()
    assert "array 'x' is served as stored" in caplog.text
    assert codec in caplog.text
    view = DecodedReferences(references, decisions)
    assert view.get("x/0.0") == references.get("x/0.0")
    served = json.loads(view.get("x/.zarray").data)  # type: ignore[union-attr]
    assert served["compressor"] == json.loads(references.explicit["x/.zarray"].data)["compressor"]  # type: ignore[union-attr]


def test_huge_declared_chunks_are_served_as_stored() -> None:
    references, _ = make_set(chunks=[2**40, 6], shape=[2**40, 6])
    decisions = plan(references, CACHE)
    assert decisions.arrays == {}
    assert "over a quarter of the cache" in decisions.stored[0].reason


def test_sizes_are_known_without_fetching() -> None:
    references, target = make_set()
    decisions = plan(references, CACHE)
    view = DecodedReferences(references, decisions)
    lengths = view.known_lengths("x/", [b".zarray", b"0.0", b"1.0", b"2.0"])
    assert lengths[1:] == [48, 48, None]
    assert lengths[0] == len(decisions.documents["x/.zarray"])
    assert target.ranges == []
    assert target.sizes == []


def test_grid_chunk_sizes_are_decoded_sizes() -> None:
    references, _ = make_set()
    references.grid_list = [ChunkGrid("x", (2, 1), ".")]
    references.chunks = {0: {0: Range(URL, 0, 10)}}
    view = DecodedReferences(references, plan(references, CACHE))
    assert view.chunk_sizes(0, 0, 2) == [48, -1]


def test_chunk_keys_are_matched_to_their_array_only() -> None:
    references, _ = make_set(dimension_separator="/")
    decisions: Plan = plan(references, CACHE)
    assert decisions.chunk_array("x/1/0") is decisions.arrays["x"]
    assert decisions.chunk_array("x/2/0") is None
    assert decisions.chunk_array("x/.zattrs") is None
    assert decisions.chunk_array("x/1.0") is None
    assert decisions.chunk_array("y/1/0") is None


def test_consolidated_metadata_is_rewritten_like_the_documents() -> None:
    references, _ = make_set()
    zarray_text = references.explicit["x/.zarray"].data.decode()  # type: ignore[union-attr]
    consolidated = {
        "zarr_consolidated_format": 1,
        "metadata": {
            ".zgroup": {"zarr_format": 2},
            "x/.zarray": json.loads(zarray_text),
            "x/.zattrs": {"scale": float("inf")},
        },
    }
    references.explicit[".zmetadata"] = Inline(json.dumps(consolidated).encode())
    decisions = plan(references, CACHE)
    served = json.loads(decisions.documents[".zmetadata"])["metadata"]
    assert served["x/.zarray"] == json.loads(decisions.documents["x/.zarray"])
    assert served["x/.zattrs"] == {"scale": "Infinity"}


def test_an_array_known_only_from_consolidated_metadata_is_decoded() -> None:
    references, _ = make_set()
    zarray_doc = json.loads(references.explicit.pop("x/.zarray").data)  # type: ignore[union-attr]
    references.explicit[".zmetadata"] = Inline(
        json.dumps({"metadata": {"x/.zarray": json.dumps(zarray_doc)}}).encode()
    )
    decisions = plan(references, CACHE)
    assert list(decisions.arrays) == ["x"]
    served = json.loads(json.loads(decisions.documents[".zmetadata"])["metadata"]["x/.zarray"])
    assert served["compressor"] is None


def test_metadata_in_a_target_is_served_as_stored_with_a_warning() -> None:
    references, _ = make_set()
    references.explicit["x/.zarray"] = Range(URL, 0, 10)
    decisions = plan(references, CACHE)
    assert decisions.arrays == {}
    assert [(s.path, s.codec) for s in decisions.stored] == [("x", "metadata")]
    assert DecodedReferences(references, decisions).get("x/.zarray") == Range(URL, 0, 10)


def test_chunk_now_finds_explicit_and_loaded_grid_chunks() -> None:
    references, _ = make_set()
    decisions = plan(references, CACHE)
    array = decisions.arrays["x"]
    view = DecodedReferences(references, decisions)
    assert view.chunk_now(array, 1) == ("x/1.0", references.get("x/1.0"))
    del references.explicit["x/1.0"]
    assert view.chunk_now(array, 1) is None
    references.grid_list = [ChunkGrid("x", (2, 1), ".")]
    references.chunks = {0: {1: Range(URL, 5, 7)}}
    view = DecodedReferences(references, decisions)
    assert view.chunk_now(array, 1) == ("x/1.0", Range(URL, 5, 7))
    references.loaded = False
    assert view.chunk_now(array, 1) is None


def test_decodes_v3_answers_as_the_plan_decides() -> None:
    from refmount.decode.view import decodes_v3

    def v3(codecs: list[dict[str, Any]], chunks: list[int]) -> dict[str, Any]:
        return {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [4, 4, 4],
            "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            "fill_value": 0,
            "codecs": codecs,
        }

    twisted: list[dict[str, Any]] = [
        {"name": "transpose", "configuration": {"order": [2, 0, 1]}},
        {"name": "bytes"},
    ]
    sharded = [{"name": "sharding_indexed", "configuration": {"chunk_shape": [1, 1, 1]}}]
    assert decodes_v3(v3(twisted, [2, 2, 2]), CACHE)
    assert not decodes_v3(v3(sharded, [2, 2, 2]), CACHE)
    assert not decodes_v3(v3(twisted, [2**20, 2**10, 4]), CACHE)  # over a quarter of the cache
