"""Files of the mount's own: nodes in the root that no reference set key names, whose bytes
are made by the daemon when they are opened (the statistics file), or served by a view of the
whole set (``ServedFile``: the ``--netcdf`` file).

A virtual file is not listed (listings, ``cp -r`` and zarr readers never see it), has size 0
in its attributes (its contents exist only once opened), is read with direct I/O and never
cached by the kernel, and has no extended attributes. A reference key of the same name wins:
it is looked up in the tree first. Its inode lies beyond every number the tree gives out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from refmount.model import Inode


@dataclass(frozen=True, slots=True)
class VirtualFile:
    """One virtual file: its inode, its name in the root and what makes its contents."""

    inode: Inode
    name: str
    contents: Callable[[], bytes]


class VirtualFiles:
    """The virtual files of a mount, by inode and by name."""

    def __init__(self, files: Iterable[VirtualFile]) -> None:
        self._by_inode = {file.inode: file for file in files}
        self._by_name = {file.name: file for file in self._by_inode.values()}

    def __contains__(self, inode: object) -> bool:
        return inode in self._by_inode

    def get(self, inode: Inode) -> VirtualFile | None:
        """Return the virtual file ``inode``, or None."""
        return self._by_inode.get(inode)

    def named(self, name: str) -> VirtualFile | None:
        """Return the virtual file called ``name`` in the root, or None."""
        return self._by_name.get(name)


class ServedFile(Protocol):
    """A listed, read-only file of the root made from the whole set (the ``--netcdf`` file):
    unlike a virtual file it has an exact size and is cached by the kernel like any other.

    Its size may take work to know (the file is laid out at the first question): a listing
    asks ``size_now`` and lists it unresolved until then; ``getattr`` waits for ``size``.
    Its errors are ``RefmountError``s naming what failed.
    """

    @property
    def name(self) -> str:
        """Return the file's name in the root."""
        ...

    def size_now(self) -> int | None:
        """Return the size if known without work, else None."""
        ...

    async def size(self) -> int:
        """Return the exact size."""
        ...

    async def read(self, offset: int, size: int) -> bytes | memoryview:
        """Return ``size`` bytes at ``offset``, fewer only at the end."""
        ...
