"""Neighbour prefetch: when a directory's files are opened in order, the byte ranges of the
files that follow in the same object are handed to the reader to fetch ahead in runs.

Chunk references of kerchunk sets of netCDF, HDF5 or TIFF files often lie back to back in
one object, and zarr readers read a directory's chunks one file at a time. An in-order open
(the file starts in the same object at most ``neighbour_gap`` bytes after the end of the
one opened just before it in that directory, which was read since) looks the next ones up
in the directory's sibling index (its range references per object, sorted by offset; built
once, in a worker thread for large directories) and asks ``ReadPath.prefetch_neighbours``
for the chain; the reader's answer sets the window asked for next (``scale``). Runs on
the event loop thread (docs/concurrency.md); the index is built in a worker thread.

Chunks that are each an object of their own (an Icechunk array's, read one ``store.get``
each) have no neighbours in their object: when a directory's chunk files are opened in
chunk order (the one opened just before was the previous present chunk, in another object),
the chunks that follow go to ``ReadPath.prefetch_objects``, which fetches each ahead in a
request of its own (``ChunkChains``).
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass

import trio

from refmount.lru import LRU
from refmount.model import Inode, Range, Reference, ReferenceSet
from refmount.namespace.nodes import GridChunk
from refmount.namespace.tree import Tree
from refmount.read.path import ReadPath
from refmount.store.options import is_plain_local

SIBLING_INDEX_LIMIT = 250_000
"""Directories with more entries get no neighbour prefetch: their index (16 bytes an entry, so
up to 4 MB each, and 8 are kept) and building it (in a worker thread, about 0.6 s for 200 000
JSON keys) would cost too much."""

INLINE_INDEX_LIMIT = 4096
"""Directories up to this many entries are indexed on the event loop (a few milliseconds at
most); larger ones in a worker thread."""

SIBLING_INDEXES = 8
"""How many directories' sibling indexes are kept (least recently used go)."""

OPEN_HISTORY = 1024
"""How many directories remember their last opened file (to spot in-order opens)."""

CHAINS = 64
"""How many directories' chains of chunk objects are followed (least recently used go)."""


@dataclass(slots=True)
class _Siblings:
    """The range references of one object in a directory, sorted by offset.

    Opens of references starting in ``[quiet_from, quiet_until)`` need not ask the reader:
    its last answer said enough is ahead of them (an in-order reader walks the spans once
    per run, not once per file). ``scale`` is the prefetch window to ask for next, in units
    of its first size, as the reader last said.
    """

    offsets: array[int]
    ends: array[int]
    quiet_from: int = 0
    quiet_until: int = 0
    scale: int = 1


_SiblingIndex = dict[str, _Siblings]


@dataclass(slots=True)
class Opening:
    """Where an open file's range ends in its object, which chunk of its directory's grid it
    is (None for a stored key), and whether it was read since opened."""

    url: str
    end: int
    chunk: int | None = None
    asked: bool = False


@dataclass(slots=True)
class _Chain:
    """A directory whose chunk objects are read in order: opens of chunks in
    ``[quiet_from, quiet_until)`` need not ask the reader (enough is ahead of them), and the
    window's ``scale`` to ask for next."""

    quiet_from: int = 0
    quiet_until: int = 0
    scale: int = 1


