"""Tests of the options handed to libfuse, checked by libfuse's own parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from refmount.config import MountConfig
from refmount.daemon import (
    DEFAULT_FUSE_OPTIONS,
    fuse_options,
    fuse_options_problem,
)


def test_fuse_options_add_the_users_to_the_defaults(tmp_path: Path) -> None:
    config = MountConfig("refs.json", tmp_path, fuse_options=("allow_other", "nosuid"))
    assert fuse_options(config) == {*DEFAULT_FUSE_OPTIONS, "allow_other", "nosuid"}


def test_rw_never_reaches_the_kernel(tmp_path: Path) -> None:
    # mount(8) passes "rw" unless told "ro"; with both in the set the winner would be arbitrary.
    config = MountConfig("refs.json", tmp_path, fuse_options=("rw", "dev", "suid"))
    options = fuse_options(config)
    assert "rw" not in options
    assert {"ro", "dev", "suid"} <= options


@pytest.mark.parametrize(
    "options",
    [
        set(DEFAULT_FUSE_OPTIONS),
        {*DEFAULT_FUSE_OPTIONS, "allow_other", "auto_unmount", "noatime", "max_read=131072"},
    ],
)
def test_libfuse_accepts_what_it_knows(options: set[str]) -> None:
    assert fuse_options_problem(options) is None


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ("bogus", "unknown option(s): `-o bogus'"),
        ("nonempty", "unknown option(s): `-o nonempty'"),  # why refmount takes it out
        ("max_read=abc", "invalid parameter in option `max_read=abc'"),
        ("fsname=é", "not ASCII: fsname=é"),
    ],
)
def test_libfuse_refuses_what_it_does_not_know(option: str, words: str) -> None:
    assert fuse_options_problem({*DEFAULT_FUSE_OPTIONS, option}) == words
