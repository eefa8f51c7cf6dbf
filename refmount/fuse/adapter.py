"""The thin ``pyfuse3.Operations`` adapter; the only place that raises ``FUSEError``.

Every handler goes through ``_boundary``: refmount errors become their errno (target and
format errors with one log line naming the key and URL), and any other exception becomes
EIO with a traceback in the log. Nothing else may escape a handler: pyfuse3 would end the
whole mount. The boundary also times every call and counts its errors in the filesystem's
``Statistics``, and runs it in a cancel scope of ``InFlight``: at shutdown every request
still running is cancelled and answered ``EIO`` at once.
"""

from __future__ import annotations

import codecs
import errno
import functools
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import pyfuse3
import trio

from refmount.errors import FilesystemError, RecentFailureError, RefmountError
from refmount.fuse.filesystem import BLOCK_SIZE, Attributes, RefFilesystem
from refmount.fuse.listing import DIRECTORY, UNRESOLVED
from refmount.model import FileHandle, Inode

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
UTF8_NAMES = codecs.lookup(sys.getfilesystemencoding()).name == "utf-8"
"""Whether ``os.fsencode`` of a name is its UTF-8 (names are valid UTF-8): listings then
send the names as the tree stores them."""


def _boundary(
    handler: Callable[Concatenate[FuseOperations, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[FuseOperations, P], Coroutine[Any, Any, R]]:
    """Wrap a handler so that only ``FUSEError`` can leave it, timing and counting each call.

    Every call is recorded in the filesystem's ``Statistics`` under the handler's name, with
    its latency and, when it fails, the errno the kernel gets (a deliberate ``ENOSYS`` is
    not a failure).
    """
    name = handler.__name__

    @functools.wraps(handler)
    async def wrapper(self: FuseOperations, /, *args: P.args, **kwargs: P.kwargs) -> R:
        started = time.perf_counter_ns()
        failure: int | None = None
        try:
            return await self._requests.run(functools.partial(handler, self, *args, **kwargs))
        except pyfuse3.FUSEError as error:
            # ENOSYS is the protocol's "not implemented, never ask again" (see the class
            # docstring), the answer chosen for those operations: counted, not an error
            failure = None if error.errno == errno.ENOSYS else error.errno
            raise
        except FilesystemError as error:
            failure = error.errno
            raise pyfuse3.FUSEError(error.errno) from None
        except RecentFailureError as error:  # its first failure was logged
            failure = error.errno
            log.debug("%s failed: %s", name, error)
            raise pyfuse3.FUSEError(error.errno) from None
        except RefmountError as error:
            failure = error.errno
            log.error("%s failed: %s", name, error)
            raise pyfuse3.FUSEError(error.errno) from None
        except Exception:
            failure = errno.EIO
            log.exception("unexpected error in %s", name)
            raise pyfuse3.FUSEError(errno.EIO) from None
        finally:
            self._fs.statistics.record(name, time.perf_counter_ns() - started, failure)

    return wrapper


class InFlight:
    """The requests being answered, each in its own cancel scope, so that shutdown can
    answer them all at once (``abort``) instead of waiting for slow targets.

    Owned by the event loop's thread. After ``abort``, new requests are cancelled as they
    start.
    """

    def __init__(self) -> None:
        self._scopes: set[trio.CancelScope] = set()
        self._aborted = False
        self.started = 0
        """How many requests have started (shutdown waits until none come any more)."""

    def __len__(self) -> int:
        return len(self._scopes)

    async def run(self, request: Callable[[], Awaitable[R]]) -> R:
        """Run one request inside a cancel scope that ``abort`` cancels (then ``EIO``)."""
        self.started += 1
        with trio.CancelScope() as scope:
            if self._aborted:
                scope.cancel()
            self._scopes.add(scope)
            try:
                return await request()
            finally:
                self._scopes.discard(scope)
        raise pyfuse3.FUSEError(errno.EIO)  # cancelled by abort: the kernel gets EIO

    def abort(self) -> int:
        """Cancel every request in flight (they answer ``EIO``); return how many there were."""
        self._aborted = True
        for scope in self._scopes:
            scope.cancel()
        return len(self._scopes)


def _read_only() -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(errno.EROFS)


class FuseOperations(pyfuse3.Operations):
    """Translates between pyfuse3's types and ``RefFilesystem``; holds no state of its own
    (the requests in flight are kept by ``requests``, for shutdown).

    Two operations answer ``ENOSYS``, which tells the kernel never to send them again on
    this connection: ``flush`` (nothing to flush on a read-only mount: one round trip less
    per ``close``) and, unless ``xattrs``, ``getxattr``/``listxattr``. The kernel does not
    cache extended attributes, so ``ls -l`` would otherwise ask the daemon for
    ``security.selinux`` and ``system.posix_acl_access`` of every file it lists.
    """

    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(
        self,
        filesystem: RefFilesystem,
        *,
        timeout: float,
        xattrs: bool = False,
        requests: InFlight | None = None,
    ) -> None:
        super().__init__()
        self._fs = filesystem
        self._timeout = timeout
        self._xattrs = xattrs
        self._requests = requests if requests is not None else InFlight()

    def _entry(self, attributes: Attributes) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.generation = 0
        entry.entry_timeout = self._timeout
        entry.attr_timeout = self._timeout
        entry.st_rdev = 0
        entry.st_blksize = BLOCK_SIZE
        entry.st_ino = pyfuse3.InodeT(attributes.inode)
        entry.st_mode = pyfuse3.ModeT(attributes.mode)
        entry.st_nlink = attributes.nlink
        entry.st_uid = attributes.uid
        entry.st_gid = attributes.gid
        entry.st_size = attributes.size
        entry.st_blocks = attributes.blocks
        entry.st_atime_ns = attributes.mtime_ns
        entry.st_mtime_ns = attributes.mtime_ns
        entry.st_ctime_ns = attributes.mtime_ns
        return entry

    def _negative_entry(self) -> pyfuse3.EntryAttributes:
        """An entry with inode 0: the kernel caches the name's absence for the timeout."""
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = pyfuse3.InodeT(0)
        entry.entry_timeout = self._timeout
        return entry

    # ------------------------------------------------------------------ reading

    @_boundary
    async def lookup(
        self, parent_inode: pyfuse3.InodeT, name: pyfuse3.FileNameT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        attributes = await self._fs.lookup(Inode(parent_inode), os.fsdecode(name))
        if attributes is None:
            return self._negative_entry()
        return self._entry(attributes)

    @_boundary
    async def forget(self, inode_list: Sequence[tuple[pyfuse3.InodeT, int]]) -> None:
        return None  # inodes are computed, not allocated: nothing to release

    @_boundary
    async def getattr(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        return self._entry(await self._fs.getattr(Inode(inode)))

    @_boundary
    async def opendir(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileHandleT:
        await self._fs.opendir(Inode(inode))
        return pyfuse3.FileHandleT(inode)  # directory handles are the directory's inode

    @_boundary
    async def readdir(
        self, fh: pyfuse3.FileHandleT, start_id: int, token: pyfuse3.ReaddirToken
    ) -> None:
        inode = Inode(fh)
        position = start_id
        # readdir_reply copies the attributes at once: one object for files and one for
        # directories serve every entry, and only inode and size change from one to the next
        files = self._entry(self._fs.listing_attributes(is_dir=False))
        directories = self._entry(self._fs.listing_attributes(is_dir=True))
        unresolved = self._entry(self._fs.listing_attributes(is_dir=False))
        unresolved.entry_timeout = unresolved.attr_timeout = 0  # asked again at the next stat
        reply = pyfuse3.readdir_reply
        while True:
            batch = await self._fs.readdir(inode, position)
            if not batch:
                return
            for taken, (name, node, size, next_position) in enumerate(batch):
                if size == DIRECTORY:
                    entry = directories
                elif size == UNRESOLVED:
                    entry = unresolved
                else:
                    entry = files
                    entry.st_size = size
                    entry.st_blocks = (size + 511) // 512  # Attributes.blocks, inlined
                entry.st_ino = pyfuse3.InodeT(node)
                kernel_name = name if UTF8_NAMES else os.fsencode(name.decode("utf-8"))
                if not reply(token, pyfuse3.FileNameT(kernel_name), entry, next_position):
                    self._fs.keep_unlisted(inode, position, batch[taken:])
                    return
                position = next_position

    @_boundary
    async def releasedir(self, fh: pyfuse3.FileHandleT) -> None:
        return None

    @_boundary
    async def open(
        self, inode: pyfuse3.InodeT, flags: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        handle = await self._fs.open(Inode(inode), flags)
        if self._fs.is_virtual(Inode(inode)):
            return pyfuse3.FileInfo(
                fh=pyfuse3.FileHandleT(handle), direct_io=True, keep_cache=False
            )
        return pyfuse3.FileInfo(fh=pyfuse3.FileHandleT(handle), keep_cache=True)

    @_boundary
    async def read(self, fh: pyfuse3.FileHandleT, off: int, size: int) -> bytes:
        # pyfuse3 sends any buffer (its stub says bytes): a view of cached bytes is not copied
        return cast(bytes, await self._fs.read(FileHandle(fh), off, size))

    @_boundary
    async def flush(self, fh: pyfuse3.FileHandleT) -> None:
        raise pyfuse3.FUSEError(errno.ENOSYS)  # never sent again: see the class docstring

    @_boundary
    async def release(self, fh: pyfuse3.FileHandleT) -> None:
        self._fs.release(FileHandle(fh))

    @_boundary
    async def getxattr(
        self, inode: pyfuse3.InodeT, name: pyfuse3.XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> bytes:
        if not self._xattrs:
            raise pyfuse3.FUSEError(errno.ENOSYS)  # never sent again: see the class docstring
        return await self._fs.getxattr(Inode(inode), os.fsdecode(name))

    @_boundary
    async def listxattr(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext
    ) -> Sequence[pyfuse3.XAttrNameT]:
        if not self._xattrs:
            raise pyfuse3.FUSEError(errno.ENOSYS)
        names = await self._fs.listxattr(Inode(inode))
        return [pyfuse3.XAttrNameT(os.fsencode(name)) for name in names]

    @_boundary
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        figures = self._fs.statfs()
        data = pyfuse3.StatvfsData()
        data.f_bsize = figures.block_size
        data.f_frsize = figures.block_size
        data.f_blocks = data.f_bfree = data.f_bavail = 0
        data.f_files = figures.files
        data.f_ffree = data.f_favail = 0
        data.f_namemax = figures.name_max
        return data

    @_boundary
    async def access(
        self, inode: pyfuse3.InodeT, mode: pyfuse3.ModeT, ctx: pyfuse3.RequestContext
    ) -> bool:
        await self._fs.getattr(Inode(inode))
        if mode & os.W_OK:
            raise _read_only()
        return True

    # ------------------------------------------------------------------ refused

    @_boundary
    async def setattr(
        self,
        inode: pyfuse3.InodeT,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: pyfuse3.FileHandleT | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        raise _read_only()

    @_boundary
    async def write(self, fh: pyfuse3.FileHandleT, off: int, buf: bytes) -> int:
        raise _read_only()

    @_boundary
    async def create(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        mode: pyfuse3.ModeT,
        flags: pyfuse3.FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        raise _read_only()

    @_boundary
    async def mknod(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        mode: pyfuse3.ModeT,
        rdev: int,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        raise _read_only()

    @_boundary
    async def mkdir(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        mode: pyfuse3.ModeT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        raise _read_only()

    @_boundary
    async def symlink(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        target: pyfuse3.FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        raise _read_only()

    @_boundary
    async def link(
        self,
        inode: pyfuse3.InodeT,
        new_parent_inode: pyfuse3.InodeT,
        new_name: pyfuse3.FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        raise _read_only()

    @_boundary
    async def unlink(
        self, parent_inode: pyfuse3.InodeT, name: pyfuse3.FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        raise _read_only()

    @_boundary
    async def rmdir(
        self, parent_inode: pyfuse3.InodeT, name: pyfuse3.FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        raise _read_only()

    @_boundary
    async def rename(
        self,
        parent_inode_old: pyfuse3.InodeT,
        name_old: pyfuse3.FileNameT,
        parent_inode_new: pyfuse3.InodeT,
        name_new: pyfuse3.FileNameT,
        flags: pyfuse3.FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        raise _read_only()

    @_boundary
    async def setxattr(
        self,
        inode: pyfuse3.InodeT,
        name: pyfuse3.XAttrNameT,
        value: bytes,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        raise _read_only()

    @_boundary
    async def removexattr(
        self, inode: pyfuse3.InodeT, name: pyfuse3.XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        raise _read_only()

    @_boundary
    async def readlink(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileNameT:
        raise pyfuse3.FUSEError(errno.EINVAL)
