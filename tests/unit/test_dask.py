"""The pure parts of the Dask plugin: lock file names, what a pickled plugin carries."""

from __future__ import annotations

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
