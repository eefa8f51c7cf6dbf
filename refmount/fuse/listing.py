"""Directory listings: ``readdir`` in batches of entries with their sizes, resumable at any
position, without failing because of one target.

A batch holds the entries' names, inodes and sizes (``DIRECTORY`` for a directory); every
other attribute is the same for all (``RefFilesystem.listing_attributes``). Sizes known
without I/O come in bulk (lengths of range references, chunk sizes of loaded records); the
rest are resolved at once, concurrently, and a target that cannot tell its size lists its
entry as ``UNRESOLVED`` (zero timeouts, ``EIO`` on ``getattr`` and ``open``) instead of failing
the listing. A sparse grid of chunks is listed by the record files that exist, not by the
grid (``ReferenceSet.skip_absent``). The kernel rarely takes a whole batch: the rest is kept
for the call that resumes there.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import cast

import trio

from refmount.errors import NotFoundError, RefmountError, TargetError, TargetReadError
from refmount.lru import LRU
from refmount.model import Inode, ReferenceSet
from refmount.namespace.nodes import ChildRun, ChunkSpans
from refmount.namespace.tree import Tree
from refmount.read.path import ReadPath

log = logging.getLogger(__name__)

DOT_ENTRIES = 2
"""``readdir`` positions taken by ``.`` and ``..`` before a directory's own entries."""

DIRECTORY = -2
"""The size a listed entry carries when it is a directory."""

ABSENT = -1
"""A listed chunk's size when its row is null: it is left out (as ``chunk_sizes`` says)."""

UNRESOLVED = -3
"""A listed file's size when its target could not tell it: the entry is listed with size 0,
and the kernel must not keep it (zero entry and attribute timeouts); ``getattr`` asks again."""

ListedEntry = tuple[bytes, Inode, int, int]
"""One listed entry: its name (UTF-8), inode, size (or ``DIRECTORY``), and the position to
resume after it."""

READDIR_BATCH = 256
"""How many entries ``readdir`` prepares at once; one call of the kernel takes several batches
(about 800 entries with their attributes on Linux 6.18)."""

UNLISTED_BATCHES = 64
"""How many prepared but unsent ``readdir`` batches are kept (one per listing in progress)."""


