"""Tests of the namespace: directories from keys, stable inodes, grids, invalid keys."""

from __future__ import annotations

import logging

import pytest

from refmount.errors import ReferenceFormatError
from refmount.model import ROOT_INODE, ChunkGrid, Inode, canonical_index
from refmount.namespace.nodes import GridChunk, StaticFile
from refmount.namespace.tree import Tree


def names(tree: Tree, inode: Inode, start: int = 0) -> list[str]:
    return [entry.name for entry, _ in tree.children(inode, start)]


def walk(tree: Tree, path: str) -> Inode:
    inode = ROOT_INODE
    for part in path.split("/"):
        child = tree.lookup(inode, part)
        assert child is not None, path
        inode = child
    return inode


def test_directories_come_from_slashes() -> None:
    tree = Tree.build(["dir/sub/key", "dir/k2", "top"], source="refs.json")
    assert names(tree, ROOT_INODE) == ["dir", "top"]
    directory = walk(tree, "dir")
    assert tree.is_dir(directory)
    assert names(tree, directory) == ["k2", "sub"]
    key = walk(tree, "dir/sub/key")
    assert not tree.is_dir(key)
    assert tree.path(key) == "dir/sub/key"
    assert tree.file_source(key) == StaticFile("dir/sub/key")


def test_nested_directories_are_all_listed_whatever_the_key_order() -> None:
    # fsspec#1430: the directory B used to go missing from the root listing
    tree = Tree.build(["a", "B/C/b", "B/C/d", "B/_"], source="refs.json")
    assert sorted(names(tree, ROOT_INODE)) == ["B", "a"]
    assert names(tree, walk(tree, "B")) == ["C", "_"]


def test_inodes_are_stable_across_builds_and_key_orders() -> None:
    keys = [f"g{i % 7}/v{i}" for i in range(200)]
    first = Tree.build(keys, source="a")
    second = Tree.build(list(reversed(keys)), source="b")
    for key in keys:
        assert walk(first, key) == walk(second, key)


def test_dot_and_dotdot_lookups() -> None:
    tree = Tree.build(["a/b"], source="refs.json")
    directory = walk(tree, "a")
    assert tree.lookup(directory, ".") == directory
    assert tree.lookup(directory, "..") == ROOT_INODE
    assert tree.lookup(ROOT_INODE, "..") == ROOT_INODE


def test_missing_names_and_lookups_below_files() -> None:
    tree = Tree.build(["a/b"], source="refs.json")
    assert tree.lookup(ROOT_INODE, "nope") is None
    assert tree.lookup(walk(tree, "a/b"), "x") is None
    assert not tree.exists(0)
    assert not tree.exists(tree.node_count + 1)


def test_children_resume_from_any_position() -> None:
    tree = Tree.build([f"k{i:03d}" for i in range(50)], source="refs.json")
    everything = list(tree.children(ROOT_INODE))
    for start in (0, 1, 17, 49, 50, 51):
        resumed = list(tree.children(ROOT_INODE, start))
        assert resumed == everything[start:]
    positions = [position for _, position in everything]
    assert positions == list(range(1, 51))


@pytest.mark.parametrize("key", ["", "/lead", "a//b", "a/../b", "nul\x00byte", "\ud800"])
def test_a_key_fuse_cannot_represent_stops_the_build(key: str) -> None:
    with pytest.raises(ReferenceFormatError) as caught:
        Tree.build([key, "fine"], source="refs.json")
    assert caught.value.key == key
    assert "refs.json" in str(caught.value)


@pytest.mark.parametrize("keys", [["a", "a/b"], ["a/b", "a"]])
def test_file_that_is_also_a_directory_costs_the_file_key(keys: list[str]) -> None:
    with pytest.raises(ReferenceFormatError) as caught:
        Tree.build(keys, source="refs.json")
    assert caught.value.key == "a"
    assert "both a file and a directory" in caught.value.problem


