"""Tests of wiring a mount: the first keys' targets prepared, the parts built from the options."""

from __future__ import annotations

from pathlib import Path

import pytest

from refmount.config import MountConfig
from refmount.daemon import (
    load_references,
    open_mount,
    prepare_targets,
)
from refmount.model import ROOT_INODE, Inline, Range, Whole
from refmount.store.store import Store
from tests.fakes import DictReferences


def test_the_targets_of_the_first_keys_are_prepared(monkeypatch: pytest.MonkeyPatch) -> None:
    refs = DictReferences(
        explicit={
            ".zgroup": Inline(b"{}"),
            "a/0": Range("s3://bucket/a.nc", 0, 10),
            "a/1": Range("s3://bucket/a.nc", 10, 10),
            "b/0": Whole("http://127.0.0.1:1/b.bin"),
            "c/0": Range("s3://bucket/c.nc", 0, 10),
        }
    )
    store = Store()
    asked: list[set[str]] = []
    monkeypatch.setattr(store, "prepare", lambda urls: asked.append(set(urls)))
    prepare_targets(store, refs)
    assert asked == [{"s3://bucket/a.nc", "http://127.0.0.1:1/b.bin", "s3://bucket/c.nc"}]
    prepare_targets(store, refs, most=3)  # a sample: only the first keys
    assert asked[1] == {"s3://bucket/a.nc"}


async def test_a_mount_is_wired_from_its_options_and_its_loaded_set(tmp_path: Path) -> None:
    example = Path(__file__).parents[3] / "examples" / "air" / "refs.json"
    config = MountConfig(refs=str(example), mountpoint=tmp_path)
    parts = open_mount(config, load_references(config))
    attributes = await parts.filesystem.lookup(ROOT_INODE, "air")
    assert attributes is not None
    assert attributes.is_dir
    assert len(parts.requests) == 0
    assert parts.reader.can_prefetch is False  # nothing runs before the lifecycle starts it
    parts.store.close()
