"""The zarr v2 view of a reference set: what the plan serves, renamed chunk keys both ways,
sizes, grids, consolidated metadata, arrays served as stored, and the ReferenceSet methods."""

from __future__ import annotations

import json
from typing import Any

import pytest

from refmount.model import ChunkGrid, Inline, Range
from refmount.namespace.tree import Tree
from refmount.zarr2.view import Zarr2References, plan, zarr2_view
from tests.fakes import DictReferences

URL = "memory://data.bin"


def node(document: dict[str, Any]) -> Inline:
    return Inline(json.dumps(document).encode())


def v3_array(shape: list[int], chunks: list[int], **changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {"long_name": "température"},
        "dimension_names": ["y", "x"][: len(shape)],
    }
    document.update(changes)
    return document


GROUP = {"zarr_format": 3, "node_type": "group", "attributes": {"title": "t", "v": float("nan")}}
SHARDED = [{"name": "sharding_indexed", "configuration": {"chunk_shape": [1, 1]}}]


def json_set() -> DictReferences:
    """A kerchunk JSON set of v3 nodes: a group, a 2x2-chunk array with explicit chunk keys
    (one unwritten), a 0-d array, a sharded array and a v2 array beside them."""
    return DictReferences(
        {
            "zarr.json": node(GROUP),
            "g/zarr.json": node({"zarr_format": 3, "node_type": "group"}),
            "g/temp/zarr.json": node(v3_array([4, 6], [2, 3])),
            "g/temp/c/0/0": Range(URL, 0, 24),
            "g/temp/c/0/1": Range(URL, 24, 24),
            "g/temp/c/1/1": Inline(b"x" * 24),
            "s/zarr.json": node(v3_array([], [])),
            "s/c": Inline(b"abcd"),
            "sharded/zarr.json": node(v3_array([2, 2], [2, 2], codecs=SHARDED)),
            "sharded/c/0/0": Range(URL, 100, 40),
            "old/.zarray": Inline(b'{"zarr_format": 2, "shape": [2], "chunks": [2]}'),
            "old/0": Range(URL, 200, 8),
        }
    )


def test_groups_and_arrays_are_served_as_v2_documents() -> None:
    view = zarr2_view(json_set())
    served = set(view.keys())
    assert {".zgroup", ".zattrs", "g/.zgroup", "g/temp/.zarray", "g/temp/.zattrs"} <= served
    assert {"s/.zarray", "s/0", "g/temp/0.0", "g/temp/0.1", "g/temp/1.1"} <= served
    assert not {"zarr.json", "g/zarr.json", "g/temp/zarr.json", "g/temp/c/0/0", "s/c"} & served
    assert {"sharded/zarr.json", "sharded/c/0/0", "old/.zarray", "old/0"} <= served
    zattrs = view.get("g/temp/.zattrs")
    assert isinstance(zattrs, Inline)
    assert zattrs.data.decode() == '{"long_name": "température", "_ARRAY_DIMENSIONS": ["y", "x"]}'
    root = view.get(".zattrs")
    assert isinstance(root, Inline)
    assert root.data == b'{"title": "t", "v": "NaN"}'
    assert view.get("zarr.json") is None
    assert view.get("g/temp/c/0/0") is None  # the stored name of a renamed chunk


def test_renamed_chunks_are_the_stored_references() -> None:
    inner = json_set()
    view = zarr2_view(inner)
    assert view.get("g/temp/0.1") == inner.get("g/temp/c/0/1")
    assert view.get("g/temp/1.1") == Inline(b"x" * 24)
    assert view.get("g/temp/1.0") is None  # never written
    assert view.get("g/temp/2.0") is None  # out of the grid
    assert view.get("s/0") == Inline(b"abcd")
    assert view.get("sharded/c/0/0") == inner.get("sharded/c/0/0")


def test_an_array_that_cannot_be_viewed_is_named_once_with_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    zarr2_view(json_set())
    lines = [r.getMessage() for r in caplog.records if "served as stored" in r.getMessage()]
    assert lines == [
        "--zarr-format 2: array 'sharded' is served as stored: sharding_indexed: "
        "a shard holds many chunks; v2 has no shards"
    ]


def test_known_lengths_are_those_served() -> None:
    view = zarr2_view(json_set())
    zarray = view.get("g/temp/.zarray")
    assert isinstance(zarray, Inline)
    lengths = view.known_lengths(
        "g/temp/", [b".zarray", b"0.0", b"0.1", b"1.0", b"1.1", b"zarr.json", b"c"]
    )
    assert lengths == [len(zarray.data), 24, 24, None, 24, None, None]
    root = view.get(".zgroup")
    assert isinstance(root, Inline)
    assert view.known_lengths("", [b".zgroup", b"zarr.json", b"old"]) == [
        len(root.data),
        None,
        None,
    ]
    assert view.known_lengths("old/", [b"0", b".zarray"])[0] == 8
    assert view.known_lengths("s/", [b"0", b"c"]) == [4, None]


def test_the_root_consolidates_every_v2_document() -> None:
    view = zarr2_view(json_set())
    consolidated = view.get(".zmetadata")
    assert isinstance(consolidated, Inline)
    document = json.loads(consolidated.data)
    assert document["zarr_consolidated_format"] == 1
    entries = document["metadata"]
    assert entries["g/temp/.zarray"]["dimension_separator"] == "."
    assert entries["old/.zarray"]["shape"] == [2]
    assert entries[".zattrs"] == {"title": "t", "v": "NaN"}
    assert not any(key.endswith("zarr.json") for key in entries)


