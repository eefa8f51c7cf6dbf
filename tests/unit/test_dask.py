"""The pure parts of the Dask plugin: lock file names, what a pickled plugin carries."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from refmount.dask import RefmountPlugin, lock_paths


def test_lock_files_are_named_after_the_user_and_the_resolved_mountpoint(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    attach, users = lock_paths(tmp_path / "real", tmp_path)
    assert lock_paths(tmp_path / "link", tmp_path) == (attach, users)
    assert attach.parent == users.parent == tmp_path
    assert attach.name.startswith(f"refmount-{os.getuid()}-")
    assert (attach.suffix, users.suffix) == (".lock", ".users")
    assert attach.stem == users.stem
    assert lock_paths(tmp_path / "other", tmp_path)[0] != attach


def test_a_pickled_plugin_carries_its_command_line_but_no_lock(tmp_path: Path) -> None:
    plugin = RefmountPlugin({"a": "b"}, tmp_path / "mnt", cache_size="1G", base="/data")
    plugin._held = 99  # as if this nanny held the users' lock
    copy = pickle.loads(pickle.dumps(plugin))
    assert copy._held is None
    assert copy._argv == plugin._argv
    assert copy._argv[-3:] == ["--", "-", str(tmp_path / "mnt")]
    assert copy.name == f"refmount {tmp_path / 'mnt'}"
    assert copy.idempotent


def test_pins_travel_with_the_plugin_checked_on_the_client(tmp_path: Path) -> None:
    from refmount.errors import ReferenceFormatError
    from refmount.store.pin_file import dumps_pins
    from refmount.store.pins import Pin

    path = tmp_path / "pins.json"
    path.write_text(dumps_pins("refs.json", {"s3://b/a.nc": Pin('"e"', None, 3, 0.0)}))
    from_file = RefmountPlugin("refs.json", tmp_path / "mnt", pins=path)
    assert pickle.loads(pickle.dumps(from_file))._pins == path.read_bytes()
    document = json.loads(path.read_text())
    from_document = RefmountPlugin("refs.json", tmp_path / "mnt", pins=document)
    assert from_document._pins is not None
    assert json.loads(from_document._pins) == document
    assert "--pins" not in from_document._argv  # each host names its own copy
    with pytest.raises(ReferenceFormatError, match="not a pins file"):
        RefmountPlugin("refs.json", tmp_path / "mnt", pins={"targets": {}})
