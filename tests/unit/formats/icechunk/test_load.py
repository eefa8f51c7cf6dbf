"""Tests of loading a snapshot: every key Icechunk lists is there with its exact size, and
nothing else; the package's absence is refused in one line."""

from __future__ import annotations

import sys

import pytest

from refmount.config import RepositoryVersion
from refmount.errors import ReferenceFormatError
from refmount.formats.icechunk import INSTALL_HINT, load_repository
from refmount.model import Inline, Range, reference_length
from refmount.namespace.tree import Tree
from tests.support.icechunk_repos import (
    BuiltRepository,
    build_repository,
    open_store,
    requires_icechunk,
    store_get,
    store_keys,
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltRepository:
    return build_repository(tmp_path_factory.mktemp("load"))


def served_keys(tree: Tree) -> dict[str, tuple[int, int] | str]:
    """Return every file of ``tree``: a stored key's path, or a chunk's (grid, index)."""
    from refmount.model import ROOT_INODE
    from refmount.namespace.nodes import GridChunk, StaticFile

    files: dict[str, tuple[int, int] | str] = {}
    pending = [ROOT_INODE]
    while pending:
        for entry, _ in tree.children(pending.pop()):
            if entry.is_dir:
                pending.append(entry.inode)
                continue
            source = tree.file_source(entry.inode)
            path = tree.path(entry.inode)
            if isinstance(source, StaticFile):
                files[path] = source.key
            else:
                assert isinstance(source, GridChunk)
                files[path] = (source.grid, source.index)
    return files


@requires_icechunk
@pytest.mark.parametrize("version", ["first", "second", "dev"])
def test_every_key_icechunk_lists_is_served_with_its_size(
    built: BuiltRepository, version: str
) -> None:
    snapshot = getattr(built, version)
    loaded = load_repository(str(built.path), RepositoryVersion(snapshot=snapshot))
    refs = loaded.references
    assert loaded.opened.snapshot_id == snapshot
    store = open_store(built, snapshot)
    tree = Tree.build(refs.keys(), refs.grids, source=refs.source)
    files = served_keys(tree)
    absent = set()
    for path, where in files.items():
        reference = refs.get(where) if isinstance(where, str) else refs.chunk(*where)
        if reference is None:
            absent.add(path)
    expected = store_keys(store)
    assert sorted(set(files) - absent) == sorted(expected)
    assert "sparse/c/0/0" in absent  # never written: listed by the grid, but absent
    for key in expected:
        where = files[key]
        if isinstance(where, str):
            assert refs.get(where) == Inline(store_get(store, key))
            continue
        reference = refs.chunk(*where)
        if isinstance(reference, Inline):
            assert reference.data == store_get(store, key)
        elif key.startswith("virtual/"):  # not readable here: no container is authorized
            assert reference_length(reference) == 1000
        else:
            assert isinstance(reference, Range)
            assert reference.length == len(store_get(store, key))


def test_without_the_package_a_repository_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "refmount.formats.icechunk.load", None)
    with pytest.raises(ReferenceFormatError) as caught:
        load_repository("/data/repo", RepositoryVersion())
    message = str(caught.value)
    assert message.startswith("/data/repo: an Icechunk repository needs the icechunk package")
    assert INSTALL_HINT in message
    assert "\n" not in message