class Listing:
    """Prepares the batches of directory listings of one tree and keeps what was not sent.

    ``file_size`` works out a file's size when nothing at hand tells it (its reference, or
    its target); it raises ``NotFoundError`` for a name with no reference.
    """

    def __init__(
        self,
        tree: Tree,
        references: ReferenceSet,
        reader: ReadPath,
        threads: trio.CapacityLimiter,
        file_size: Callable[[Inode], Awaitable[int]],
    ) -> None:
        self._tree = tree
        self._references = references
        self._reader = reader
        self._threads = threads
        self._file_size = file_size
        self._unlisted: LRU[tuple[Inode, int], list[ListedEntry]] = LRU(UNLISTED_BATCHES)

    async def readdir(self, inode: Inode, start: int) -> list[ListedEntry]:
        """Return the next batch of directory ``inode``'s entries after position ``start``
        (an empty list at the end); see ``RefFilesystem.readdir``."""
        kept = self._unlisted.pop((inode, start))
        if kept is not None:
            return kept
        tree = self._tree
        batch: list[ListedEntry] = []
        for position, (name, dot) in enumerate(
            ((b".", inode), (b"..", tree.parent(inode))), start=1
        ):
            if start < position:
                batch.append((name, dot, DIRECTORY, position))
        position = max(start - DOT_ENTRIES, 0)
        spans = tree.chunk_spans(inode)
        loaded = False  # at most one listing step that reads records once entries are found
        while len(batch) < READDIR_BATCH:
            most = READDIR_BATCH - len(batch)
            if spans is not None and position >= spans.position:
                if batch and loaded:
                    break
                position, loaded = await self._skip_absent(spans, position)
                if spans.span > 1:
                    most = 1  # a directory of chunks: each is listed only if it holds one
            run = tree.child_run(inode, position, most)
            if run is None:
                break
            count = len(run.names)
            sizes = self._grid_sizes(inode, run) if run.grid else self._static_sizes(inode, run)
            resume = run.start + DOT_ENTRIES + 1
            if None not in sizes and ABSENT not in sizes:  # the hot path: all known, all there
                batch.extend(
                    zip(
                        run.names,
                        map(Inode, range(run.first_inode, run.first_inode + count)),
                        cast(list[int], sizes),
                        range(resume, resume + count),
                        strict=True,
                    )
                )
            else:
                await self._resolve_sizes(run, sizes)
                for offset, (name, size) in enumerate(zip(run.names, sizes, strict=True)):
                    if size != ABSENT:
                        child = Inode(run.first_inode + offset)
                        batch.append((name, child, cast(int, size), resume + offset))
            position = run.start + count
        return batch

    async def _resolve_sizes(self, run: ChildRun, sizes: list[int | None]) -> None:
        """Fill in the sizes that only a record or the target can tell, all at once.

        A name without a reference becomes ``ABSENT``; a target that cannot tell its size
        (missing, refused, unreachable) makes its entry ``UNRESOLVED`` with a log line: one
        target never fails the listing of its directory.
        """

        failures: list[RefmountError] = []

        async def resolve(offset: int) -> None:
            child = Inode(run.first_inode + offset)
            try:
                sizes[offset] = await self._file_size(child)
            except NotFoundError:
                sizes[offset] = ABSENT
            except TargetError as error:
                log.info("listed with an unknown size: %s", error)
                sizes[offset] = UNRESOLVED
            except RefmountError as error:  # a malformed row: the listing fails, as it says
                failures.append(error)

        async with trio.open_nursery() as nursery:
            for offset, size in enumerate(sizes):
                if size is None:
                    nursery.start_soon(resolve, offset)
        if failures:
            raise failures[0]

    async def _skip_absent(self, spans: ChunkSpans, position: int) -> tuple[int, bool]:
        """Return the first grid entry from ``position`` on that holds a chunk not known to be
        absent (past the last entry when none does), and whether finding it read records.

        A sparse grid is never walked entry by entry: absent stretches are jumped over with
        ``ReferenceSet.skip_absent``, without I/O when the records involved are loaded, else
        in a worker thread with bounded work (a listing's work follows the record files that
        exist, not the grid)."""
        offset = position - spans.position
        if offset >= spans.total:
            return position, False
        start = spans.first + offset * spans.span
        stop = spans.first + spans.total * spans.span
        references = self._references
        found = references.skip_absent(spans.grid, start, stop, load=False)
        loaded = False
        if found < stop and not references.chunk_is_loaded(spans.grid, found):
            found = await self._in_record_thread(
                lambda: references.skip_absent(spans.grid, found, stop, load=True)
            )
            loaded = True
        return spans.position + (found - spans.first) // spans.span, loaded

    async def _in_record_thread(self, work: Callable[[], int]) -> int:
        """Run listing work that may read record files in a worker thread."""
        try:
            return await trio.to_thread.run_sync(work, limiter=self._threads)
        except OSError as error:
            source = self._references.source
            failure = TargetReadError(source, f"cannot list the record files: {error}")
            raise failure.for_key(source) from error

    def _static_sizes(self, inode: Inode, run: ChildRun) -> list[int | None]:
        """Return the sizes of a run of stored keys' nodes: lengths in bulk, then each
        whole-file reference's size when known (``ABSENT`` for no reference; None: ask)."""
        path = self._tree.path(inode)
        prefix = path + "/" if path else ""
        sizes = self._references.known_lengths(prefix, run.names)
        for offset, is_dir in enumerate(run.dirs):
            if is_dir:
                sizes[offset] = DIRECTORY
            elif sizes[offset] is None:
                reference = self._references.get(prefix + run.names[offset].decode("utf-8"))
                sizes[offset] = ABSENT if reference is None else self._reader.known_size(reference)
        return sizes

    def _grid_sizes(self, inode: Inode, run: ChildRun) -> list[int | None]:
        """Return the sizes of a run of grid nodes: chunk sizes in bulk where loaded."""
        count = len(run.names)
        if run.dirs[0]:
            return [DIRECTORY] * count
        chunks = self._tree.leaf_chunks(inode)
        assert chunks is not None  # grid files are the leaf chunks of their directory
        first = chunks.first + run.start - chunks.position
        sizes: list[int | None] = []
        while len(sizes) < count:
            more = self._references.chunk_sizes(chunks.grid, first + len(sizes), first + count)
            if not more:
                break
            sizes += more
        sizes += [None] * (count - len(sizes))
        for offset, size in enumerate(sizes):
            if size is None:  # not loaded, or the chunk's reference alone tells
                sizes[offset] = self._listed_chunk_size(chunks.grid, first + offset)
        return sizes

    def keep_unlisted(self, inode: Inode, start: int, entries: list[ListedEntry]) -> None:
        """Keep entries ``readdir`` prepared that the kernel had no room for.

        The kernel's buffer rarely ends where a batch of ``READDIR_BATCH`` does; the next
        call, from ``start``, is answered with the rest instead of preparing them again. A
        few directories' worth are kept (entries never change, so a kept batch is right for
        any listing that resumes at ``start``).
        """
        if not entries:
            return
        self._unlisted.put((inode, start), entries)

    def _listed_chunk_size(self, grid: int, index: int) -> int | None:
        """Return a listed chunk's size when it is known without I/O, ``ABSENT`` for a null
        row, or None when it takes a record load or the target."""
        references = self._references
        if not references.chunk_is_loaded(grid, index):
            return None
        reference = references.chunk(grid, index)
        return ABSENT if reference is None else self._reader.known_size(reference)
