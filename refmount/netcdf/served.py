"""The netCDF file as served: laid out once (at the first question about it, or at mount),
its metadata read from memory and its chunk regions read through the mount's read path.

The layout is built in a worker thread (h5py is CPU-bound, and a Parquet set's chunks may
need record files read), once: concurrent first questions share the build, and a build that
failed is tried again by the next question. A read that spans metadata and chunks is
assembled piece by piece; a chunk's bytes come from ``ReadPath.read`` under the chunk's own
key, so the cache, single-flight, block prefetch, retries and the decode view apply as they
do to the chunk's file in the tree. A chunk that comes back shorter than its place in the
file is an error, never padding.

A read that starts a chunk asks ``ReadPath.prefetch_neighbours`` for the chunks that follow
it in the file when their references follow it in the same remote object (the rules of the
tree's neighbour prefetch, ``fuse.neighbours``: ranges up to ``whole_fetch_limit``, at most
``neighbour_gap`` apart, local files left out): a reader going through the file in order
meets them fetched, in runs of coalesced requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import trio

from refmount.errors import ReferenceFormatError, ShortReadError, TargetError, TargetReadError
from refmount.flight import SingleFlight
from refmount.model import Inline, Range, Reference, ReferenceSet
from refmount.netcdf.chunks import Chunks, WholeFileChunk
from refmount.netcdf.layout import Layout, lay_out
from refmount.netcdf.naming import SUFFIX
from refmount.netcdf.schema import Schema, schema_of
from refmount.read.path import ReadPath
from refmount.store.options import is_plain_local

log = logging.getLogger(__name__)


class LayoutError(TargetError):
    """The file could not be laid out (a chunk's record file failed, a whole-file chunk):
    ``EIO`` for the file, naming the reference set."""


class NetcdfFile:
    """One netCDF file of a reference set: its name in the root, size and bytes.

    ``build`` makes the layout (``lay_out`` over the set's chunks unless given: tests pass
    their own); ``layout`` is one already built (``--netcdf-eager``). The chunks of
    ``decoded`` variables are read through ``decoding`` (the decoded view's read path).
    """

    def __init__(
        self,
        name: str,
        schema: Schema,
        chunks: Chunks,
        reader: ReadPath,
        *,
        source: str,
        layout: Layout | None = None,
        build: Callable[[], Layout] | None = None,
        decoding: ReadPath | None = None,
    ) -> None:
        self._name = name
        self._decoding = decoding
        self._schema = schema
        self._chunks = chunks
        self._reader = reader
        self._source = source
        self._layout = layout
        self._build = build or (lambda: build_layout(schema, chunks, source))
        self._builds: SingleFlight[Layout] = SingleFlight()
        self._threads = trio.CapacityLimiter(1)
        self._scale = 1
        self._quiet_until = -1
        """The file offset before which a chunk's start asks for no neighbours (what the
        last prefetch left ahead is still ahead)."""

    @property
    def name(self) -> str:
        """Return the file's name in the root."""
        return self._name

    def size_now(self) -> int | None:
        """Return the file's size if it is laid out, else None (a listing does not wait)."""
        return None if self._layout is None else self._layout.size

    async def size(self) -> int:
        """Return the file's exact size (laying it out first if needed)."""
        return (await self.layout()).size

    async def layout(self) -> Layout:
        """Return the layout, built now in a worker thread if it was not."""
        if self._layout is None:
            self._layout = await self._builds.run("layout", self._run_build, share_errors=False)
        return self._layout

    async def _run_build(self) -> Layout:
        return await trio.to_thread.run_sync(self._build, limiter=self._threads)

    async def read(self, offset: int, size: int) -> bytes | memoryview:
        """Return ``size`` bytes at ``offset``, fewer only at the end of the file."""
        layout = await self.layout()
        end = min(offset + max(size, 0), layout.size)
        if end <= offset:
            return b""
        starts = layout.starts
        first = max(int(np.searchsorted(starts, offset, side="right")) - 1, 0)
        if first < len(starts) and starts[first] <= offset:
            stop = int(starts[first]) + int(layout.lengths[first])
            if end <= stop:  # within one chunk (most reads): its bytes as the reader has them
                return await self._chunk_bytes(
                    layout, first, offset - int(starts[first]), end - offset
                )
        out = layout.pages.read(offset, end)
        for row in range(first, len(starts)):
            start = int(starts[row])
            if start >= end:
                break
            stop = start + int(layout.lengths[row])
            if stop <= offset:
                continue
            lo, hi = max(start, offset), min(stop, end)
            data = await self._chunk_bytes(layout, row, lo - start, hi - lo)
            out[lo - offset : hi - offset] = data
        return memoryview(out)

    async def _chunk_bytes(
        self, layout: Layout, row: int, within: int, count: int
    ) -> bytes | memoryview:
        variable = self._schema.variables[int(layout.variables[row])]
        index = int(layout.indices[row])
        key = self._chunks.key(variable, index)
        known, reference = self._chunks.chunk_now(variable, index)
        if not known:
            reference = await trio.to_thread.run_sync(
                self._chunks.chunk, variable, index, limiter=self._threads
            )
        if reference is None:  # laid out, so it existed: the set cannot change
            raise TargetReadError(self._source, f"chunk {key!r} has no reference").for_key(key)
        if within == 0:
            self._prefetch_after(layout, row, reference)
        reader = self._decoding if variable.decoded and self._decoding else self._reader
        try:
            data = await reader.read(key, reference, within, count)
        except TargetError as error:
            raise error.for_key(key) from None
        if len(data) != count:
            raise ShortReadError(_url(reference), within + count, within + len(data)).for_key(key)
        return data

    def _prefetch_after(self, layout: Layout, row: int, reference: Reference) -> None:
        """Ask for the chunks after ``row`` in the file whose references follow this one in
        its object (known without I/O), fetched ahead together."""
        reader = self._reader
        config = reader.config
        start = int(layout.starts[row])
        if (
            start < self._quiet_until
            or not reader.can_prefetch
            or config.neighbour_bytes <= 0
            or not isinstance(reference, Range)
            or not 0 < reference.length <= config.whole_fetch_limit
            or is_plain_local(reference.url)
        ):
            return
        spans = [(reference.offset, reference.offset + reference.length)]
        starts: list[int] = [start]
        for following in range(row + 1, min(row + 1 + config.neighbour_count, len(layout.starts))):
            variable = self._schema.variables[int(layout.variables[following])]
            known, neighbour = self._chunks.chunk_now(variable, int(layout.indices[following]))
            if (
                not known
                or not isinstance(neighbour, Range)
                or neighbour.url != reference.url
                or not 0 < neighbour.length <= config.whole_fetch_limit
                or not spans[-1][1] <= neighbour.offset <= spans[-1][1] + config.neighbour_gap
            ):
                break
            spans.append((neighbour.offset, neighbour.offset + neighbour.length))
            starts.append(int(layout.starts[following]))
        if len(spans) < 2:
            return
        prefetch = reader.prefetch_neighbours(reference.url, spans, self._scale)
        self._scale = prefetch.scale
        self._quiet_until = starts[-1] + 1  # the whole chain stays ahead, unless:
        for file_start, (target_start, _) in zip(starts, spans, strict=True):
            if target_start >= prefetch.resume_at:
                self._quiet_until = file_start
                break


def _url(reference: Reference) -> str:
    return "inline" if isinstance(reference, Inline) else reference.url


def build_layout(schema: Schema, chunks: Chunks, source: str) -> Layout:
    """Lay out the file of ``schema`` (blocking); a failure is one ``LayoutError``."""
    try:
        layout = lay_out(schema, chunks.lengths)
    except (WholeFileChunk, ReferenceFormatError, OSError, RuntimeError) as error:
        raise LayoutError(source, f"cannot lay out the netCDF file: {error}") from error
    log.info(
        "netCDF file laid out: %d bytes, %d chunks, %d bytes of metadata held",
        layout.size,
        len(layout.starts),
        layout.nbytes,
    )
    return layout


BYTES_PER_CHUNK = 128
"""What the layout may hold per chunk (its table row and its share of HDF5's chunk index,
some 90 bytes): a set whose chunks could hold more than the cache budget is refused."""


@dataclass(frozen=True, slots=True)
class Decoding:
    """The decoded view of the set and its read path, for the arrays whose codecs have no
    HDF5 filter (without ``--decode``; with it, the set and reader given are the view)."""

    references: ReferenceSet
    reader: ReadPath


def open_netcdf(
    name: str,
    references: ReferenceSet,
    reader: ReadPath,
    *,
    budget: int,
    eager: bool,
    decoding: Decoding | None = None,
) -> NetcdfFile:
    """Return the netCDF file ``name`` of ``references`` read through ``reader`` (and the
    arrays only ``decoding`` decodes through it): its schema made and its warnings logged
    now, its layout built now with ``eager`` (blocking: the daemon's loop is not running
    yet) or at the first question.

    Raises ``ReferenceFormatError`` for malformed metadata, and with ``eager``
    ``LayoutError`` for a layout that fails.
    """
    view = None if decoding is None else decoding.references
    schema = schema_of(references, name.removesuffix(SUFFIX) or name, view)
    for left in schema.left_out:
        log.warning("--netcdf: %s", left.describe())
    for line in schema.renamed:
        log.warning("--netcdf: %s", line)
    chunks = Chunks(references)
    count = sum(variable.grid.count for variable in schema.variables)
    source = references.source

    def build() -> Layout:
        if count * BYTES_PER_CHUNK > budget:
            raise LayoutError(
                source,
                f"its {count:,} chunks could need {count * BYTES_PER_CHUNK:,} bytes of "
                f"layout, over the cache budget ({budget:,} bytes; --cache-size)",
            )
        return build_layout(schema, chunks, source)

    layout = build() if eager else None
    return NetcdfFile(
        name,
        schema,
        chunks,
        reader,
        source=source,
        layout=layout,
        build=build,
        decoding=None if decoding is None else decoding.reader,
    )