class Neighbours:
    """Spots in-order opens per directory and asks the reader to fetch the files ahead.

    ``notice_open`` is called for every open; the ``Opening`` it returns is marked
    ``asked`` by the filesystem when a read of that file comes (only files whose reads reach
    the daemon count: a second pass the kernel answers from its page cache asks nothing).
    """

    def __init__(
        self,
        tree: Tree,
        references: ReferenceSet,
        reader: ReadPath,
        threads: trio.CapacityLimiter,
    ) -> None:
        self._tree = tree
        self._references = references
        self._reader = reader
        self._threads = threads
        self._last_open: LRU[Inode, Opening] = LRU(OPEN_HISTORY)
        self._sibling_indexes: LRU[Inode, _SiblingIndex | None] = LRU(SIBLING_INDEXES)
        self._indexing: set[Inode] = set()
        self._chains = ChunkChains(tree, references, reader)

    def notice_open(self, inode: Inode, reference: Reference) -> Opening | None:
        """Prefetch the following references of the object when a directory is read in order.

        In order: the file opened starts in the same object as the one opened just before it
        in the same directory, at most ``neighbour_gap`` bytes after its end, and a read of
        that one was asked for since it was opened (the read may still be waiting: parallel
        readers open the next files before the previous reads are answered). Files the kernel
        answers from its page cache do not count: it sends no read (a second pass needs
        nothing fetched).
        Local files are left out: a request costs them little, and one large read would only
        serialize parallel ones. The directory's sibling index (its range references per
        object, sorted by offset) is built once, on the first in-order open (in a worker
        thread for large directories); the chain of references from this one on goes to
        ``Reader.prefetch_neighbours``. Returns the opening to mark when a read comes.
        """
        config = self._reader.config
        if (
            not self._reader.can_prefetch
            or config.neighbour_bytes <= 0
            or not isinstance(reference, Range)
            or not 0 < reference.length <= config.whole_fetch_limit
            or is_plain_local(reference.url)
        ):
            return None
        parent = self._tree.parent(inode)
        previous = self._last_open.pop(parent)
        source = self._tree.file_source(inode)
        chunk = source if isinstance(source, GridChunk) else None
        opening = Opening(
            reference.url,
            reference.offset + reference.length,
            None if chunk is None else chunk.index,
        )
        self._last_open.put(parent, opening)
        if previous is None or not previous.asked:
            return opening
        if previous.url == reference.url:
            if previous.end <= reference.offset <= previous.end + config.neighbour_gap:
                self._prefetch_from(parent, reference)
        elif chunk is not None and self._chains.follows(chunk, previous.chunk):
            self._chains.prefetch_from(parent, chunk)
        return opening

    def _prefetch_from(self, parent: Inode, reference: Range) -> None:
        """Prefetch after ``reference`` once its directory's sibling index is at hand."""
        if self._sibling_indexes.touch(parent):
            self._prefetch_after(parent, reference)
        elif parent not in self._indexing:
            index = self._sibling_index(parent, INLINE_INDEX_LIMIT)
            if index is not None:
                self._keep_index(parent, index)
                self._prefetch_after(parent, reference)
                return
            self._indexing.add(parent)
            self._reader.spawn(
                lambda: self._index_then_prefetch(parent, reference), self._tree.path(parent)
            )

    async def _index_then_prefetch(self, parent: Inode, reference: Range) -> None:
        try:
            index = await trio.to_thread.run_sync(
                self._sibling_index, parent, SIBLING_INDEX_LIMIT, limiter=self._threads
            )
        finally:
            self._indexing.discard(parent)
        self._keep_index(parent, index)
        self._prefetch_after(parent, reference)

    def _keep_index(self, parent: Inode, index: _SiblingIndex | None) -> None:
        self._sibling_indexes.put(parent, index)

    def _prefetch_after(self, parent: Inode, reference: Range) -> None:
        """Hand the chain of references that follow ``reference`` in its object to the reader.

        Up to twice the window's count: those already ahead, then a full run to fetch. The
        reader says the window to ask for next (it grows with each run requested).
        """
        index = self._sibling_indexes.peek(parent)
        siblings = None if index is None else index.get(reference.url)
        if siblings is None or siblings.quiet_from <= reference.offset < siblings.quiet_until:
            return
        config = self._reader.config
        most = 2 * config.neighbour_count * siblings.scale
        spans: list[tuple[int, int]] = []
        end = reference.offset
        position = bisect.bisect_left(siblings.offsets, reference.offset)
        while position < len(siblings.offsets) and len(spans) < most:
            start, stop = siblings.offsets[position], siblings.ends[position]
            position += 1
            if start > end + (config.neighbour_gap if spans else 0):
                break
            if start >= end:  # overlapping or repeated references are left out
                spans.append((start, stop))
                end = stop
        prefetch = self._reader.prefetch_neighbours(reference.url, spans, siblings.scale)
        siblings.quiet_from, siblings.quiet_until = reference.offset, prefetch.resume_at
        siblings.scale = prefetch.scale

    def _sibling_index(self, parent: Inode, most: int) -> _SiblingIndex | None:
        """Return a directory's range references per object (safe in a worker thread).

        Only references known without I/O are indexed (explicit keys, chunks of loaded
        records); None when the directory has more than ``most`` entries.
        """
        limit = self._reader.config.whole_fetch_limit
        rows: dict[str, list[tuple[int, int]]] = {}
        prefix = self._tree.path(parent)
        prefix = prefix + "/" if prefix else ""
        chunks = self._tree.leaf_chunks(parent)
        if chunks is not None:  # the chunk files in bulk, the entries before them one by one
            if chunks.position + chunks.total > most:
                return None
            found = self._references.chunk_ranges(
                chunks.grid, chunks.first, chunks.first + chunks.total
            )
            for url, ranges in found.items():
                rows[url] = [
                    (offset, offset + length)
                    for offset, length in zip(ranges.offsets, ranges.lengths, strict=True)
                    if length <= limit
                ]
        for count, (entry, _) in enumerate(self._tree.children(parent)):
            if count >= most:
                return None
            if chunks is not None and count >= chunks.position:
                break  # the chunk files, taken above; what comes before is stored keys
            if entry.is_dir:
                continue
            reference = self._references.get(prefix + entry.name)  # the key, not rebuilt
            if isinstance(reference, Range) and 0 < reference.length <= limit:
                rows.setdefault(reference.url, []).append(
                    (reference.offset, reference.offset + reference.length)
                )
        index: _SiblingIndex = {}
        for url, spans in rows.items():
            spans.sort()
            index[url] = _Siblings(
                array("q", (s for s, _ in spans)), array("q", (e for _, e in spans))
            )
        return index


