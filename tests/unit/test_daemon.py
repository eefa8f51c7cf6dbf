"""Tests of the daemon's pure helpers (no mounting)."""

from __future__ import annotations

from pathlib import Path

import pytest

from refmount.config import MountConfig
from refmount.daemon import DEFAULT_FUSE_OPTIONS, check_mountpoint, fuse_options
from refmount.errors import MountError


def test_fuse_options_add_the_users_to_the_defaults(tmp_path: Path) -> None:
    config = MountConfig("refs.json", tmp_path, fuse_options=("allow_other", "nosuid"))
    assert fuse_options(config) == {*DEFAULT_FUSE_OPTIONS, "allow_other", "nosuid"}


def test_rw_never_reaches_the_kernel(tmp_path: Path) -> None:
    # mount(8) passes "rw" unless told "ro"; with both in the set the winner would be arbitrary.
    config = MountConfig("refs.json", tmp_path, fuse_options=("rw", "dev", "suid"))
    options = fuse_options(config)
    assert "rw" not in options
    assert {"ro", "dev", "suid"} <= options


def test_check_mountpoint(tmp_path: Path) -> None:
    check_mountpoint(tmp_path)
    with pytest.raises(MountError, match="does not exist"):
        check_mountpoint(tmp_path / "absent")
    (tmp_path / "file").write_text("")
    with pytest.raises(MountError, match="not a directory"):
        check_mountpoint(tmp_path / "file")
