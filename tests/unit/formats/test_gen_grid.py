"""``gen`` items kept as chunk grids: the same keys and references as fsspec, nothing per key."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

import fsspec
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.gen_grid import GenGrids
from refmount.formats.gen_items import GRID_COLUMN_COST
from refmount.formats.json_refs import JsonReferenceSet, load_json
from refmount.formats.json_v1 import load_v1
from refmount.formats.options import LoadOptions
from refmount.model import ROOT_INODE, ChunkGrid, Inline, Inode, Range, Reference, Whole
from refmount.namespace.nodes import GridChunk, StaticFile
from refmount.namespace.tree import Tree
from tests.fakes import LocalSource

SOURCE = "/refs/refs.json"


def v1(*gen: dict[str, Any], **members: Any) -> dict[str, Any]:
    return {"version": 1, "gen": list(gen), **members}


def item(key: str = "var/{{i}}.{{j}}", **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key": key,
        "url": "memory://{{u}}",
        "offset": "{{j}}",
        "length": "10",
        "dimensions": {"i": {"stop": 3}, "j": {"stop": 4}},
    }
    out.update(fields)
    return {name: value for name, value in out.items() if value is not ...}


def loaded(document: dict[str, Any]) -> tuple[JsonReferenceSet, GenGrids]:
    refs = load_v1(document, SOURCE, "/refs", LoadOptions())
    generated = refs.generated or GenGrids((), ())
    return JsonReferenceSet(SOURCE, refs), generated


def every_reference(document: dict[str, Any]) -> dict[str, Reference]:
    """Return every key of the document with its reference, stored and generated."""
    references, generated = loaded(document)
    out: dict[str, Reference] = {}
    for key in list(references.keys()):
        reference = references.get(key)
        assert reference is not None
        out[key] = reference
    for key, reference in generated.references():
        assert key not in out
        out[key] = reference
    return out


def fsspec_references(document: dict[str, Any]) -> dict[str, Reference]:
    """Return fsspec's expansion of the document (jinja mode), as references."""
    fs = fsspec.filesystem("reference", fo=json.loads(json.dumps(document)), simple_templates=False)
    out: dict[str, Reference] = {}
    for key, value in fs.references.items():
        if isinstance(value, str):
            out[key] = Inline(value.encode())
            continue
        assert isinstance(value, list)
        url = value[0] if "://" in value[0] else f"file:///refs/{value[0]}"
        out[key] = Whole(url) if len(value) == 1 else Range(url, value[1], value[2])
    return out


TEMPLATES = {"u": "host/data.bin"}


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"key": "var/{{i}}/{{j}}"},
        {"key": "a/b/{{i}}"},  # one dimension
        {"offset": "{{ (i * 4 + j) * 10 }}"},  # jinja: kept as a column
        {"url": "memory://{{u}}/{{ i + 1 }}"},  # a URL column
        {"url": "memory://h/{{i}}/x{{j}}", "length": "{{i}}{{j}}"},
        {"offset": ..., "length": ...},  # whole files
        {"offset": "7", "length": "{{u2}}"},
    ],
)
def test_a_grid_item_generates_what_fsspec_generates(fields: dict[str, Any]) -> None:
    if fields.get("key") == "a/b/{{i}}":
        fields = {**fields, "dimensions": {"i": {"stop": 5}}, "offset": "{{i}}"}
    document = v1(item(**fields), templates={**TEMPLATES, "u2": "3"})
    references, generated = loaded(document)
    assert len(generated.items) == 1, "the item is kept as a grid"
    assert list(references.keys()) == []
    assert every_reference(document) == fsspec_references(document)


def test_generated_keys_come_in_product_order_first_dimension_slowest() -> None:
    references, generated = loaded(v1(item(), templates=TEMPLATES))
    grid = references.grids[0]
    assert grid == ChunkGrid("var", (3, 4), ".")
    keys = [key for key, _ in generated.references()]
    assert keys == [f"var/{i}.{j}" for i in range(3) for j in range(4)]
    assert len(references) == 12


def test_generated_keys_win_over_refs_keys() -> None:
    refs = {"var/1.2": "replaced", "var/.zarray": "{}", "var/1.20": "kept", "other": "o"}
    document = v1(item(), templates=TEMPLATES, refs=refs)
    references, _ = loaded(document)
    assert list(references.keys()) == ["var/.zarray", "var/1.20", "other"]
    assert references.get("var/1.2") is None
    assert len(references) == 3 + 12
    ours = every_reference(document)
    assert ours == fsspec_references(document)
    assert ours["var/1.2"] == Range("memory://host/data.bin", 2, 10)


