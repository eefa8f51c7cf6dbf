"""Tests of a snapshot as a reference set: metadata keys, chunk references by kind, sizes."""

from __future__ import annotations

import numpy as np

from refmount.formats.icechunk.chunks import ChunkBatch, ChunkKind, ChunkTable
from refmount.formats.icechunk.references import ArrayChunks, IcechunkReferences, icechunk_key
from refmount.model import ROOT_INODE, ChunkGrid, Inline, Inode, Range
from refmount.namespace.tree import Tree

SNAPSHOT = "M7RFRYZF9M265X5YVQKG"


def references() -> IcechunkReferences:
    temp = ChunkGrid("obs/temp", (2, 2), "/", "c")
    flat = ChunkGrid("flat", (3,), ".", "")  # a v2 chunk key encoding names files "1"
    batches = [
        ChunkBatch(
            np.array([[0, 0], [1, 1], [0, 1]], dtype=np.uint32),
            np.array([ChunkKind.NATIVE, ChunkKind.VIRTUAL, ChunkKind.INLINE], dtype=np.uint8),
            np.array([9232, 1000, 3], dtype=np.uint64),
            {2: b"abc"},
        )
    ]
    arrays = [
        ArrayChunks(temp, ChunkTable.from_batches(temp, batches)),
        ArrayChunks(
            flat,
            ChunkTable.from_batches(
                flat,
                [
                    ChunkBatch(
                        np.array([[1]], dtype=np.uint32),
                        np.array([ChunkKind.NATIVE], dtype=np.uint8),
                        np.array([5], dtype=np.uint64),
                    )
                ],
            ),
        ),
    ]
    metadata = {"zarr.json": b'{"g": 1}', "obs/temp/zarr.json": b"{}", "flat/zarr.json": b"{}"}
    return IcechunkReferences("/data/repo", SNAPSHOT, metadata, arrays)


def test_metadata_keys_are_served_as_stored() -> None:
    refs = references()
    assert sorted(refs.keys()) == ["flat/zarr.json", "obs/temp/zarr.json", "zarr.json"]
    assert refs.get("zarr.json") == Inline(b'{"g": 1}')
    assert refs.get("obs/zarr.json") is None
    assert refs.known_lengths("", [b"zarr.json", b"nothing"]) == [8, None]
    assert refs.source == "/data/repo"
    assert refs.snapshot_id == SNAPSHOT


def test_chunks_by_kind() -> None:
    refs = references()
    url = f"icechunk://{SNAPSHOT}/obs/temp/c/"
    assert refs.chunk(0, 0) == Range(url + "0/0", 0, 9232)
    assert refs.chunk(0, 1) == Inline(b"abc")
    assert refs.chunk(0, 2) is None  # never written
    assert refs.chunk(0, 3) == Range(url + "1/1", 0, 1000)
    assert refs.chunk_sizes(0, 0, 4) == [9232, 3, -1, 1000]
    assert refs.skip_absent(0, 2, 4, load=False) == 3
    assert refs.chunk_is_loaded(0, 2)
    assert refs.chunk_ranges(0, 0, 4) == {}
    assert refs.count_by_kind() == {ChunkKind.NATIVE: 2, ChunkKind.VIRTUAL: 1, ChunkKind.INLINE: 1}


def test_a_chunk_is_read_under_icechunks_key_whatever_its_files_name() -> None:
    refs = references()
    assert refs.chunk(1, 1) == Range(f"icechunk://{SNAPSHOT}/flat/c/1", 0, 5)
    assert icechunk_key(ChunkGrid("", (2,), "/", "c"), 1) == "c/1"
    assert icechunk_key(ChunkGrid("s", (), "/", "c"), 0) == "s/c"


def test_the_tree_names_chunks_by_the_arrays_encoding() -> None:
    refs = references()
    tree = Tree.build(refs.keys(), refs.grids, source=refs.source)

    def find(path: str) -> Inode | None:
        inode: Inode | None = ROOT_INODE
        for name in path.split("/"):
            inode = None if inode is None else tree.lookup(inode, name)
        return inode

    assert find("flat/1") is not None
    assert find("flat/c") is None
    assert find("obs/temp/c/1/1") is not None
