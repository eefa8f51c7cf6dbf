"""What the Parquet tests share: the 48-byte target, the conformance sets as fixtures, and
reading a set as the mount does (through the tree)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from refmount.formats.options import LoadOptions
from refmount.formats.parquet import ParquetReferenceSet, load_parquet
from refmount.model import ROOT_INODE, Inline, Range, Reference, Whole
from refmount.namespace.nodes import StaticFile
from refmount.namespace.tree import Tree
from tests.fakes import LocalSource
from tests.unit.formats.parquet.writers import refs_to_parquet, zarray

D = b"HELLO WORLD 0123456789abcdefghijklmnopqrstuvwxyz"
"""The 48-byte target of the conformance fixtures."""


@dataclass
class Store:
    """A Parquet set written under ``root``: the source that reads it (and counts the reads),
    and the target file its chunks point into."""

    root: Path
    source: LocalSource
    target: str

    def load(self, **options: Any) -> ParquetReferenceSet:
        """Load the set, with ``options`` for ``LoadOptions``."""
        return load_parquet(self.source, LoadOptions(remote_protocol="file", **options))


@pytest.fixture
def target(tmp_path: Path) -> str:
    """The path of a file holding ``D``."""
    path = tmp_path / "data.bin"
    path.write_bytes(D)
    return str(path)


@pytest.fixture
def p_parq(tmp_path: Path, target: str) -> Store:
    """The §10.3 conformance store, record_size 3."""
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        ".zattrs": json.dumps({"title": "t/\u00e9"}),
        "x/.zarray": json.dumps(zarray([4, 6], [2, 3])),
        "x/0.0": [target, 0, 6],
        "x/0.1": [target, 6, 6],
        "x/1.0": [target, 0, 0],
        "z/.zarray": json.dumps(zarray([5], [1])),
        "z/0": "base64:" + base64.b64encode(b"\x00\x01").decode(),
        "z/1": "rawtext",
        "z/2": [target, 12, 4],
        "z/4": [target, 1, 2],
        "deep/.zgroup": '{"zarr_format": 2}',
        "deep/s/.zarray": json.dumps(zarray([], [])),
        "deep/s/0": "base64:BQ==",
    }
    root = tmp_path / "p.parq"
    refs_to_parquet(refs, root, record_size=3)
    return Store(root, LocalSource(root), target)


@pytest.fixture
def cat_parq(tmp_path: Path, target: str) -> Store:
    """30 chunks with the same URL (so ``path`` is categorical), ``c/5`` missing."""
    refs: dict[str, Any] = {
        ".zgroup": '{"zarr_format": 2}',
        "c/.zarray": json.dumps(zarray([30], [1])),
    }
    for i in range(30):
        if i != 5:
            refs[f"c/{i}"] = [target, i, 1]
    root = tmp_path / "cat.parq"
    refs_to_parquet(refs, root, record_size=100)
    return Store(root, LocalSource(root), target)


def materialize(reference: Reference | None) -> bytes | None:
    """Return the bytes a reference stands for, reading local targets directly."""
    match reference:
        case None:
            return None
        case Inline(data):
            return data
        case Range(url, offset, length):
            with open(url, "rb") as handle:
                handle.seek(offset)
                return handle.read(length)
        case Whole(url):
            return Path(url).read_bytes()


def grid_number(references: ParquetReferenceSet, array: str) -> int:
    """Return the number of the grid of ``array``."""
    return [g.array for g in references.grids].index(array)


def lookup(references: ParquetReferenceSet, key: str) -> Reference | None:
    """Resolve a key as the mount does: walk the tree, then ask the set for the node."""
    tree = Tree.build(references.keys(), references.grids, source=references.source)
    inode = ROOT_INODE
    for part in key.split("/"):
        child = tree.lookup(inode, part)
        if child is None:
            return None
        inode = child
    if tree.is_dir(inode):
        return None
    source = tree.file_source(inode)
    if isinstance(source, StaticFile):
        return references.get(source.key)
    return references.chunk(source.grid, source.index)


def cat(references: ParquetReferenceSet, key: str) -> bytes | None:
    """Return the bytes of ``key`` as the mount serves them, or None when it is absent."""
    return materialize(lookup(references, key))


def present_keys(references: ParquetReferenceSet, array: str) -> list[str]:
    """Return the keys of the chunks of ``array`` that hold a reference, in order."""
    number = grid_number(references, array)
    grid = references.grids[number]
    return [grid.key(i) for i in references.chunks_present(number)]


def reference_fs(root: Path) -> Any:
    """Return fsspec's own reader of a Parquet reference set (metadata reads need no pandas)."""
    import fsspec

    return fsspec.filesystem(
        "reference", fo=str(root), remote_protocol="file", skip_instance_cache=True
    )
