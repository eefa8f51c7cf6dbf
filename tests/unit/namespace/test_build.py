"""Tests of building the namespace: any key order gives the same tree, problems in key order."""

from __future__ import annotations

import logging
import random
import tracemalloc

import pytest

from refmount.errors import ReferenceFormatError
from refmount.model import ROOT_INODE, ChunkGrid, Inode
from refmount.names import key_problem
from refmount.namespace import directory
from refmount.namespace.nodes import GridChunk
from refmount.namespace.tree import Tree
from tests.unit.namespace.test_tree import names, walk

BOTH = "is both a file and a directory"

Model = dict[str, "Model | None"]


def model_build(keys: list[str]) -> tuple[Model, list[tuple[str, str]]]:
    """Build the tree the plain way, one key at a time into nested dicts, with its problems."""
    root: Model = {}
    problems: list[tuple[str, str]] = []
    for key in keys:
        problem = key_problem(key)
        if problem is not None:
            problems.append((key, problem))
            continue
        *parents, leaf = key.split("/")
        directory = root
        for depth, part in enumerate(parents):
            if part in directory and directory[part] is None:
                problems.append(("/".join(parents[: depth + 1]), BOTH))
                del directory[part]
            child = directory.setdefault(part, {})
            assert child is not None
            directory = child
        if leaf in directory:
            problems.append((key, "duplicate key" if directory[leaf] is None else BOTH))
        else:
            directory[leaf] = None
    return root, problems


def assert_same_tree(tree: Tree, inode: Inode, model: Model) -> None:
    assert names(tree, inode) == sorted(model)
    for entry, _ in tree.children(inode):
        child = model[entry.name]
        assert entry.is_dir == (child is not None), entry.name
        if child is not None:
            assert_same_tree(tree, entry.inode, child)


def random_keys(seed: int) -> list[str]:
    rng = random.Random(seed)
    parts = ["a", "b", "a-b", "é", "0", "1", "10", "2", "x", "", ".."]
    count = rng.choice([1, 5, 30, 200])
    return ["/".join(rng.choices(parts, k=rng.randint(1, 3))) for _ in range(count)]


@pytest.fixture(params=["as is", "small batches"])
def batches(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sort directories in tiny batches and blocks too, to reach every path with few keys."""
    if request.param == "small batches":
        monkeypatch.setattr(directory, "_BATCH", 3)
        monkeypatch.setattr(directory, "_MERGE_WAYS", 2)


@pytest.mark.usefixtures("batches")
@pytest.mark.parametrize("seed", range(40))
def test_any_keys_give_the_plain_tree_and_its_problems_in_key_order(
    seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    keys = random_keys(seed)
    model, problems = model_build(keys)
    with caplog.at_level(logging.WARNING, logger="refmount.namespace.tree"):
        tree = Tree.build(keys, source="refs.json", skip_invalid=True)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"refs.json: skipping key {key!r}: {problem}" for key, problem in problems]
    assert_same_tree(tree, ROOT_INODE, model)
    if problems:
        with pytest.raises(ReferenceFormatError) as caught:
            Tree.build(keys, source="refs.json")
        assert (caught.value.key, caught.value.problem.split(" (and ")[0]) == problems[0]


@pytest.mark.usefixtures("batches")
def test_a_big_directory_is_the_same_in_any_key_order() -> None:
    numeric = [f"v/{i}" for i in range(1200)]  # ascending runs of 1, 2, 3 and 4 digits
    shuffled = random.Random(1).sample(numeric, len(numeric))
    trees = [Tree.build(keys, source="refs.json") for keys in (numeric, sorted(numeric), shuffled)]
    directory = walk(trees[0], "v")
    listing = list(trees[0].children(directory))
    assert [entry.name for entry, _ in listing] == sorted(key[2:] for key in numeric)
    for tree in trees[1:]:
        assert list(tree.children(walk(tree, "v"))) == listing
        for key in numeric[::37]:
            assert walk(tree, key) == walk(trees[0], key)


@pytest.mark.usefixtures("batches")
def test_repeats_are_reported_in_key_order_across_directories(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = ["a/2", "a/1", "b/1", "b/1", "a/2", "a/3"]
    with caplog.at_level(logging.WARNING, logger="refmount.namespace.tree"):
        tree = Tree.build(keys, source="refs.json", skip_invalid=True)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert ["'b/1'" in warnings[0], "'a/2'" in warnings[1], len(warnings)] == [True, True, 2]
    assert names(tree, walk(tree, "a")) == ["1", "2", "3"]
    with pytest.raises(ReferenceFormatError, match="duplicate key") as caught:
        Tree.build(keys, source="refs.json")
    assert caught.value.key == "b/1"


@pytest.mark.usefixtures("batches")
@pytest.mark.parametrize(
    "keys", [["x/b", "x/a", "x/b/c"], ["x/b/c", "x/a", "x/b"], ["x/c", "x/a", "x/b", "x/b/c"]]
)
def test_a_file_that_is_also_a_directory_out_of_order(keys: list[str]) -> None:
    with pytest.raises(ReferenceFormatError, match="both a file and a directory") as caught:
        Tree.build(keys, source="refs.json")
    assert caught.value.key == "x/b"
    tree = Tree.build(keys, source="refs.json", skip_invalid=True)
    assert [(e.name, e.is_dir) for e, _ in tree.children(walk(tree, "x"))][:2] == [
        ("a", False),
        ("b", True),
    ]
    assert names(tree, walk(tree, "x/b")) == ["c"]


def test_directories_of_one_file_each() -> None:
    keys = [f"v/{i}/0" for i in range(300)]
    tree = Tree.build(random.Random(2).sample(keys, len(keys)), source="refs.json")
    assert names(tree, walk(tree, "v")) == sorted(str(i) for i in range(300))
    for key in keys:
        assert tree.path(walk(tree, key)) == key
        assert names(tree, tree.parent(walk(tree, key))) == ["0"]


def test_skip_invalid_drops_a_directory_that_was_also_a_file(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the file "c" loses to the directory "c", which then loses to the chunk prefix "c"
    root = ChunkGrid("", (1, 1), "/", prefix="c")
    keys = ["zarr.json", "c", "c/.zarray"]
    with caplog.at_level(logging.WARNING, logger="refmount.namespace.tree"):
        tree = Tree.build(keys, [root], source="refs.parq", skip_invalid=True)
    assert names(tree, ROOT_INODE) == ["zarr.json", "c"]
    assert tree.file_source(walk(tree, "c/0/0")) == GridChunk(0, 0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "'c'" in warnings[0]
    assert "'c/.zarray'" in warnings[1]


# ----------------------------------------------------------------------------- deep keys


def test_a_key_thousands_of_directories_deep_costs_memory_linear_in_its_depth() -> None:
    depth = 20_000
    keys = ["a/" * depth + "x", "b/" * depth + "y", "b/" * depth + "y"]
    tracemalloc.start()
    try:
        tree = Tree.build(keys, source="refs.json", skip_invalid=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # About 200 bytes a directory while building (7.8 MB here; 14 MB while every directory
    # held a dict of its subdirectories); the square of the depth would be 800 MB.
    assert peak < 10 * 1024 * 1024, peak
    assert tree.path(walk(tree, "a/" * depth + "x")) == "a/" * depth + "x"


def test_a_problem_deep_down_names_the_whole_key() -> None:
    key = "a/" * 3000 + "x"
    with pytest.raises(ReferenceFormatError) as caught:
        Tree.build([key, key], source="refs.json")
    assert caught.value.key == key
    assert "duplicate key" in caught.value.problem