class ChunkChains:
    """Fetches ahead the chunk files that follow one, in directories whose chunks are each an
    object of their own and are opened in chunk order."""

    def __init__(self, tree: Tree, references: ReferenceSet, reader: ReadPath) -> None:
        self._tree = tree
        self._references = references
        self._reader = reader
        self._chains: LRU[Inode, _Chain] = LRU(CHAINS)

    def follows(self, chunk: GridChunk, previous: int | None) -> bool:
        """Return True when ``previous`` (the chunk opened just before in the same directory)
        is the present chunk right before ``chunk``: no present chunk lies between them.
        Without I/O: chunks whose presence is not known yet count as present."""
        if previous is None or previous >= chunk.index:
            return False
        between = self._references.skip_absent(chunk.grid, previous + 1, chunk.index, load=False)
        return between == chunk.index

    def prefetch_from(self, parent: Inode, chunk: GridChunk) -> None:
        """Hand the chunks of ``parent`` from ``chunk`` on to ``ReadPath.prefetch_objects``.

        Up to twice the window's count: those already ahead, then a full run to fetch. The
        chain stops at a chunk not loaded yet (its reference would need I/O) and leaves out
        absent chunks and those that are not ranges of up to ``whole_fetch_limit`` (inline
        chunks, whole files, plain local files).
        """
        chain = self._chains.get(parent)
        if chain is None:
            chain = _Chain()
            self._chains.put(parent, chain)
        if chain.quiet_from <= chunk.index < chain.quiet_until:
            return
        leaf = self._tree.leaf_chunks(parent)
        if leaf is None:
            return
        config = self._reader.config
        most = 2 * config.neighbour_count * chain.scale
        indices, spans = self._chain(chunk, leaf.first + leaf.total, most)
        prefetch = self._reader.prefetch_objects(spans, chain.scale)
        chain.quiet_from = chunk.index
        if prefetch.resume_at < len(indices):
            chain.quiet_until = indices[prefetch.resume_at]
        else:
            chain.quiet_until = indices[-1] + 1 if indices else chunk.index
        chain.scale = prefetch.scale

    def _chain(
        self, chunk: GridChunk, stop: int, most: int
    ) -> tuple[list[int], list[tuple[str, int, int]]]:
        """Return the chunk indices from ``chunk`` on (before ``stop``) and their ranges: of
        the first ``most`` present chunks at most (those left out count too: the walk is
        bounded whatever the directory holds)."""
        references = self._references
        limit = self._reader.config.whole_fetch_limit
        indices: list[int] = []
        spans: list[tuple[str, int, int]] = []
        index = chunk.index
        for _ in range(most):
            index = references.skip_absent(chunk.grid, index, stop, load=False)
            if index >= stop or not references.chunk_is_loaded(chunk.grid, index):
                break
            reference = references.chunk(chunk.grid, index)
            if (
                isinstance(reference, Range)
                and 0 < reference.length <= limit
                and not is_plain_local(reference.url)
            ):
                indices.append(index)
                spans.append((reference.url, reference.offset, reference.offset + reference.length))
            index += 1
        return indices, spans
