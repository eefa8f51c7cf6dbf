"""``ParquetReferenceSet``: the chunk references of a Parquet set, read from record files on
demand; where record files lie and how they are named."""

from __future__ import annotations

import bisect
import functools
import logging
import re
import sys
import threading
from array import array as int_array
from collections.abc import Iterator, Sequence
from typing import Final

from refmount import urls
from refmount.errors import ReferenceFormatError
from refmount.formats.options import LoadOptions
from refmount.formats.parquet.decoding import parse_record, read_schema
from refmount.formats.parquet.record_cache import RecordCache
from refmount.formats.parquet.records import Record
from refmount.model import (
    ChunkGrid,
    ChunkRanges,
    Inline,
    Reference,
    ReferenceSource,
    reference_length,
)

logger = logging.getLogger(__name__)


SKIP_LOADS: Final = 64
"""How many record files one ``skip_absent`` call reads at most (it says where it stopped)."""

_RECORD_FILE: Final = re.compile(r"refs\.(0|[1-9][0-9]{0,19})\.parq")


class ParquetReferenceSet:
    """A ``ReferenceSet`` over a Parquet directory whose chunk rows are read on demand.

    Explicit keys are the ``.zmetadata`` entries plus ``.zmetadata`` itself (the raw file).
    Every array in the metadata becomes a ``ChunkGrid``; chunk ``n`` of array ``a`` is row
    ``n % record_size`` of ``a/refs.{n // record_size}.parq``. Row semantics: ``raw`` not null
    is inline bytes (``base64:`` decoded); otherwise a ``path`` with offset and size both 0, or
    both null, is the whole target, any other ``path`` a byte range (a relative one resolved
    against the record file's directory); a row with both null, a row of a record file that
    does not exist and an index outside the grid are absent (``None``).

    Record files are parsed into compact pyarrow arrays and kept in a thread-safe LRU of at
    most ``options.record_cache`` records (record files found missing count as entries too);
    concurrent first requests for one record share a single read. ``chunk_is_loaded`` answers
    without I/O, ``chunk`` may read one record file, and ``chunks_present(grid, start, stop)``
    streams the indices of the non-null rows in ``[start, stop)`` one record at a time, so a
    listing of a 5-million-chunk array never materialises all names. Errors in a record file
    (corrupt, wrong columns or types, negative offsets, too few rows) raise
    ``ReferenceFormatError`` naming the record file; I/O errors of the source propagate.
    """

    def __init__(
        self,
        source: ReferenceSource,
        options: LoadOptions,
        record_size: int,
        explicit: dict[str, Inline],
        grids: Sequence[ChunkGrid],
    ) -> None:
        self._source = source
        self._options = options
        self.record_size = record_size
        self._explicit = explicit
        self._grids = tuple(grids)
        self._records = RecordCache(max(1, options.record_cache), self._load_record)
        remote = options.remote_protocol
        bases = [record_directory(source.url, grid.array) for grid in self._grids]

        @functools.lru_cache(maxsize=1024)
        def resolve(grid: int, path: str) -> str:
            return sys.intern(urls.resolve(path, bases[grid], remote))

        self._resolvers = [functools.partial(resolve, grid) for grid in range(len(self._grids))]
        self._existing: dict[int, int_array[int] | None] = {}
        self._existing_lock = threading.Lock()

    @property
    def source(self) -> str:
        """Name the reference directory, for messages."""
        return self._source.url

    def keys(self) -> list[str]:
        """Return every metadata key and ``.zmetadata``."""
        return list(self._explicit)

    def get(self, key: str) -> Reference | None:
        """Return the bytes of a metadata key (or of ``.zmetadata``), or ``None``; never blocks."""
        return self._explicit.get(key)

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        """Return the length of each metadata key ``prefix + name``'s bytes (None: no such
        key)."""
        explicit = self._explicit
        return [reference_length(explicit.get(prefix + name.decode("utf-8"))) for name in names]

    @property
    def grids(self) -> Sequence[ChunkGrid]:
        """Return one chunk grid per array, in sorted order of array path."""
        return self._grids

    def records(self, grid: int) -> int:
        """Return how many record files grid number ``grid`` spans."""
        return -(-self._grids[grid].count // self.record_size)

    def existing_records(self, grid: int) -> Sequence[int] | None:
        """Return, sorted, the numbers of grid ``grid``'s record files that exist, or None when
        the source cannot list directories (plain HTTP). Lists the array's directory the first
        time (may block), once whoever asks; names that are not record files, or whose number
        is beyond the grid, are ignored."""
        with self._existing_lock:
            if grid in self._existing:
                return self._existing[grid]
            names = self._source.names(self._grids[grid].array)
            numbers: int_array[int] | None = None
            if names is not None:
                total = self.records(grid)
                found = set()
                for name in names:
                    match = _RECORD_FILE.fullmatch(name)
                    if match is not None and int(match.group(1)) < total:
                        found.add(int(match.group(1)))
                numbers = int_array("q", sorted(found))
            self._existing[grid] = numbers
            return numbers

    def record_numbers(self, grid: int) -> Sequence[int]:
        """Return the numbers of the record files of grid ``grid`` that may exist, in order:
        those listed, or every number when the source cannot list (may block)."""
        existing = self.existing_records(grid)
        return range(self.records(grid)) if existing is None else existing

    def record_columns(self, grid: int, number: int) -> tuple[str, ...] | None:
        """Return the columns of record file ``number`` of grid ``grid`` when it is loaded
        (None: not loaded, or missing); never reads."""
        _, record = self._records.peek((grid, number))
        return None if record is None else record.columns

    def record_name(self, grid: int, number: int) -> str:
        """Return the full name of record file ``number`` of grid ``grid``, for messages."""
        return join_url(self._source.url, record_name(self._grids[grid].array, number))

    def skip_absent(self, grid: int, start: int, stop: int, *, load: bool) -> int:
        """Return the first index in ``[start, stop)`` not known to be absent (``stop``: none).

        Without ``load`` nothing is read: the index returned is present, or in a record not
        loaded yet. With ``load`` the directory of record files is listed (once) and records
        are read as needed, at most ``SKIP_LOADS`` of them: the index returned is present, or
        the first of the record where that budget ran out. Record files that do not exist
        are jumped over, so the work is proportional to the record files that exist, never
        to the grid.
        """
        stop = min(stop, self._grids[grid].count)
        start = max(start, 0)
        size = self.record_size
        loads = 0
        while start < stop:
            number, row = divmod(start, size)
            first = number * size
            end = min(stop, first + size)
            known, record = self._records.peek((grid, number))
            if not known:
                existing: Sequence[int] | None
                if grid in self._existing:
                    existing = self._existing[grid]
                elif load:
                    existing = self.existing_records(grid)
                else:
                    return start
                if existing is not None:
                    position = bisect.bisect_left(existing, number)
                    if position == len(existing):
                        return stop
                    if existing[position] != number:
                        start = max(start, existing[position] * size)
                        continue
                if not load or loads >= SKIP_LOADS:
                    return start
                loads += 1
                record = self._records.get((grid, number))
            if record is not None:
                found = record.first_present(row, end - first)
                if found is not None:
                    return first + found
            start = end
        return stop

    def chunk_is_loaded(self, grid: int, index: int) -> bool:
        """Return True when ``chunk(grid, index)`` will answer without I/O."""
        if not 0 <= index < self._grids[grid].count:
            return True
        return self._records.contains((grid, index // self.record_size))

    def chunk(self, grid: int, index: int) -> Reference | None:
        """Return chunk ``index`` of grid number ``grid``, or ``None`` when it is absent.

        Reads and parses the chunk's record file the first time it is needed.
        """
        chunk_grid = self._grids[grid]
        if not 0 <= index < chunk_grid.count:
            return None
        number, row = divmod(index, self.record_size)
        record = self._records.get((grid, number))
        if record is None:
            return None
        return record.reference(row, chunk_grid, index, self._resolvers[grid])

    def chunk_sizes(self, grid: int, start: int, stop: int) -> list[int | None] | None:
        """Return the sizes of chunks ``[start, stop)`` of one record, for listings; never blocks.

        ``stop`` is clipped to the end of the record that holds ``start``. Each item is the
        chunk's size, ``-1`` for an absent chunk, or ``None`` when only ``chunk`` can tell
        (inline data, a whole-file reference, a malformed row). None altogether when that
        record is not loaded yet.
        """
        count = self._grids[grid].count
        if not 0 <= start < count:
            return None
        number, first = divmod(start, self.record_size)
        loaded, record = self._records.peek((grid, number))
        if not loaded:
            return None
        stop = min(stop, count, (number + 1) * self.record_size)
        if record is None:
            return [-1] * (stop - start)
        return record.sizes(first, first + stop - start)

    def chunk_ranges(self, grid: int, start: int, stop: int) -> dict[str, ChunkRanges]:
        """Return, per target URL, the range references of the loaded chunks in ``[start, stop)``.

        Never blocks: records not loaded are left out, as ``ReferenceSet.chunk_ranges`` says.
        """
        count = self._grids[grid].count
        start, stop = max(start, 0), min(stop, count)
        found: dict[str, ChunkRanges] = {}
        while start < stop:
            number = start // self.record_size
            first = number * self.record_size
            end = min(stop, first + self.record_size)
            loaded, record = self._records.peek((grid, number))
            if loaded and record is not None:
                for path, offset, length in record.ranges(start - first, end - first):
                    ranges = found.get(path)
                    if ranges is None:
                        ranges = found[path] = ChunkRanges()
                    ranges.offsets.append(offset)
                    ranges.lengths.append(length)
            start = end
        resolve = self._resolvers[grid]
        return {resolve(path): ranges for path, ranges in found.items()}

    def chunks_present(self, grid: int, start: int = 0, stop: int | None = None) -> Iterator[int]:
        """Yield, in order, the indices in ``[start, stop)`` whose rows hold a reference.

        Each record file is loaded once (through the cache) and only its non-null rows are
        turned into Python integers; missing record files are skipped. ``stop`` defaults to
        the grid's chunk count. A row that is present may still be malformed: ``chunk`` raises
        for it.
        """
        count = self._grids[grid].count
        stop = count if stop is None else min(stop, count)
        start = max(start, 0)
        while start < stop:
            number = start // self.record_size
            first = number * self.record_size
            end = min(stop, first + self.record_size)
            record = self._records.get((grid, number))
            if record is not None:
                for row in record.present_rows(start - first, end - first):
                    yield first + row
            start = end

    def _probe(self) -> None:
        """Check the schema of the first existing record file of the first array with chunks.

        Part of loading; reads at most ``PROBE_LIMIT`` record files and parses only footers.
        """
        for number, grid in enumerate(self._grids):
            if grid.count == 0:
                continue
            for record in range(min(self.records(number), PROBE_LIMIT)):
                relative = record_name(grid.array, record)
                try:
                    data = self._source.read(relative)
                except FileNotFoundError:
                    continue
                try:
                    read_schema(data, join_url(self._source.url, relative))
                except ReferenceFormatError as exc:
                    if not self._options.skip_invalid:
                        raise
                    report_skipped(self._options, exc, "record file will fail to load: %s")
                return
            return

    def _load_record(self, key: tuple[int, int]) -> Record | None:
        grid, number = key
        existing = self._existing.get(grid)
        if existing is not None:  # listed already: a record file not listed is not read
            position = bisect.bisect_left(existing, number)
            if position == len(existing) or existing[position] != number:
                return None
        relative = record_name(self._grids[grid].array, number)
        try:
            data = self._source.read(relative)
        except FileNotFoundError:
            return None
        return parse_record(data, join_url(self._source.url, relative))


PROBE_LIMIT: Final = 4
"""How many record files of the first array ``load_parquet`` tries before giving up the probe."""


def report_skipped(options: LoadOptions, error: ReferenceFormatError, message: str) -> None:
    """Hand a problem that ``skip_invalid`` lets pass to ``options.on_invalid``, else log it."""
    if options.on_invalid is not None:
        options.on_invalid(error)
    else:
        logger.warning(message, error)


def record_name(array: str, record: int) -> str:
    """Return the path, relative to the reference set, of ``array``'s record file ``record``."""
    name = f"refs.{record}.parq"
    return f"{array}/{name}" if array else name


def record_directory(url: str, array: str) -> str:
    """Return the directory that holds ``array``'s record files in the set at ``url``: what
    relative paths in those files resolve against (GDAL's rule; for JSON, the same principle:
    the file that holds the reference)."""
    root = url.rsplit("::", 1)[-1].rstrip("/")
    return join_url(root, array) if array else root


def join_url(url: str, relative: str) -> str:
    return f"{url.rstrip('/')}/{relative}"
