"""The least a pyfuse3 filesystem can do per request: the bench's ceiling for any pyfuse3 daemon.

Usage: ``python bench/fuse_floor.py SOURCE CHUNK_SIZE MOUNTPOINT [LISTED]``

Serves ``big/0`` … ``big/N-1``, the ``CHUNK_SIZE`` chunks of ``SOURCE``, from one buffer read
into memory at start: every READ is answered at once with a view of that buffer, with no
lookup table, cache, copy or fetch. With ``LISTED``, ``many/`` holds that many 4 KiB files
of zeros, for listings. Attributes and entries are cached as refmount's are (one hour, files
opened with ``keep_cache``), with pyfuse3's default task limits. Whatever a reader measures
through it is what the kernel, libfuse and pyfuse3 cost on their own; refmount does that
work plus its own. Stops on SIGTERM or SIGINT and unmounts.
"""

from __future__ import annotations

import errno
import signal
import stat
import sys
from dataclasses import dataclass
from typing import Any

import pyfuse3
import trio

ROOT_INODE = pyfuse3.ROOT_INODE
FIRST_FILE_INODE = ROOT_INODE + 3
LISTED_SIZE = 4096
TIMEOUT = 3600.0


@dataclass(frozen=True, slots=True)
class Directory:
    """A directory of ``count`` files of ``size`` bytes, numbered from inode ``first``."""

    name: bytes
    inode: int
    first: int
    count: int
    size: int
    data: memoryview
    """Where file ``i`` starts at ``i * size``; when it is one file long, every file shows it."""


class FloorOperations(pyfuse3.Operations):
    """A root holding ``big/`` (the chunks of an in-memory buffer) and maybe ``many/``."""

    def __init__(self, data: bytes, chunk_size: int, listed: int) -> None:
        super().__init__()
        chunks = len(data) // chunk_size
        big = Directory(
            b"big", ROOT_INODE + 1, FIRST_FILE_INODE, chunks, chunk_size, memoryview(data)
        )
        self._directories = [big]
        if listed:
            zeros = memoryview(bytes(LISTED_SIZE))
            first = FIRST_FILE_INODE + chunks
            self._directories.append(
                Directory(b"many", ROOT_INODE + 2, first, listed, LISTED_SIZE, zeros)
            )

    def _file(self, inode: int) -> tuple[Directory, int] | None:
        for directory in self._directories:
            if directory.first <= inode < directory.first + directory.count:
                return directory, inode - directory.first
        return None

    def _attributes(self, inode: int) -> pyfuse3.EntryAttributes:
        attributes = pyfuse3.EntryAttributes()
        attributes.st_ino = inode
        attributes.entry_timeout = attributes.attr_timeout = TIMEOUT
        found = self._file(inode)
        if found is None:
            attributes.st_mode = stat.S_IFDIR | 0o555
            attributes.st_nlink = 2
        else:
            attributes.st_mode = stat.S_IFREG | 0o444
            attributes.st_nlink = 1
            attributes.st_size = found[0].size
        return attributes

    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attributes(inode)

    async def lookup(self, parent: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        for directory in self._directories:
            if parent == ROOT_INODE and name == directory.name:
                return self._attributes(directory.inode)
            if parent == directory.inode and name.isdigit() and int(name) < directory.count:
                return self._attributes(directory.first + int(name))
        raise pyfuse3.FUSEError(errno.ENOENT)

    async def opendir(self, inode: int, ctx: Any) -> int:
        return inode

    async def readdir(self, handle: int, start: int, token: Any) -> None:
        if handle == ROOT_INODE:
            for position, directory in enumerate(self._directories[start:], start=start + 1):
                name, attributes = directory.name, self._attributes(directory.inode)
                if not pyfuse3.readdir_reply(token, name, attributes, position):
                    return
            return
        for directory in self._directories:
            if directory.inode == handle:
                for index in range(start, directory.count):
                    attributes = self._attributes(directory.first + index)
                    if not pyfuse3.readdir_reply(token, str(index).encode(), attributes, index + 1):
                        return

    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)

    async def read(  # type: ignore[override] # pyfuse3 replies with any buffer, not only bytes
        self, handle: int, offset: int, size: int
    ) -> memoryview:
        found = self._file(handle)
        if found is None:
            raise pyfuse3.FUSEError(errno.EBADF)
        directory, index = found
        base = 0 if len(directory.data) == directory.size else index * directory.size
        start = base + min(offset, directory.size)
        return directory.data[start : base + min(offset + size, directory.size)]


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
    listed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    with open(source, "rb") as handle:
        data = handle.read()
    options = set(pyfuse3.default_options) | {"fsname=refmount-floor", "ro"}
    pyfuse3.init(FloorOperations(data, chunk_size, listed), mountpoint, options)
    try:
        trio.run(serve)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