def test_a_stored_zmetadata_is_replaced_keeping_its_other_fields() -> None:
    inner = json_set()
    inner.explicit[".zmetadata"] = Inline(b'{"metadata": {"x/zarr.json": {}}, "record_size": 10}')
    document = json.loads(zarr2_view(inner).get(".zmetadata").data)  # type: ignore[union-attr]
    assert document["record_size"] == 10
    assert "x/zarr.json" not in document["metadata"]
    assert list(zarr2_view(inner).keys()).count(".zmetadata") == 1


def test_directories_without_metadata_above_a_viewed_array_get_a_zgroup() -> None:
    inner = DictReferences({"a/b/x/zarr.json": node(v3_array([2], [2]))})
    view = zarr2_view(inner)
    assert {".zgroup", "a/.zgroup", "a/b/.zgroup", ".zmetadata"} <= set(view.keys())


def test_a_root_array_has_no_consolidated_metadata() -> None:
    inner = DictReferences({"zarr.json": node(v3_array([4], [2])), "c/1": Range(URL, 0, 8)})
    view = zarr2_view(inner)
    assert sorted(view.keys()) == [".zarray", ".zattrs", "1"]


def grid_set() -> DictReferences:
    """A Parquet-like set: metadata keys, and the array's chunks as a grid."""
    stored = ChunkGrid("g/temp", (2, 2), "/", "c")
    return DictReferences(
        {"g/zarr.json": node(GROUP), "g/temp/zarr.json": node(v3_array([4, 6], [2, 3]))},
        grid_list=[stored, ChunkGrid("other", (3,), ".")],
        chunks={0: {0: Range(URL, 0, 24), 3: Range(URL, 24, 10)}, 1: {1: Range(URL, 50, 5)}},
    )


def test_a_viewed_arrays_grid_is_replaced_and_its_numbering_kept() -> None:
    inner = grid_set()
    view = zarr2_view(inner)
    assert view.grids[0] == ChunkGrid("g/temp", (2, 2), ".", "")
    assert view.grids[1] is inner.grids[1]
    assert view.grids[0].key(3) == "g/temp/1.1"
    assert view.chunk(0, 3) == Range(URL, 24, 10)
    assert view.chunk(0, 1) is None
    assert view.chunk_sizes(0, 0, 4) == inner.chunk_sizes(0, 0, 4)
    assert view.skip_absent(0, 1, 4, load=False) == 3
    assert view.chunk_ranges(0, 0, 4) == inner.chunk_ranges(0, 0, 4)
    assert view.chunk_is_loaded(0, 0)


def test_the_tree_builds_from_the_view() -> None:
    for inner in (json_set(), grid_set()):
        view = zarr2_view(inner)
        tree = Tree.build(view.keys(), view.grids, source="refs.test")
        assert tree.static_count > 0


def test_chunk_keys_in_the_v2_encoding_keep_their_names() -> None:
    encoding = {"name": "v2", "configuration": {"separator": "."}}
    inner = DictReferences(
        {"x/zarr.json": node(v3_array([4], [2], chunk_key_encoding=encoding)), "x/1": Inline(b"a")}
    )
    view = zarr2_view(inner)
    assert "x/1" in set(view.keys())
    assert view.get("x/1") == Inline(b"a")


def test_a_stored_key_a_served_name_would_shadow_is_hidden() -> None:
    inner = json_set()
    inner.explicit["g/temp/0.0"] = Inline(b"stray")
    inner.explicit["g/temp/.zattrs"] = Inline(b"{}")
    view = zarr2_view(inner)
    keys = list(view.keys())
    assert keys.count("g/temp/0.0") == 1
    assert keys.count("g/temp/.zattrs") == 1
    assert view.get("g/temp/0.0") == Range(URL, 0, 24)


def test_metadata_in_a_target_is_served_as_stored() -> None:
    inner = DictReferences({"x/zarr.json": Range(URL, 0, 100)})
    decisions = plan(inner)
    assert [(s.path, s.codec) for s in decisions.stored] == [("x", "metadata")]
    assert set(Zarr2References(inner, decisions).keys()) == {"x/zarr.json"}


def test_a_set_without_v3_nodes_is_unchanged() -> None:
    inner = DictReferences(
        {".zgroup": Inline(b'{"zarr_format": 2}'), "x/.zarray": Inline(b"{}"), "x/0": Inline(b"a")}
    )
    view = zarr2_view(inner)
    assert set(view.keys()) == {".zgroup", "x/.zarray", "x/0"}
    assert view.get("x/0") == Inline(b"a")


def test_with_decode_an_array_with_no_v2_codecs_is_served_decoded() -> None:
    twisted = v3_array(
        [2, 3, 4],
        [1, 3, 4],
        dimension_names=None,
        codecs=[
            {"name": "transpose", "configuration": {"order": [2, 0, 1]}},
            {"name": "bytes", "configuration": {"endian": "big"}},
        ],
    )
    inner = DictReferences(
        {
            "t/zarr.json": node(twisted),
            "t/c/1/0/0": Range(URL, 0, 48),
            "sharded/zarr.json": node(v3_array([2, 2], [2, 2], codecs=SHARDED)),
        }
    )
    assert [s.path for s in plan(inner).stored] == ["t", "sharded"]
    decisions = plan(inner, decodes=lambda document: "transpose" in json.dumps(document))
    assert [s.path for s in decisions.stored] == ["sharded"]  # not decoded: as stored
    assert decisions.decoded_v3 == {"t": twisted}
    view = Zarr2References(inner, decisions)
    zarray = json.loads(view.get("t/.zarray").data)  # type: ignore[union-attr]
    assert (zarray["dtype"], zarray["order"], zarray["compressor"]) == ("<i4", "C", None)
    assert view.get("t/1.0.0") == Range(URL, 0, 48)
