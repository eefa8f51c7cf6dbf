"""Tests of loading a set for a mount: local targets of shared mounts checked at load time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refmount.config import MountConfig, RepositoryVersion
from refmount.daemon import (
    check_local_targets,
    load_references,
)
from refmount.errors import ReferenceFormatError
from refmount.model import Inline, Range, Whole
from refmount.store.roots import LocalRoots
from tests.fakes import DictReferences
from tests.support.icechunk_repos import build_repository, requires_icechunk


def test_local_targets_outside_the_roots_refuse_the_set(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.nc").write_bytes(b"a")
    (root / "escape").symlink_to("/etc/shadow")
    roots = LocalRoots([str(root)])
    fine = DictReferences(
        explicit={
            "inline": Inline(b"x"),
            "inside": Range(str(root / "a.nc"), 0, 1),
            "whole": Whole(f"file://{root}/a.nc"),
            "remote": Range("https://host/etc/shadow", 0, 1),
        }
    )
    check_local_targets(fine, roots)
    for key, url in (("z", "/etc/shadow"), ("link", str(root / "escape"))):
        refs = DictReferences(explicit={**fine.explicit, key: Range(url, 0, 1)})
        with pytest.raises(ReferenceFormatError) as caught:
            check_local_targets(refs, roots)
        assert caught.value.key == key
        message = str(caught.value)
        assert url in message
        assert "--local-root" in message
        assert "\n" not in message


def test_shared_mounts_check_targets_at_load_time(tmp_path: Path) -> None:
    (tmp_path / "refs.json").write_text(json.dumps({"k": ["/etc/shadow", 0, 4]}))
    refs = str(tmp_path / "refs.json")
    assert load_references(MountConfig(refs, tmp_path)).references.get("k") is not None
    shared = MountConfig(refs, tmp_path, fuse_options=("allow_root",), local_roots=(str(tmp_path),))
    with pytest.raises(ReferenceFormatError, match=r"'k'.*/etc/shadow"):
        load_references(shared)


def test_repository_options_are_refused_for_a_reference_set(tmp_path: Path) -> None:
    (tmp_path / "refs.json").write_text(json.dumps({"k": "v"}))
    refs = str(tmp_path / "refs.json")
    for config in (
        MountConfig(refs, tmp_path, version=RepositoryVersion(tag="v1")),
        MountConfig(refs, tmp_path, authorize_containers=("all",)),
    ):
        with pytest.raises(ReferenceFormatError, match="apply only to an Icechunk repository"):
            load_references(config)


def test_a_directory_forced_to_be_kerchunk_is_not_opened_as_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "snapshots").mkdir(parents=True)
    (repo / "repo").write_bytes(b"")
    with pytest.raises(ReferenceFormatError, match=r"\.zmetadata"):
        load_references(MountConfig(str(repo), tmp_path, format="kerchunk"))


@requires_icechunk
def test_a_repository_is_loaded_at_its_snapshot(tmp_path: Path) -> None:
    built = build_repository(tmp_path)
    for version, snapshot in (
        (RepositoryVersion(), built.second),
        (RepositoryVersion(tag="v1"), built.first),
        (RepositoryVersion(branch="dev"), built.dev),
    ):
        loaded = load_references(MountConfig(str(built.path), tmp_path, version=version))
        assert loaded.about == {"snapshot": snapshot}
        assert loaded.chunk_store is not None
        assert loaded.references.get("obs/temp/zarr.json") is not None
        assert loaded.tree.static_count > 0


@requires_icechunk
def test_shared_mounts_keep_file_containers_under_the_local_roots(tmp_path: Path) -> None:
    built = build_repository(tmp_path)
    shared = MountConfig(
        str(built.path),
        tmp_path,
        fuse_options=("allow_other",),
        local_roots=(str(built.data.parent),),
        authorize_containers=("all",),
    )
    with pytest.raises(ReferenceFormatError, match=f"container {built.other_container}: "):
        load_references(shared)
    fine = MountConfig(
        str(built.path),
        tmp_path,
        fuse_options=("allow_other",),
        local_roots=(str(built.data.parent),),
        authorize_containers=(built.container,),
    )
    assert load_references(fine).about["snapshot"] == built.second


def test_zarr_format_2_serves_the_v2_view_of_a_set(tmp_path: Path) -> None:
    array = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}],
    }
    refs = tmp_path / "refs.json"
    document = {"zarr.json": {"zarr_format": 3, "node_type": "group"}, "x/zarr.json": array}
    refs.write_text(json.dumps({"version": 1, "refs": {**document, "x/c/1": "ab"}}))
    stored = load_references(MountConfig(str(refs), tmp_path))
    assert stored.references.get("x/c/1") == Inline(b"ab")
    viewed = load_references(MountConfig(str(refs), tmp_path, zarr_format=2))
    assert viewed.references.get("x/1") == Inline(b"ab")
    assert viewed.references.get("x/.zarray") is not None
    assert viewed.tree.static_count != stored.tree.static_count


@requires_icechunk
def test_a_repository_is_viewed_as_v2_before_its_tree_is_built(tmp_path: Path) -> None:
    built = build_repository(tmp_path)
    loaded = load_references(MountConfig(str(built.path), tmp_path, zarr_format=2))
    assert loaded.references.get("obs/temp/.zarray") is not None
    assert loaded.references.get("obs/temp/zarr.json") is None
    assert loaded.references.grids[0].separator == "."
