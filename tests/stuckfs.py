"""A tiny FUSE filesystem whose file reads never answer, to stand for a hung local target.

Run as ``python -m tests.stuckfs MOUNTPOINT``: it mounts one file, ``stuck.bin``
(``SIZE`` bytes), prints ``ready`` once mounted, and holds every read of it until it gets
SIGTERM or SIGINT; then it answers the held reads with EIO, unmounts and exits. Lookups,
attributes and opens answer at once, as a hung network filesystem's cached metadata would.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys

import pyfuse3
import trio

NAME = b"stuck.bin"
SIZE = 1 << 20
FILE_INODE = pyfuse3.InodeT(pyfuse3.ROOT_INODE + 1)


class StuckFilesystem(pyfuse3.Operations):
    """One directory holding one file whose reads wait until ``release`` is set."""

    def __init__(self, release: trio.Event) -> None:
        super().__init__()
        self._release = release

    def _attributes(self, inode: pyfuse3.InodeT) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        if inode == pyfuse3.ROOT_INODE:
            entry.st_mode = pyfuse3.ModeT(stat.S_IFDIR | 0o755)
            entry.st_nlink = 2
        else:
            entry.st_mode = pyfuse3.ModeT(stat.S_IFREG | 0o644)
            entry.st_nlink = 1
            entry.st_size = SIZE
        entry.st_uid, entry.st_gid = os.getuid(), os.getgid()
        entry.attr_timeout = entry.entry_timeout = 3600
        return entry

    async def getattr(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext | None = None
    ) -> pyfuse3.EntryAttributes:
        if inode not in (pyfuse3.ROOT_INODE, FILE_INODE):
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attributes(inode)

    async def lookup(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        ctx: pyfuse3.RequestContext | None = None,
    ) -> pyfuse3.EntryAttributes:
        if parent_inode != pyfuse3.ROOT_INODE or name != NAME:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attributes(FILE_INODE)

    async def open(
        self, inode: pyfuse3.InodeT, flags: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        if inode != FILE_INODE:
            raise pyfuse3.FUSEError(errno.EISDIR)
        return pyfuse3.FileInfo(fh=pyfuse3.FileHandleT(inode))

    async def read(self, fh: pyfuse3.FileHandleT, off: int, size: int) -> bytes:
        await self._release.wait()
        raise pyfuse3.FUSEError(errno.EIO)


async def serve(release: trio.Event) -> None:
    """Serve until a stop signal; then release the held reads and leave the loop."""

    async def on_signal() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            print("ready", flush=True)
            async for _ in signals:
                release.set()
                pyfuse3.terminate()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signal)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


def main(mountpoint: str) -> None:
    """Mount on ``mountpoint`` and serve until SIGTERM or SIGINT."""
    release = trio.Event()
    pyfuse3.init(StuckFilesystem(release), mountpoint, {"fsname=stuckfs", "ro"})
    try:
        trio.run(serve, release)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main(sys.argv[1])