def test_the_tree_finds_generated_keys_by_name() -> None:
    document = v1(item(key="var/{{i}}/{{j}}"), templates=TEMPLATES, refs={"var/.zarray": "{}"})
    references, _ = loaded(document)
    tree = Tree.build(references.keys(), references.grids, source=SOURCE)
    assert tree.static_count == 3  # the root, var and var/.zarray: nothing per generated key
    inode = walk(tree, "var/2/3")
    assert inode is not None
    assert tree.file_source(inode) == GridChunk(0, 11)
    assert references.chunk(0, 11) == Range("memory://host/data.bin", 3, 10)
    assert tree.path(inode) == "var/2/3"
    zarray = walk(tree, "var/.zarray")
    assert zarray is not None
    assert tree.file_source(zarray) == StaticFile("var/.zarray")
    assert walk(tree, "var/3") is None


def walk(tree: Tree, path: str) -> Inode | None:
    inode: Inode | None = ROOT_INODE
    for name in path.split("/"):
        inode = None if inode is None else tree.lookup(inode, name)
    return inode


def test_sizes_ranges_and_presence_are_answered_without_io() -> None:
    references, _ = loaded(v1(item(length="{{i}}"), templates=TEMPLATES))
    assert references.chunk_is_loaded(0, 5)
    assert references.chunk_sizes(0, 2, 6) == [0, 0, 1, 1]
    assert references.chunk_sizes(0, 12, 14) is None
    found = references.chunk_ranges(0, 0, 12)  # zero-length chunks are left out
    assert list(found) == ["memory://host/data.bin"]
    assert found["memory://host/data.bin"].offsets == [0, 1, 2, 3, 0, 1, 2, 3]
    assert found["memory://host/data.bin"].lengths == [1, 1, 1, 1, 2, 2, 2, 2]
    assert references.skip_absent(0, 3, 100, load=False) == 3
    assert references.skip_absent(0, 12, 100, load=False) == 12
    assert references.chunk(0, 12) is None


@pytest.mark.parametrize(
    "document",
    [
        # lists, a start or a step: not a grid's keys
        v1(item(dimensions={"i": [0, 1], "j": {"stop": 2}}), templates=TEMPLATES),
        v1(item(dimensions={"i": {"start": 1, "stop": 3}, "j": {"stop": 2}}), templates=TEMPLATES),
        v1(item(key="var/{{j}}.{{i}}"), templates=TEMPLATES),  # dimensions out of order
        v1(item(key="var/{{i}}_{{j}}"), templates=TEMPLATES),
        v1(item(key="var{{i}}.{{j}}"), templates=TEMPLATES),
        # another item reaches the same directory: keys compete, later items win
        v1(item(), item(key="var/{{i}}.0", url="memory://second"), templates=TEMPLATES),
        v1(item(), item(key="v{{ 'ar' }}/0.0", url="memory://second"), templates=TEMPLATES),
        # a refs key inside a nested grid's directories
        v1(item(key="var/{{i}}/{{j}}"), templates=TEMPLATES, refs={"var/1/x": "x", "var/3": "y"}),
        # a refs key below a chunk file: refused as a file and a directory, as stored keys are
        v1(item(), templates=TEMPLATES, refs={"var/1.1/x": "x"}),
    ],
)
def test_items_that_are_not_alone_in_a_grid_are_stored(document: dict[str, Any]) -> None:
    references, generated = loaded(document)
    assert generated.items == ()
    assert every_reference(document) == fsspec_references(document)
    if "var/1.1/x" in document.get("refs", {}):
        with pytest.raises(ReferenceFormatError) as caught:
            Tree.build(references.keys(), references.grids, source=SOURCE)
        assert (caught.value.key, caught.value.problem) == (
            "var/1.1",
            "is both a file and a directory",
        )


def test_items_in_separate_directories_are_grids() -> None:
    document = v1(
        item(), item(key="var2/{{i}}.{{j}}"), item(key="x{{i}}{{j}}"), templates=TEMPLATES
    )
    _, generated = loaded(document)
    assert [grid.array for grid in generated.grids] == ["var", "var2"]
    assert every_reference(document) == fsspec_references(document)


def stored_twin(fields: dict[str, Any]) -> dict[str, Any]:
    """The same item with list dimensions, which is stored key by key (``expand``)."""
    return item(**fields, dimensions={"i": [0, 1, 2], "j": [0, 1, 2, 3]})