def test_skip_invalid_mounts_the_rest_with_one_warning_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        tree = Tree.build(["ok", "", "a//b", "x", "x/y"], source="refs.json", skip_invalid=True)
    assert names(tree, ROOT_INODE) == ["ok", "x"]
    assert names(tree, walk(tree, "x")) == ["y"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert all("refs.json" in w for w in warnings)


def test_error_counts_further_invalid_keys() -> None:
    with pytest.raises(ReferenceFormatError, match="and 1 more invalid keys"):
        Tree.build(["", "/x", "ok"], source="refs.json")


@pytest.mark.parametrize(
    "grid",
    [
        ChunkGrid("a/b", (3, 4), "."),
        ChunkGrid("a", (2, 3, 2), "/"),
        ChunkGrid("", (5,), "."),
        ChunkGrid("v3", (2, 2), "/", "c"),
        ChunkGrid("s", (), "."),
    ],
)
def test_chunk_grid_index_of_inverts_key(grid: ChunkGrid) -> None:
    assert [grid.index_of(grid.key(index)) for index in range(grid.count)] == list(
        range(grid.count)
    )
    for other in ("a/b/3.0", "a/b/01.0", "a/b/0.0.0", "a/2/0/0", "v3/0/0", "x", "a/b/0"):
        assert grid.index_of(other) is None


def test_canonical_index() -> None:
    assert canonical_index("0", 3) == 0
    assert canonical_index("2", 3) == 2
    assert canonical_index("3", 3) is None
    for bad in (
        "01",
        "+1",
        "-1",
        " 1",
        "1 ",
        "a",
        "",
        "\u0661",
    ):  # the last is ARABIC-INDIC DIGIT ONE
        assert canonical_index(bad, 100) is None


def test_dot_separated_grid() -> None:
    grid = ChunkGrid("x", (2, 3), ".")
    tree = Tree.build(["x/.zarray", ".zgroup"], [grid], source="refs.parq")
    array = walk(tree, "x")
    listing = names(tree, array)
    assert listing == [".zarray", "0.0", "0.1", "0.2", "1.0", "1.1", "1.2"]
    chunk = walk(tree, "x/1.2")
    assert not tree.is_dir(chunk)
    assert tree.file_source(chunk) == GridChunk(0, 5)
    assert tree.path(chunk) == "x/1.2"
    assert tree.parent(chunk) == array
    for alias in ("0.3", "2.0", "0.0.0", "0", "00.1", "a.b"):
        assert tree.lookup(array, alias) is None, alias


def test_slash_separated_grid_nests_directories() -> None:
    grid = ChunkGrid("deep/x", (2, 2, 3), "/")
    tree = Tree.build(["deep/x/.zarray"], [grid], source="refs.parq")
    array = walk(tree, "deep/x")
    assert names(tree, array) == [".zarray", "0", "1"]
    level = walk(tree, "deep/x/1")
    assert tree.is_dir(level)
    assert names(tree, level) == ["0", "1"]
    leaf_dir = walk(tree, "deep/x/1/1")
    assert names(tree, leaf_dir) == ["0", "1", "2"]
    chunk = walk(tree, "deep/x/1/1/2")
    assert tree.file_source(chunk) == GridChunk(0, 11)
    assert tree.path(chunk) == "deep/x/1/1/2"
    assert tree.parent(tree.parent(chunk)) == level
    assert tree.lookup(leaf_dir, "3") is None
    assert tree.lookup(chunk, "0") is None


def test_leaf_chunks_say_which_chunk_each_listed_position_is() -> None:
    dotted = ChunkGrid("x", (2, 3), ".")
    nested = ChunkGrid("deep/y", (2, 2, 3), "/")
    v3 = ChunkGrid("z", (4,), "/", prefix="c")
    tree = Tree.build(
        ["x/.zarray", "x/.zattrs", "deep/y/.zarray", "z/zarr.json"],
        [dotted, nested, v3],
        source="refs.parq",
    )
    for path, grid in (("x", 0), ("deep/y/1/1", 1), ("z/c", 2)):
        directory = walk(tree, path)
        leaves = tree.leaf_chunks(directory)
        assert leaves is not None, path
        grid_id, first, skip, total = leaves
        assert grid_id == grid
        assert total == sum(1 for _, position in tree.children(directory) if position > skip)
        for entry, position in tree.children(directory):
            if position > skip:
                source = tree.file_source(entry.inode)
                assert source == GridChunk(grid, first + position - 1 - skip), entry.name
    assert tree.leaf_chunks(walk(tree, "x"))[1:] == (0, 2, 6)  # type: ignore[index]
    assert tree.leaf_chunks(walk(tree, "deep/y/1/1"))[1:] == (9, 0, 3)  # type: ignore[index]
    for path in ("", "deep", "deep/y", "deep/y/1", "z"):
        assert tree.leaf_chunks(walk(tree, path) if path else ROOT_INODE) is None, path


def test_chunk_spans_say_which_chunks_each_grid_entry_holds() -> None:
    nested = ChunkGrid("deep/y", (2, 2, 3), "/")
    v3 = ChunkGrid("z", (4,), "/", prefix="c")
    dotted = ChunkGrid("x", (2, 3), ".")
    tree = Tree.build(
        ["deep/y/.zarray", "z/zarr.json", "x/.zarray"], [nested, v3, dotted], source="refs.parq"
    )
    spans = {
        path: tree.chunk_spans(walk(tree, path))
        for path in ("deep/y", "deep/y/1", "deep/y/1/0", "z", "z/c", "x")
    }
    assert spans == {
        "deep/y": (0, 0, 1, 2, 6),  # grid, first chunk, position, entries, chunks per entry
        "deep/y/1": (0, 6, 0, 2, 3),
        "deep/y/1/0": (0, 6, 0, 3, 1),
        "z": (1, 0, 1, 1, 4),  # the prefix directory holds every chunk
        "z/c": (1, 0, 0, 4, 1),
        "x": (2, 0, 1, 6, 1),
    }
    for path, found in spans.items():  # entry k holds the chunks its files are
        assert found is not None
        directory = walk(tree, path)
        for entry, position in tree.children(directory):
            if position > found.position and not entry.is_dir:
                k = position - 1 - found.position
                assert tree.file_source(entry.inode) == GridChunk(found.grid, found.first + k)
    assert tree.chunk_spans(ROOT_INODE) is None
    assert tree.chunk_spans(walk(tree, "deep")) is None


def runs(tree: Tree, inode: Inode, start: int, most: int) -> list[tuple[str, int, bool, bool]]:
    """Every entry ``child_run`` gives from ``start`` on, ``most`` at a time."""
    out: list[tuple[str, int, bool, bool]] = []
    while (run := tree.child_run(inode, start, most)) is not None:
        assert run.start == start
        assert 1 <= len(run.names) <= most
        assert len(run.dirs) == len(run.names)
        for offset, (name, is_dir) in enumerate(zip(run.names, run.dirs, strict=True)):
            out.append((name.decode(), run.first_inode + offset, bool(is_dir), run.grid))
        start += len(run.names)
    return out


def test_child_runs_list_what_children_lists() -> None:
    dotted = ChunkGrid("x", (2, 3), ".")
    nested = ChunkGrid("deep/y", (2, 2, 3), "/")
    v3 = ChunkGrid("z", (4,), "/", prefix="c")
    scalar = ChunkGrid("s", (), ".")
    keys = ["x/.zarray", "x/.zattrs", "deep/y/.zarray", "z/zarr.json", "s/.zarray", "é/ß", "a"]
    tree = Tree.build(keys, [dotted, nested, v3, scalar], source="refs.parq")
    paths = ["", "x", "deep", "deep/y", "deep/y/1", "deep/y/1/1", "z", "z/c", "s", "é"]
    for path in paths:
        directory = walk(tree, path) if path else ROOT_INODE
        expected = [
            (entry.name, entry.inode, entry.is_dir, not tree.is_static(entry.inode))
            for entry, _ in tree.children(directory)
        ]
        for start in range(len(expected) + 1):
            for most in (1, 2, 5, 1000):
                assert runs(tree, directory, start, most) == expected[start:], (path, start, most)
    assert tree.child_run(walk(tree, "x/0.1"), 0, 10) is None  # a chunk file has no entries


def test_zarr_v3_default_keys_have_a_c_directory() -> None:
    grid = ChunkGrid("v3", (2, 2), "/", prefix="c")
    tree = Tree.build(["v3/zarr.json"], [grid], source="refs.parq")
    array = walk(tree, "v3")
    assert names(tree, array) == ["zarr.json", "c"]
    prefix = walk(tree, "v3/c")
    assert tree.is_dir(prefix)
    assert names(tree, prefix) == ["0", "1"]
    chunk = walk(tree, "v3/c/1/0")
    assert tree.file_source(chunk) == GridChunk(0, 2)
    assert tree.path(chunk) == "v3/c/1/0"


def test_scalar_arrays_have_one_chunk() -> None:
    v2 = ChunkGrid("s", (), ".")
    v3 = ChunkGrid("t", (), "/", prefix="c")
    tree = Tree.build(["s/.zarray", "t/zarr.json"], [v2, v3], source="refs.parq")
    assert names(tree, walk(tree, "s")) == [".zarray", "0"]
    assert names(tree, walk(tree, "t")) == ["zarr.json", "c"]
    assert tree.file_source(walk(tree, "s/0")) == GridChunk(0, 0)
    assert tree.file_source(walk(tree, "t/c")) == GridChunk(1, 0)
    assert not tree.is_dir(walk(tree, "t/c"))


def test_grids_at_the_root_and_with_missing_parent_groups() -> None:
    root = ChunkGrid("", (3,), ".")
    nested = ChunkGrid("g/x", (2,), ".")
    tree = Tree.build([".zarray", "g/x/.zarray"], [root, nested], source="refs.parq")
    assert names(tree, ROOT_INODE) == [".zarray", "g", "0", "1", "2"]
    assert tree.file_source(walk(tree, "g/x/1")) == GridChunk(1, 1)


def test_inode_blocks_of_several_grids_do_not_overlap() -> None:
    grids = [ChunkGrid(f"a{i}", (4, 5), "/") for i in range(3)]
    tree = Tree.build([f"a{i}/.zarray" for i in range(3)], grids, source="refs.parq")
    seen: set[int] = set()
    for i in range(3):
        for j in range(4):
            for k in range(5):
                inode = walk(tree, f"a{i}/{j}/{k}")
                assert inode not in seen
                seen.add(inode)
                assert tree.path(inode) == f"a{i}/{j}/{k}"
                assert tree.file_source(inode) == GridChunk(i, j * 5 + k)


def test_a_huge_grid_costs_no_memory_per_chunk() -> None:
    grid = ChunkGrid("big", (2000, 2500), ".")
    tree = Tree.build(["big/.zarray"], [grid], source="refs.parq")
    assert tree.node_count == tree.static_count + 5_000_000
    chunk = walk(tree, "big/1999.2499")
    assert tree.file_source(chunk) == GridChunk(0, 4_999_999)
    array = walk(tree, "big")
    resumed = next(tree.children(array, 4_000_001))
    assert resumed[0].name == "1600.0"  # .zarray, then 4,000,000 chunks were skipped


def test_metadata_key_that_collides_with_a_chunk_name_is_refused() -> None:
    grid = ChunkGrid("x", (2,), ".")
    with pytest.raises(ReferenceFormatError, match="also a chunk key"):
        Tree.build(["x/.zarray", "x/1"], [grid], source="refs.parq")


def test_array_path_that_is_also_a_file_is_refused() -> None:
    grid = ChunkGrid("x", (2,), ".")
    with pytest.raises(ReferenceFormatError, match="both a file and a directory"):
        Tree.build(["x"], [grid], source="refs.parq")


@pytest.mark.parametrize("array", ["a//b", "..", "x/.", "/lead", "y" * 256])
def test_array_whose_path_fuse_cannot_represent(
    array: str, caplog: pytest.LogCaptureFixture
) -> None:
    # regression: with skip_invalid the metadata key was skipped but the array's directories
    # were still made, giving entries named "" or ".." (or longer than 255 bytes)
    grid = ChunkGrid(array, (2,), ".")
    with pytest.raises(ReferenceFormatError) as caught:
        Tree.build([], [grid], source="refs.parq")
    assert caught.value.key == array
    assert "array path" in caught.value.problem
    with caplog.at_level(logging.WARNING):
        tree = Tree.build(
            [f"{array}/.zarray", "ok/.zarray"],
            [grid, ChunkGrid("ok", (2,), ".")],
            source="refs.parq",
            skip_invalid=True,
        )
    assert names(tree, ROOT_INODE) == ["ok"]
    assert tree.file_source(walk(tree, "ok/1")) == GridChunk(1, 1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # the metadata key; the array goes with it
    assert repr(f"{array}/.zarray") in warnings[0]


def test_skip_invalid_drops_a_key_that_is_also_a_chunk_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # regression: the key was reported as skipped but kept, shadowing the chunk
    grid = ChunkGrid("x", (2,), ".")
    with caplog.at_level(logging.WARNING):
        tree = Tree.build(["x/.zarray", "x/1"], [grid], source="refs.parq", skip_invalid=True)
    array = walk(tree, "x")
    assert names(tree, array) == [".zarray", "0", "1"]
    assert tree.file_source(walk(tree, "x/1")) == GridChunk(0, 1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "'x/1'" in warnings[0]
    assert "also a chunk key" in warnings[0]


def test_skip_invalid_drops_a_directory_that_is_also_a_chunk_prefix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # regression: a zarr v3 array at the root lists its "c" chunk directory, and a nested
    # array "c" made a second root entry called "c"
    root = ChunkGrid("", (1, 1), "/", prefix="c")
    nested = ChunkGrid("c", (2,), ".")
    keys = ["zarr.json", "c/.zarray", "c/.zattrs"]
    with pytest.raises(ReferenceFormatError, match="also a chunk key"):
        Tree.build(keys, [root, nested], source="refs.parq")
    with caplog.at_level(logging.WARNING):
        tree = Tree.build(keys, [root, nested], source="refs.parq", skip_invalid=True)
    assert names(tree, ROOT_INODE) == ["zarr.json", "c"]
    assert tree.file_source(walk(tree, "c/0/0")) == GridChunk(0, 0)
    assert tree.lookup(ROOT_INODE, "c") == walk(tree, "c")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # one per key below the colliding directory
    assert any("'c/.zarray'" in w for w in warnings)
    assert any("'c/.zattrs'" in w for w in warnings)


def test_grid_with_more_chunks_than_inodes_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    # regression: inode numbers beyond 64 bits made every lookup in the array fail
    huge = ChunkGrid("huge", (2**40, 2**40), ".")
    with pytest.raises(ReferenceFormatError, match="too many to mount") as caught:
        Tree.build(["huge/.zarray"], [huge], source="refs.parq")
    assert caught.value.key == "huge"
    with caplog.at_level(logging.WARNING):
        tree = Tree.build(
            ["huge/.zarray", "ok/.zarray"],
            [huge, ChunkGrid("ok", (2,), ".")],
            source="refs.parq",
            skip_invalid=True,
        )
    assert tree.node_count < 2**63
    assert names(tree, walk(tree, "huge")) == [".zarray"]
    assert tree.file_source(walk(tree, "ok/1")) == GridChunk(1, 1)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_lookup_in_a_big_directory_finds_every_name() -> None:
    keys = [f"d/{i}" for i in range(5000)]
    tree = Tree.build(keys, source="refs.json")
    directory = tree.lookup(ROOT_INODE, "d")
    assert directory is not None
    for key in keys:
        child = tree.lookup(directory, key[2:])
        assert child is not None
        assert tree.path(child) == key
    assert tree.lookup(directory, "5000") is None
    assert tree.lookup(directory, "") is None
