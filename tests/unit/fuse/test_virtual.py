"""Tests of virtual files: found by inode and by name, contents made when asked."""

from __future__ import annotations

from refmount.fuse.virtual import VirtualFile, VirtualFiles
from refmount.model import Inode


def test_virtual_files_are_found_by_inode_and_by_name() -> None:
    calls: list[int] = []

    def contents() -> bytes:
        calls.append(1)
        return b"now"

    files = VirtualFiles([VirtualFile(Inode(7), ".x", contents)])
    assert Inode(7) in files
    assert Inode(8) not in files
    found = files.get(Inode(7))
    assert found is not None
    assert files.named(".x") is found
    assert files.named(".y") is None
    assert calls == []  # nothing is made until the file is opened
    assert found.contents() == b"now"
    assert calls == [1]
