"""Tests of loading a set for a mount: local targets of shared mounts checked at load time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refmount.config import MountConfig
from refmount.daemon import (
    check_local_targets,
    load_references,
)
from refmount.errors import ReferenceFormatError
from refmount.model import Inline, Range, Whole
from refmount.store.roots import LocalRoots
from tests.fakes import DictReferences


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
