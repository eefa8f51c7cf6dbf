"""The least a pyfuse3 filesystem can do per read: the bench's ceiling for any pyfuse3 daemon.

Usage: ``python scripts/fuse_floor.py SOURCE CHUNK_SIZE MOUNTPOINT``

Serves ``big/0`` … ``big/N-1``, the ``CHUNK_SIZE`` chunks of ``SOURCE``, from one buffer read
into memory at start: every READ is answered at once with a view of that buffer, with no
lookup table, cache, copy or fetch. Attributes and entries are cached as refmount's are
(one hour, files opened with ``keep_cache``), with pyfuse3's default task limits. Whatever a
reader measures through it is what the kernel, libfuse and pyfuse3 cost on their own; refmount
does that work plus its own. Stops on SIGTERM or SIGINT and unmounts.
"""

from __future__ import annotations

import errno
import signal
import stat
import sys
from typing import Any

import pyfuse3
import trio

ROOT_INODE = pyfuse3.ROOT_INODE
DIRECTORY_INODE = ROOT_INODE + 1
FIRST_FILE_INODE = ROOT_INODE + 2
TIMEOUT = 3600.0


class FloorOperations(pyfuse3.Operations):
    """A root holding ``big/``, which holds one file per chunk of an in-memory buffer."""

    def __init__(self, data: bytes, chunk_size: int) -> None:
        super().__init__()
        self._data = memoryview(data)
        self._chunk_size = chunk_size
        self._chunks = len(data) // chunk_size

    def _attributes(self, inode: int) -> pyfuse3.EntryAttributes:
        attributes = pyfuse3.EntryAttributes()
        attributes.st_ino = inode
        attributes.entry_timeout = attributes.attr_timeout = TIMEOUT
        if inode < FIRST_FILE_INODE:
            attributes.st_mode = stat.S_IFDIR | 0o555
            attributes.st_nlink = 2
        else:
            attributes.st_mode = stat.S_IFREG | 0o444
            attributes.st_nlink = 1
            attributes.st_size = self._chunk_size
        return attributes

    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attributes(inode)

    async def lookup(self, parent: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        if parent == ROOT_INODE and name == b"big":
            return self._attributes(DIRECTORY_INODE)
        if parent == DIRECTORY_INODE and name.isdigit() and int(name) < self._chunks:
            return self._attributes(FIRST_FILE_INODE + int(name))
        raise pyfuse3.FUSEError(errno.ENOENT)

    async def opendir(self, inode: int, ctx: Any) -> int:
        return inode

    async def readdir(self, handle: int, start: int, token: Any) -> None:
        if handle == ROOT_INODE:
            if start == 0:
                pyfuse3.readdir_reply(token, b"big", self._attributes(DIRECTORY_INODE), 1)
            return
        for index in range(start, self._chunks):
            name = str(index).encode()
            if not pyfuse3.readdir_reply(
                token, name, self._attributes(FIRST_FILE_INODE + index), index + 1
            ):
                return

    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)

    async def read(  # type: ignore[override] # pyfuse3 replies with any buffer, not only bytes
        self, handle: int, offset: int, size: int
    ) -> memoryview:
        start = (handle - FIRST_FILE_INODE) * self._chunk_size + offset
        end = min(start + size, start - offset + self._chunk_size)
        return self._data[start:end]


async def stop_on_signal() -> None:
    """End pyfuse3's loop at the first SIGTERM or SIGINT."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            pyfuse3.terminate()
            return


async def serve() -> None:
    """Run pyfuse3's loop until the mount goes away or a signal ends it."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stop_on_signal)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


def main() -> None:
    source, chunk_size, mountpoint = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(source, "rb") as handle:
        data = handle.read()
    options = set(pyfuse3.default_options) | {"fsname=refmount-floor", "ro"}
    pyfuse3.init(FloorOperations(data, chunk_size), mountpoint, options)
    try:
        trio.run(serve)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
