"""FUSE semantics without pyfuse3: lookup, attributes, listing, open, read and xattrs by inode."""

from __future__ import annotations

import errno
import functools
import itertools
import logging
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple

import trio

from refmount.errors import (
    FilesystemError,
    NoAttributeError,
    NotFoundError,
    ReadOnlyError,
    TargetAccessError,
    TargetError,
    TargetReadError,
)
from refmount.fuse.listing import UNRESOLVED, ListedEntry, Listing
from refmount.fuse.neighbours import Neighbours, Opening
from refmount.fuse.stats import STATS_FILE, Statistics, encode_snapshot
from refmount.fuse.virtual import ServedFile, VirtualFile, VirtualFiles
from refmount.lru import LRU
from refmount.model import (
    ROOT_INODE,
    FileHandle,
    Inline,
    Inode,
    Range,
    Reference,
    ReferenceSet,
    Whole,
    reference_kind,
)
from refmount.names import NAME_MAX
from refmount.namespace.nodes import MAX_INODE, GridChunk, StaticFile
from refmount.namespace.tree import Tree
from refmount.read.path import ReadPath

log = logging.getLogger(__name__)

BLOCK_SIZE = 128 * 1024
"""``st_blksize``: the I/O size that ``cp`` and friends use."""

STATS_INODE = Inode(MAX_INODE + 1)
"""The inode of the statistics file ``STATS_FILE`` (beyond every number the tree gives out)."""

SERVED_INODE = Inode(MAX_INODE + 2)
"""The inode of the root's served file (``--netcdf``)."""

SERVED_POSITION = 2**62
"""The ``readdir`` position after the served file, listed after the root's own entries."""

XATTR_PREFIX = "user.refmount."
XATTRS = ("kind", "url", "offset", "length")
"""The attributes every file has (``user.refmount.<name>``), listed by ``listxattr``."""

RECENT_REFERENCES = 1024
"""References of the files last looked up, kept so that the open that follows a lookup (and
the reads' size checks) do not work them out again; least recently used dropped first."""


@dataclass(frozen=True, slots=True)
class Owner:
    """Who owns every node, and the permission bits files and directories get."""

    uid: int
    gid: int
    file_mode: int = 0o444
    dir_mode: int = 0o555

    @classmethod
    def current(
        cls, umask: int | None = None, *, uid: int | None = None, gid: int | None = None
    ) -> Owner:
        """Return the owner of the running process, or ``uid``/``gid`` where given, with
        ``umask`` taken away from the modes (``0444`` files, ``0555`` directories)."""
        mask = umask or 0
        return cls(
            os.getuid() if uid is None else uid,
            os.getgid() if gid is None else gid,
            0o444 & ~mask,
            0o555 & ~mask,
        )


class Attributes(NamedTuple):
    """What ``stat`` shows for one node (a named tuple: listings build one per name)."""

    inode: Inode
    is_dir: bool
    size: int
    mode: int
    uid: int
    gid: int
    mtime_ns: int

    @property
    def nlink(self) -> int:
        """Return the link count (2 for directories, 1 for files)."""
        return 2 if self.is_dir else 1

    @property
    def blocks(self) -> int:
        """Return the number of 512-byte blocks the size amounts to."""
        return (self.size + 511) // 512


@dataclass(frozen=True, slots=True)
class FilesystemStatistics:
    """What ``statfs`` shows."""

    block_size: int
    files: int
    name_max: int


@dataclass(frozen=True, slots=True)
class OpenFile:
    """An open file: its inode, its key, the reference its bytes come from, when it may
    start neighbour prefetch its ``Opening``, and whether it is a virtual file (its
    contents, made at open, are the inline reference)."""

    inode: Inode
    key: str
    reference: Reference
    opening: Opening | None = None
    virtual: bool = False
    served: bool = False