@pytest.mark.parametrize(
    ("fields", "key", "words"),
    [
        ({"offset": "-{{i}}"}, "var/1.0", "negative offset -1"),
        ({"length": "{{j}}x"}, "var/0.0", "length '0x' is not an integer"),
        ({"offset": "{{ 10 // (2 - j) + 10 }}"}, "var/0.2", "ZeroDivisionError"),
        ({"url": "{{e}}"}, "var/0.0", "renders as an empty string"),
        ({"url": "{{ 'memory://a' if i < 2 else e }}"}, "var/2.0", "empty"),
        ({"offset": "{{ undefined }}"}, "var/0.0", "undefined name"),
        ({"offset": None}, "var/0.0", "'offset' must be a string or an integer"),
        ({"offset": "{{i}}", "length": "{{ 2**63 - 2 + j }}"}, "var/0.2", "beyond 2**63"),
    ],
)
def test_a_failure_is_found_at_load_in_the_key_expand_names(
    fields: dict[str, Any], key: str, words: str
) -> None:
    templates = {**TEMPLATES, "e": ""}
    with pytest.raises(ReferenceFormatError) as as_grid:
        load_v1(v1(item(**fields), templates=templates), SOURCE, "/refs", LoadOptions())
    with pytest.raises(ReferenceFormatError) as as_stored:
        load_v1(v1(stored_twin(fields), templates=templates), SOURCE, "/refs", LoadOptions())
    assert as_grid.value.key == as_stored.value.key == key
    assert as_grid.value.problem == as_stored.value.problem
    assert words in as_grid.value.problem


def test_load_json_keeps_generated_keys_as_grids(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(v1(item(), templates=TEMPLATES, refs={"var/0.0": "x"})))
    references = load_json(LocalSource(path), LoadOptions())
    assert list(references.keys()) == []
    assert references.grids == (ChunkGrid("var", (3, 4), "."),)
    assert references.chunk(0, 0) == Range("memory://host/data.bin", 0, 10)


def bytes_per_key(document: dict[str, Any], path: Path, keys: int) -> tuple[float, float]:
    """Return the bytes a load and its tree hold per key after it, and at its peak (jinja's
    sandbox, made once per process, is made before)."""
    small = [
        {**entry, "dimensions": {"i": {"stop": 1}, "j": {"stop": 2}}} for entry in document["gen"]
    ]
    path.write_text(json.dumps({**document, "gen": small}))
    load_json(LocalSource(path), LoadOptions())
    path.write_text(json.dumps(document))
    gc.collect()
    tracemalloc.start()
    try:
        references = load_json(LocalSource(path), LoadOptions())
        tree = Tree.build(references.keys(), references.grids, source=str(path))
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert tree.node_count >= keys
    return held / keys, peak / keys


@pytest.mark.parametrize(("offset", "most"), [("{{j}}", 1.0), ("{{ j * 4096 }}", 24.0)])
def test_memory_per_generated_key_is_small(tmp_path: Path, offset: str, most: float) -> None:
    # 100 000 keys; kept as a grid, a key costs nothing, or one 8-byte offset when jinja
    # renders it (stored key by key, it cost about 140 bytes, and 300 at the peak).
    dimensions = {"i": {"stop": 100}, "j": {"stop": 1000}}
    document = v1(item(offset=offset, dimensions=dimensions), templates=TEMPLATES)
    held, peak = bytes_per_key(document, tmp_path / "refs.json", 100_000)
    assert held < most
    assert peak < 64


def test_a_grid_item_of_a_billion_keys_costs_nothing_against_the_cap() -> None:
    dimensions = {"i": {"stop": 10**5}, "j": {"stop": 10**4}}
    document = v1(item(dimensions=dimensions, offset="0"), templates=TEMPLATES)
    refs = load_v1(document, SOURCE, "/refs", LoadOptions(max_size=1))
    assert refs.generated is not None
    assert refs.generated.count == 10**9
    assert refs.generated.chunk(0, 10**9 - 1) == Range("memory://host/data.bin", 0, 10)


def test_a_grid_item_renders_at_most_a_hundred_million_combinations_at_load() -> None:
    # the offset uses both dimensions: every key would be rendered at load
    fields: dict[str, Any] = {
        "offset": "{{i}}{{j}}",
        "dimensions": {"i": {"stop": 10**5}, "j": {"stop": 10**4}},
    }
    with pytest.raises(ReferenceFormatError, match="renders 1,000,000,000 combinations"):
        load_v1(v1(item(**fields), templates=TEMPLATES), SOURCE, "/refs", LoadOptions())


def test_the_columns_of_a_grid_item_count_against_the_cap() -> None:
    fields: dict[str, Any] = {
        "offset": "{{ i * 4 + j }}",
        "dimensions": {"i": {"stop": 30}, "j": {"stop": 4}},
    }
    cap = 120 * GRID_COLUMN_COST
    assert load_v1(
        v1(item(**fields), templates=TEMPLATES), SOURCE, "/refs", LoadOptions(max_size=cap)
    ).generated
    with pytest.raises(ReferenceFormatError, match="its 120 keys keep 1 value") as caught:
        load_v1(
            v1(item(**fields), templates=TEMPLATES), SOURCE, "/refs", LoadOptions(max_size=cap - 1)
        )
    assert "--max-refs-size" in caught.value.problem
