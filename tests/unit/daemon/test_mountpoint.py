"""Tests of where a mount may go: mountinfo read with its escapes; FUSE mounts and non-empty
directories refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from refmount.daemon import (
    check_mountpoint,
    mounts_on,
)
from refmount.errors import MountError


def test_check_mountpoint(tmp_path: Path) -> None:
    check_mountpoint(tmp_path)
    with pytest.raises(MountError, match="does not exist"):
        check_mountpoint(tmp_path / "absent")
    (tmp_path / "file").write_text("")
    with pytest.raises(MountError, match="not a directory"):
        check_mountpoint(tmp_path / "file")


def mountinfo_line(mountpoint: str, fstype: str, source: str) -> str:
    escaped = mountpoint.replace("\\", "\\134").replace(" ", "\\040")
    return f"36 35 0:42 / {escaped} rw,nosuid shared:1 - {fstype} {source} rw\n"


def test_mounts_on_reads_mountinfo_with_its_escapes(tmp_path: Path) -> None:
    mountpoint = tmp_path / "with space\\and slash"
    mountpoint.mkdir()
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        mountinfo_line("/", "ext4", "/dev/sda1")
        + mountinfo_line(str(mountpoint), "autofs", "systemd-1")
        + mountinfo_line(str(mountpoint) + "x", "fuse.other", "other")
        + mountinfo_line(str(mountpoint), "fuse.refmount", "refmount")
    )
    found = mounts_on(mountpoint, mountinfo)
    assert [(entry.fstype, entry.source) for entry in found] == [
        ("autofs", "systemd-1"),
        ("fuse.refmount", "refmount"),
    ]
    assert [entry.is_fuse for entry in found] == [False, True]
    assert mounts_on(mountpoint, tmp_path / "no-proc") == []


@pytest.mark.parametrize("fstype", ["fuse", "fuseblk", "fuse.sshfs", "fuse.refmount"])
def test_a_fuse_mount_there_is_refused(tmp_path: Path, fstype: str) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    mountinfo.write_text(mountinfo_line(str(mountpoint), fstype, "somefs"))
    with pytest.raises(MountError, match=rf"already has a FUSE filesystem .*{fstype} from somefs"):
        check_mountpoint(mountpoint, nonempty=True, mountinfo=mountinfo)


@pytest.mark.parametrize("fstype", ["autofs", "ext4", "tmpfs"])
def test_automount_and_bind_mounts_are_fine(tmp_path: Path, fstype: str) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    mountinfo.write_text(mountinfo_line(str(mountpoint), fstype, "/dev/sda1"))
    check_mountpoint(mountpoint, mountinfo=mountinfo)


def test_a_non_empty_mountpoint_needs_nonempty(tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    (mountpoint / ".hidden").write_text("x")
    with pytest.raises(MountError, match=r"is not empty: .* give -o nonempty"):
        check_mountpoint(mountpoint)
    check_mountpoint(mountpoint, nonempty=True)
    mountinfo = tmp_path / "mountinfo"  # an automount point's own entries are its business
    mountinfo.write_text(mountinfo_line(str(mountpoint), "autofs", "systemd-1"))
    check_mountpoint(mountpoint, mountinfo=mountinfo)