class RefFilesystem:
    """The read-only filesystem of one reference set, shaped like FUSE's low-level API.

    Every method raises ``RefmountError`` subclasses only; the FUSE adapter turns them into
    errnos. Runs on the event loop thread; blocking work (Parquet record loads) goes to
    worker threads.

    ``statistics`` (a new ``Statistics`` unless given) is what the FUSE boundary records every
    request in; the root's unlisted file ``STATS_FILE`` holds a JSON snapshot of it and of
    the reader's counters, taken when the file is opened.

    ``target_problem``, when given, says why a target URL may not be read (None: it may).
    Explicit keys are checked when the set is loaded; chunks of a Parquet set are loaded
    lazily, so a chunk whose target is refused cannot be opened (``EACCES``).

    ``about`` holds facts about the whole mount (an Icechunk mount's ``snapshot``): the
    root's extended attributes ``user.refmount.<name>``, and part of the statistics.
    ``disk_cache``, when given, returns the disk cache's counters for the statistics (None:
    the mount has none).
    ``served``, when given, is one more file of the root, listed after the set's entries
    (``--netcdf``); a key of the set with its name wins.
    """

    def __init__(
        self,
        tree: Tree,
        references: ReferenceSet,
        reader: ReadPath,
        *,
        owner: Owner,
        mtime_ns: int,
        statistics: Statistics | None = None,
        target_problem: Callable[[str], str | None] | None = None,
        about: Mapping[str, str] | None = None,
        disk_cache: Callable[[], Mapping[str, int] | None] | None = None,
        served: ServedFile | None = None,
    ) -> None:
        self._tree = tree
        self._served = served
        self._about = dict(about or {})
        self._disk_cache = disk_cache
        self._references = references
        self._reader = reader
        self._owner = owner
        self._file_mode = stat.S_IFREG | owner.file_mode
        self._dir_mode = stat.S_IFDIR | owner.dir_mode
        self._mtime_ns = mtime_ns
        self._open: dict[FileHandle, OpenFile] = {}
        self._handles = itertools.count(1)
        self._record_threads = trio.CapacityLimiter(4)
        self._statistics = Statistics() if statistics is None else statistics
        self._virtual = VirtualFiles(
            [VirtualFile(STATS_INODE, STATS_FILE, lambda: encode_snapshot(self.snapshot()))]
        )
        self._target_problem = target_problem
        self._problems: dict[str, str | None] = {}
        self._recent_references: LRU[Inode, tuple[Reference, str | None]] = LRU(RECENT_REFERENCES)
        self._neighbours = Neighbours(tree, references, reader, self._record_threads)
        self._listing = Listing(
            tree, references, reader, self._record_threads, self._listed_file_size
        )

    # ------------------------------------------------------------------ names

    async def lookup(self, parent: Inode, name: str) -> Attributes | None:
        """Return the attributes of ``name`` in directory ``parent``, or None if absent."""
        self._require_dir(parent)
        if len(os.fsencode(name)) > NAME_MAX:
            raise FilesystemError(errno.ENAMETOOLONG)
        inode = self._tree.lookup(parent, name)
        if inode is None and self._is_served_name(parent, name):
            return await self.getattr(SERVED_INODE)
        if inode is None:
            virtual = self._virtual.named(name) if parent == ROOT_INODE else None
            return None if virtual is None else self._attributes(virtual.inode, False, 0)
        try:
            return await self.getattr(inode)
        except NotFoundError:
            return None

    async def getattr(self, inode: Inode) -> Attributes:
        """Return a node's attributes."""
        self._require(inode)
        if inode in self._virtual:
            return self._attributes(inode, False, 0)
        if inode == SERVED_INODE and self._served is not None:
            return self._attributes(inode, False, await self._served.size())
        if self._tree.is_dir(inode):
            return self._attributes(inode, True, 0)
        return await self._file_attributes(inode)

    async def _file_attributes(self, inode: Inode) -> Attributes:
        with self._serving(inode):
            reference = await self._reference(inode)
            return self._attributes(inode, False, await self._size(inode, reference))

    async def opendir(self, inode: Inode) -> None:
        """Check that ``inode`` is a directory that can be listed."""
        self._require_dir(inode)

    async def readdir(self, inode: Inode, start: int) -> list[ListedEntry]:
        """Return up to ``READDIR_BATCH`` entries from position ``start``.

        Positions 0 and 1 are ``.`` and ``..``; the directory's own entries follow. Each entry
        carries its name (UTF-8), inode, size (``DIRECTORY`` for a directory; every other
        attribute is ``listing_attributes``') and the position to resume after it. Chunk
        positions whose reference is absent (a null Parquet row) are skipped. An empty list
        means the end.
        """
        self._require_dir(inode)
        served = self._served
        if inode != ROOT_INODE or served is None:
            return await self._listing.readdir(inode, start)
        if start >= SERVED_POSITION:
            return []
        batch = await self._listing.readdir(inode, start)
        if batch or self._tree.lookup(ROOT_INODE, served.name) is not None:
            return batch
        size = served.size_now()
        name = served.name.encode()
        return [(name, SERVED_INODE, UNRESOLVED if size is None else size, SERVED_POSITION)]

    def _is_served_name(self, parent: Inode, name: str) -> bool:
        return parent == ROOT_INODE and self._served is not None and name == self._served.name

    def keep_unlisted(self, inode: Inode, start: int, entries: list[ListedEntry]) -> None:
        """Keep entries ``readdir`` prepared that the kernel had no room for (``Listing``)."""
        self._listing.keep_unlisted(inode, start, entries)

    def listing_attributes(self, is_dir: bool) -> Attributes:
        """Return what every listed directory (or file) shares: all but inode and size."""
        return self._attributes(Inode(0), is_dir, 0)

    async def _listed_file_size(self, inode: Inode) -> int:
        return (await self._file_attributes(inode)).size

    # ------------------------------------------------------------------ files

    async def open(self, inode: Inode, flags: int) -> FileHandle:
        """Open a file for reading; anything that could write is refused with EROFS."""
        self._require(inode)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & (os.O_TRUNC | os.O_APPEND):
            raise ReadOnlyError("the filesystem is read-only")
        virtual = self._virtual.get(inode)
        if virtual is not None:
            return self._open_virtual(virtual)
        if inode == SERVED_INODE and self._served is not None:
            await self._served.size()  # laid out now: reads need it, and its errors are EIO
            handle = FileHandle(next(self._handles))
            self._open[handle] = OpenFile(inode, self._served.name, Inline(b""), served=True)
            return handle
        if self._tree.is_dir(inode):
            raise FilesystemError(errno.EISDIR)
        with self._serving(inode):
            reference, key = await self._reference_and_key(inode)
            if self._target_problem is not None and key is None:
                self._check_target(reference)  # a chunk; a static key was checked at start
            if isinstance(reference, Whole):
                await self._size(inode, reference)  # EIO while the target cannot tell
        handle = FileHandle(next(self._handles))
        self._open[handle] = OpenFile(
            inode,
            key if key is not None else self._tree.path(inode),
            reference,
            self._neighbours.notice_open(inode, reference),
        )
        return handle

    def _open_virtual(self, virtual: VirtualFile) -> FileHandle:
        """Open a virtual file: its contents are made now, and kept while it is open."""
        handle = FileHandle(next(self._handles))
        contents = Inline(virtual.contents())
        self._open[handle] = OpenFile(virtual.inode, virtual.name, contents, virtual=True)
        return handle

    def is_virtual(self, inode: Inode) -> bool:
        """Return True for a virtual file (the statistics file), whose size (0) says nothing
        of its contents: it must be read with direct I/O, past its size, and never cached."""
        return inode in self._virtual

    async def read(self, handle: FileHandle, offset: int, size: int) -> bytes | memoryview:
        """Return ``size`` bytes at ``offset``, fewer only at the end of the file."""
        opened = self._open.get(handle)
        if opened is None:
            raise FilesystemError(errno.EBADF, f"unknown file handle {handle}")
        if opened.virtual:
            assert isinstance(opened.reference, Inline)
            return opened.reference.data[offset : offset + size]
        if opened.served:
            assert self._served is not None
            return await self._served.read(offset, size)  # its errors name the chunk's key
        if opened.opening is not None:
            opened.opening.asked = True
        with _Naming(lambda: opened.key):
            return await self._reader.read(opened.key, opened.reference, offset, size)

    def release(self, handle: FileHandle) -> None:
        """Forget an open file."""
        self._open.pop(handle, None)

    @property
    def open_files(self) -> int:
        """Return how many files are open."""
        return len(self._open)

    # ------------------------------------------------------------------ xattrs

    async def listxattr(self, inode: Inode) -> list[str]:
        """Return the extended attribute names of a node (files, and the root's ``about``)."""
        self._require(inode)
        if inode == ROOT_INODE:
            return [XATTR_PREFIX + name for name in self._about]
        if inode in self._virtual or inode == SERVED_INODE or self._tree.is_dir(inode):
            return []
        return [XATTR_PREFIX + name for name in XATTRS]

    async def getxattr(self, inode: Inode, name: str) -> bytes:
        """Return one of ``user.refmount.{kind,url,offset,length}``, or of the root's."""
        if name not in await self.listxattr(inode):
            raise NoAttributeError(name)
        if inode == ROOT_INODE:
            return self._about[name.removeprefix(XATTR_PREFIX)].encode()
        with self._serving(inode):
            reference = await self._reference(inode)
            field = name.removeprefix(XATTR_PREFIX)
            if field == "kind":
                return reference_kind(reference).encode()
            if field == "url":
                return b"" if isinstance(reference, Inline) else reference.url.encode()
            if field == "offset":
                return str(reference.offset if isinstance(reference, Range) else 0).encode()
            return str(await self._size(inode, reference)).encode()

    # ------------------------------------------------------------------ statistics

    @property
    def statistics(self) -> Statistics:
        """Return the per-operation counters that the FUSE boundary records into."""
        return self._statistics

    def snapshot(self) -> dict[str, Any]:
        """Return the mount's counters as JSON-ready values (what ``refmount stats`` shows)."""
        return self._statistics.snapshot(
            self._reader.statistics(),
            open_files=len(self._open),
            source=self._references.source,
            about=self._about,
            disk_cache=None if self._disk_cache is None else self._disk_cache(),
        )

    # ------------------------------------------------------------------ misc

    def statfs(self) -> FilesystemStatistics:
        """Return filesystem-wide figures."""
        return FilesystemStatistics(BLOCK_SIZE, self._tree.node_count, 255)

    async def _reference(self, inode: Inode) -> Reference:
        return (await self._reference_and_key(inode))[0]

    async def _reference_and_key(self, inode: Inode) -> tuple[Reference, str | None]:
        """Return a file's reference, and its key if working the reference out needed it."""
        recent = self._recent_references.get(inode)
        if recent is not None:
            return recent
        source = self._tree.file_source(inode)
        if isinstance(source, StaticFile):
            reference = self._references.get(source.key)
            key: str | None = source.key
        else:
            reference, key = await self._chunk(inode, source), None
        if reference is None:
            raise NotFoundError(f"inode {inode} has no reference")
        self._recent_references.put(inode, (reference, key))
        return reference, key

    async def _size(self, inode: Inode, reference: Reference) -> int:
        """Return a file's size; its key is only worked out when the target must be asked."""
        known = self._reader.known_size(reference)
        if known is not None:
            return known
        return await self._reader.size(self._tree.path(inode), reference)

    async def _chunk(self, inode: Inode, source: GridChunk) -> Reference | None:
        references = self._references
        if references.chunk_is_loaded(source.grid, source.index):
            return references.chunk(source.grid, source.index)
        try:
            return await trio.to_thread.run_sync(
                references.chunk, source.grid, source.index, limiter=self._record_threads
            )
        except OSError as error:
            raise TargetReadError(
                references.source, f"cannot read the record file that holds this chunk: {error}"
            ) from error

    def _check_target(self, reference: Reference) -> None:
        """Refuse a chunk whose target this mount may not read (asked once per URL)."""
        if isinstance(reference, Inline) or self._target_problem is None:
            return
        url = reference.url
        if url not in self._problems:
            self._problems[url] = self._target_problem(url)
        problem = self._problems[url]
        if problem is not None:
            raise TargetAccessError(url, problem)

    def _serving(self, inode: Inode) -> _Naming:
        """Name the file ``inode`` (its key) in a target error raised inside."""
        return _Naming(functools.partial(self._tree.path, inode))

    def _attributes(self, inode: Inode, is_dir: bool, size: int) -> Attributes:
        owner = self._owner
        mode = self._dir_mode if is_dir else self._file_mode
        return Attributes(inode, is_dir, size, mode, owner.uid, owner.gid, self._mtime_ns)

    def _require(self, inode: Inode) -> None:
        if self._tree.exists(inode) or inode in self._virtual:
            return
        if inode != SERVED_INODE or self._served is None:
            raise NotFoundError(f"no inode {inode}")

    def _require_dir(self, inode: Inode) -> None:
        self._require(inode)
        if inode in self._virtual or inode == SERVED_INODE or not self._tree.is_dir(inode):
            raise FilesystemError(errno.ENOTDIR)


class _Naming:
    """Attach the file's ``key()`` to a ``TargetError`` raised inside: where a failed target
    read learns which file it served (the store and the read path know only the URL). The
    key is only worked out for an error. A class, not a generator: one is made per read."""

    __slots__ = ("_key",)

    def __init__(self, key: Callable[[], str]) -> None:
        self._key = key

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(error, TargetError):
            error.for_key(self._key())  # and the error goes on
