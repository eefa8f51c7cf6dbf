"""Parquet reference sets (fsspec ``LazyReferenceMapper`` layout), read lazily with pyarrow."""

from __future__ import annotations

import binascii
import bisect
import functools
import json
import logging
import re
import sys
import threading
from array import array as int_array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

from refmount import urls
from refmount.errors import ReferenceFormatError
from refmount.formats import zarr_meta
from refmount.formats.options import LoadOptions
from refmount.formats.values import decode_base64
from refmount.lru import LRU
from refmount.model import (
    ChunkGrid,
    ChunkRanges,
    Inline,
    Range,
    Reference,
    ReferenceSource,
    Whole,
    reference_length,
)

if TYPE_CHECKING:
    import pyarrow as pa

    Column: TypeAlias = pa.Array[Any]

logger = logging.getLogger(__name__)

ZMETADATA: Final = ".zmetadata"
"""The file that holds a Parquet reference set's metadata and record size."""

PROBE_LIMIT: Final = 4
"""How many record files of the first array ``load_parquet`` tries before giving up the probe."""

COLUMN_SETS: Final = (
    frozenset({"path", "offset", "size", "raw"}),
    frozenset({"path", "offset", "size"}),
    frozenset({"raw"}),
)
"""The column sets a record file may have (fsspec accepts the URL-only and raw-only forms)."""

_BASE64: Final = b"base64:"

SKIP_LOADS: Final = 64
"""How many record files one ``skip_absent`` call reads at most (it says where it stopped)."""

_RECORD_FILE: Final = re.compile(r"refs\.(0|[1-9][0-9]{0,19})\.parq")


def _skipped(options: LoadOptions, error: ReferenceFormatError, message: str) -> None:
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
    return _join(root, array) if array else root


def load_parquet(source: ReferenceSource, options: LoadOptions) -> ParquetReferenceSet:
    """Load a Parquet reference set: read ``.zmetadata`` and probe one record file's schema.

    Reads ``.zmetadata`` in full, then the first record file that exists among the first
    ``PROBE_LIMIT`` of the first array that has chunks, whose footer is checked for the
    expected columns (so a directory of unrelated Parquet files is refused before mounting).
    No other record file is read until a chunk in it is asked for.

    Raises ``ReferenceFormatError`` for a missing or malformed ``.zmetadata``, malformed array
    metadata (unless ``options.skip_invalid``: then that array is left out with a warning) and
    a probed record file with the wrong columns or types (a warning with ``skip_invalid``).
    """
    meta_name = _join(source.url, ZMETADATA)
    try:
        raw = source.read(ZMETADATA)
    except FileNotFoundError as exc:
        raise ReferenceFormatError(source.url, None, f"missing {ZMETADATA}") from exc
    metadata, record_size = _parse_zmetadata(raw, meta_name)

    skipped: set[str] = set()
    found: dict[str, ChunkGrid] = {}
    for key, value in metadata.items():
        try:
            grid = zarr_meta.grid_for_key(key, value, meta_name)
            if grid is not None and grid.array in found:
                raise ReferenceFormatError(
                    meta_name, key, f"array {grid.array!r} has both v2 and v3 metadata"
                )
        except ReferenceFormatError as exc:
            if not options.skip_invalid:
                raise
            _skipped(options, exc, "skipping array: %s")
            split = zarr_meta.array_of(key)
            if split is not None:
                skipped.add(split[0])
            continue
        if grid is not None:
            found[grid.array] = grid
    for array in skipped:
        found.pop(array, None)

    explicit: dict[str, Inline] = {}
    for key, value in metadata.items():
        if _parent(key) in skipped and _is_array_document(key):
            continue
        explicit[key] = Inline(_metadata_bytes(value))
    explicit[ZMETADATA] = Inline(raw)

    grids = [found[array] for array in sorted(found)]
    references = ParquetReferenceSet(source, options, record_size, explicit, grids)
    references._probe()
    return references


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
        self._records = _RecordCache(max(1, options.record_cache), self._load_record)
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
        return _join(self._source.url, record_name(self._grids[grid].array, number))

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
                    _read_schema(data, _join(self._source.url, relative))
                except ReferenceFormatError as exc:
                    if not self._options.skip_invalid:
                        raise
                    _skipped(self._options, exc, "record file will fail to load: %s")
                return
            return

    def _load_record(self, key: tuple[int, int]) -> _Record | None:
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
        return _parse_record(data, _join(self._source.url, relative))


@dataclass(frozen=True, slots=True)
class _Cells:
    """One column's cells read straight from its Arrow buffers: a Python value per row
    without making a pyarrow scalar (the per-file lookup's hot path)."""

    validity: memoryview | None  # the validity bitmap; None: no nulls
    values: memoryview | None  # the integers, or the dictionary's indices; None: not read
    names: tuple[str | None, ...] | None  # a dictionary column's values
    offset: int  # the array's offset into its buffers

    def is_valid(self, row: int) -> bool:
        """Return False when the cell in ``row`` is null."""
        if self.validity is None:
            return True
        position = self.offset + row
        return bool(self.validity[position >> 3] >> (position & 7) & 1)

    def value(self, row: int) -> int | str | None:
        """Return the cell in ``row`` (None: null)."""
        if not self.is_valid(row):
            return None
        assert self.values is not None
        number: int = self.values[self.offset + row]
        return number if self.names is None else self.names[number]


_IntegerFormat: TypeAlias = Literal["b", "h", "i", "q", "I"]

_BUFFER_FORMATS: Final[dict[str, tuple[_IntegerFormat, int]]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint32": ("I", 4),
}
"""The ``memoryview`` format and item size of each integer type record columns are read as."""


def _cells(array: Column | None) -> _Cells | None:
    """Return ``array``'s cells for fast access by row (integers, a dictionary of strings, or
    only the validity of other types); None for no array."""
    import pyarrow as pa

    if array is None:
        return None
    names: tuple[str | None, ...] | None = None
    data = array
    if pa.types.is_dictionary(array.type):
        dictionary = cast("pa.DictionaryArray[Any, Any]", array)
        names = tuple(dictionary.dictionary.to_pylist())
        data = dictionary.indices
    buffers = data.buffers()
    validity = None
    if array.null_count and buffers[0] is not None:
        validity = memoryview(buffers[0]).cast("B")
    values = None
    layout = _BUFFER_FORMATS.get(str(data.type))
    if layout is not None and buffers[1] is not None:
        form, size = layout
        raw = memoryview(buffers[1]).cast("B")
        values = raw[: len(raw) // size * size].cast(form)
    elif names is not None:
        names = None  # indices of a type not read here: value() is not offered
    return _Cells(validity, values, names, data.offset)


def _cell(column: Column | None, cells: _Cells | None, row: int) -> Any:
    """Return the value in ``row`` of ``column``: from its cells when they hold the values,
    else as pyarrow's scalar gives it (None: null, or no column)."""
    if cells is not None and cells.values is not None:
        return cells.value(row)
    return None if column is None else column[row].as_py()


@dataclass(frozen=True, slots=True)
class _Record:
    """One parsed record file: its columns as pyarrow arrays (``None`` when absent or all null),
    and the cells ``reference`` reads of them."""

    name: str
    rows: int
    path: Column | None
    offset: Column | None
    size: Column | None
    raw: Column | None
    present: pa.BooleanArray | None  # None: every row is absent
    columns: tuple[str, ...]  # the file's columns, as stored (pandas index columns left out)
    path_cells: _Cells | None = field(init=False)
    offset_cells: _Cells | None = field(init=False)
    size_cells: _Cells | None = field(init=False)
    raw_cells: _Cells | None = field(init=False)

    def __post_init__(self) -> None:
        for name, column in (
            ("path_cells", self.path),
            ("offset_cells", self.offset),
            ("size_cells", self.size),
            ("raw_cells", self.raw),
        ):
            object.__setattr__(self, name, _cells(column))

    def reference(
        self, row: int, grid: ChunkGrid, index: int, resolve: Callable[[str], str]
    ) -> Reference | None:
        """Return the reference in ``row`` (chunk ``index`` of ``grid``), or ``None`` if null."""
        if row >= self.rows:
            raise ReferenceFormatError(
                self.name, grid.key(index), f"record has {self.rows} rows, chunk needs row {row}"
            )
        raw = self.raw_cells
        if self.raw is not None and raw is not None and raw.is_valid(row):
            data = self.raw[row].as_py()
            if data is not None:
                return Inline(_decode_raw(cast(bytes, data), self.name, grid.key(index)))
        if self.path is None:
            return None
        path = _cell(self.path, self.path_cells, row)
        if path is None:
            return None
        if not isinstance(path, str) or not path:
            raise ReferenceFormatError(self.name, grid.key(index), f"path {path!r} is not a URL")
        if _cell(self.offset, self.offset_cells, row) is None and (
            _cell(self.size, self.size_cells, row) is None
        ):
            return Whole(resolve(path))  # GDAL's whole-file row (fsspec drops the key)
        offset = self._integer(self.offset, self.offset_cells, row, "offset", grid, index)
        size = self._integer(self.size, self.size_cells, row, "size", grid, index)
        url = resolve(path)
        if offset == 0 and size == 0:
            return Whole(url)
        return Range(url, offset, size)

    def sizes(self, start: int, stop: int) -> list[int | None]:
        """Return the sizes of rows ``[start, stop)`` as ``chunk_sizes`` describes them."""
        count = stop - start
        valid = min(stop, self.rows) - start
        if self.present is None or valid <= 0:
            return [-1] * max(valid, 0) + [None] * (count - max(valid, 0))
        nothing: list[Any] = [None] * valid
        present = self.present.slice(start, valid).to_pylist()
        sizes = nothing if self.size is None else self.size.slice(start, valid).to_pylist()
        offsets = nothing if self.offset is None else self.offset.slice(start, valid).to_pylist()
        inline = (
            [False] * valid
            if self.raw is None
            else self.raw.slice(start, valid).is_valid().to_pylist()
        )
        out: list[int | None] = []
        for is_present, is_inline, offset, size in zip(
            present, inline, offsets, sizes, strict=True
        ):
            if not is_present:
                out.append(-1)
            elif is_inline or size is None or offset is None or size < 0 or offset < 0:
                out.append(None)
            elif size == 0 and offset == 0:
                out.append(None)  # a whole file: its size takes the target
            else:
                out.append(size)
        return out + [None] * (count - valid)  # rows past the end: ``chunk`` says what is wrong

    def ranges(self, start: int, stop: int) -> Iterator[tuple[str, int, int]]:
        """Yield ``(path, offset, length)`` of the rows in ``[start, stop)`` that ``reference``
        turns into a ``Range`` of at least one byte (no raw data, a path, both integers)."""
        stop = min(stop, self.rows)
        if self.path is None or self.offset is None or self.size is None or start >= stop:
            return
        count = stop - start
        paths = self.path.slice(start, count).to_pylist()
        offsets = self.offset.slice(start, count).to_pylist()
        sizes = self.size.slice(start, count).to_pylist()
        inline = (
            [False] * count
            if self.raw is None
            else self.raw.slice(start, count).is_valid().to_pylist()
        )
        for path, offset, size, is_inline in zip(paths, offsets, sizes, inline, strict=True):
            if (
                not is_inline
                and isinstance(path, str)
                and path
                and isinstance(offset, int)
                and isinstance(size, int)
                and offset >= 0
                and size > 0
            ):
                yield path, offset, size

    def present_rows(self, start: int, stop: int) -> list[int]:
        """Return the rows in ``[start, stop)``, clipped to the file, that are not null."""
        stop = min(stop, self.rows)
        if self.present is None or start >= stop:
            return []
        import pyarrow.compute as pc

        hits = pc.indices_nonzero(self.present.slice(start, stop - start))
        return [start + row for row in cast(list[int], hits.to_pylist())]

    def first_present(self, start: int, stop: int) -> int | None:
        """Return the first row in ``[start, stop)``, clipped to the file, that is not null."""
        stop = min(stop, self.rows)
        present = self.present
        if present is None or start >= stop:
            return None
        if present[start].as_py():  # the common case of a dense record: no scan
            return start
        rows = self.present_rows(start, stop)
        return rows[0] if rows else None

    def nbytes(self) -> int:
        """Return the bytes held by the record's arrays."""
        arrays = (self.path, self.offset, self.size, self.raw, self.present)
        return sum(array.nbytes for array in arrays if array is not None)

    def _integer(
        self,
        column: Column | None,
        cells: _Cells | None,
        row: int,
        name: str,
        grid: ChunkGrid,
        index: int,
    ) -> int:
        value = _cell(column, cells, row)
        if not isinstance(value, int):
            raise ReferenceFormatError(
                self.name, grid.key(index), f"{name} is null for a row with a path"
            )
        if value < 0:
            raise ReferenceFormatError(self.name, grid.key(index), f"{name} is negative ({value})")
        return value


class _Pending:
    """A record being loaded by one thread while others wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: _Record | None = None
        self.error: BaseException | None = None


class _RecordCache:
    """A thread-safe LRU of parsed records in which each missing record is loaded once.

    Records are loaded in worker threads (and by ``refmount check`` with no event loop), so
    its single-flight waits on ``threading.Event``s; ``refmount.flight`` is trio's.
    """

    def __init__(self, capacity: int, load: Callable[[tuple[int, int]], _Record | None]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._entries: LRU[tuple[int, int], _Record | None] = LRU(capacity)
        self._pending: dict[tuple[int, int], _Pending] = {}

    def contains(self, key: tuple[int, int]) -> bool:
        """Return True when ``key`` is cached (a loaded record or one known to be missing)."""
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def peek(self, key: tuple[int, int]) -> tuple[bool, _Record | None]:
        """Return ``(True, record)`` when ``key`` is cached (record None: missing), else
        ``(False, None)``; never loads."""
        with self._lock:
            if self._entries.touch(key):
                return True, self._entries.peek(key)
            return False, None

    def get(self, key: tuple[int, int]) -> _Record | None:
        """Return the record for ``key``, loading it (once, whoever asks) if it is not cached."""
        with self._lock:
            if self._entries.touch(key):
                return self._entries.peek(key)
            pending = self._pending.get(key)
            owner = pending is None
            if pending is None:
                pending = self._pending[key] = _Pending()
        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.value
        try:
            value = self._load(key)
        except BaseException as exc:
            pending.error = exc
            with self._lock:
                del self._pending[key]
            pending.done.set()
            raise
        pending.value = value
        with self._lock:
            del self._pending[key]
            self._entries.put(key, value)
        pending.done.set()
        return value


def _parse_zmetadata(raw: bytes, name: str) -> tuple[dict[str, object], int]:
    try:
        document = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise ReferenceFormatError(name, None, f"not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ReferenceFormatError(name, None, "must be a JSON object")
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        problem = "missing" if metadata is None else "must be a JSON object"
        raise ReferenceFormatError(name, "metadata", problem)
    record_size = document.get("record_size")
    if isinstance(record_size, bool) or not isinstance(record_size, int) or record_size <= 0:
        problem = (
            "missing" if record_size is None else f"must be a positive integer, not {record_size!r}"
        )
        raise ReferenceFormatError(name, "record_size", problem)
    return cast(dict[str, object], metadata), record_size


def _metadata_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


def _is_array_document(key: str) -> bool:
    name = key.rpartition("/")[2]
    return name in (zarr_meta.ZARRAY, zarr_meta.ZARR_JSON, ".zattrs")


def _parent(key: str) -> str:
    return key.rpartition("/")[0]


def _join(url: str, relative: str) -> str:
    return f"{url.rstrip('/')}/{relative}"


def _decode_raw(data: bytes, name: str, key: str) -> bytes:
    if not data.startswith(_BASE64):
        return data
    try:
        return decode_base64(data[len(_BASE64) :])
    except binascii.Error as exc:
        raise ReferenceFormatError(name, key, f"bad base64 in raw: {exc}") from exc


def _read_schema(data: bytes, name: str) -> pa.Schema:
    """Return the Arrow schema of a record file after checking its columns and types."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.ParquetFile(pa.BufferReader(data)).schema_arrow
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ReferenceFormatError(name, None, f"not a readable Parquet file: {exc}") from exc
    _check_schema(schema, name)
    return schema


def _columns(schema: pa.Schema) -> list[str]:
    """Return the schema's column names, leaving out pandas index columns.

    Pandas metadata that is not JSON, or not shaped as pandas writes it, names no index column.
    """
    index: set[str] = set()
    try:
        pandas: object = schema.pandas_metadata
    except ValueError:  # not JSON: no usable pandas metadata, so no index columns
        pandas = None
    if isinstance(pandas, dict):
        columns = pandas.get("index_columns")
        if isinstance(columns, list):
            index = {c for c in columns if isinstance(c, str)}
    return [name for name in schema.names if name not in index]


def _check_schema(schema: pa.Schema, name: str) -> None:
    import pyarrow as pa

    columns = _columns(schema)
    if len(set(columns)) != len(columns) or frozenset(columns) not in COLUMN_SETS:
        raise ReferenceFormatError(
            name,
            None,
            f"columns are {sorted(columns)}, expected path, offset, size and raw "
            "(or path, offset and size, or raw alone)",
        )
    types = pa.types
    for column in columns:
        kind = schema.field(column).type
        if types.is_null(kind):
            continue
        if column == "path":
            if types.is_dictionary(kind):
                kind = kind.value_type
            ok = types.is_string(kind) or types.is_large_string(kind) or types.is_string_view(kind)
        elif column == "raw":
            ok = types.is_binary(kind) or types.is_large_binary(kind) or types.is_binary_view(kind)
        else:
            ok = types.is_integer(kind)
        if not ok:
            raise ReferenceFormatError(name, None, f"column {column!r} has type {kind}")


def _parse_record(data: bytes, name: str) -> _Record:
    """Parse a record file, then hand the decoding buffers back to the system."""
    import pyarrow as pa

    record = _decode_record(data, name)
    pa.default_memory_pool().release_unused()
    return record


def _decode_record(data: bytes, name: str) -> _Record:
    """Decode a record file into compact columns (see ``_compact_path``, ``_compact_integers``)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = _read_schema(data, name)
    columns = _columns(schema)
    dictionary = ["path"] if "path" in columns else None
    try:
        table = pq.ParquetFile(pa.BufferReader(data), read_dictionary=dictionary).read(
            columns=columns, use_threads=False
        )
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ReferenceFormatError(name, None, f"not a readable Parquet file: {exc}") from exc

    def column(label: str) -> Column | None:
        if label not in columns:
            return None
        array: Column = table.column(label).combine_chunks()
        return None if array.null_count == len(array) and label in ("path", "raw") else array

    path = column("path")
    if path is not None:
        path = _compact_path(path)
    raw = column("raw")
    offset = _compact_integers(column("offset"), name, "offset")
    size = _compact_integers(column("size"), name, "size")

    masks = [array.is_valid() for array in (path, raw) if array is not None]
    present: pa.BooleanArray | None = None
    if len(masks) == 2:
        present = pc.or_(masks[0], masks[1])
    elif masks:
        present = masks[0]
    return _Record(name, table.num_rows, path, offset, size, raw, present, tuple(columns))


def _compact_path(path: Column) -> Column:
    """Return ``path`` dictionary-encoded with the narrowest index type that fits."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = path if pa.types.is_dictionary(path.type) else pc.dictionary_encode(path)
    kind = encoded.type
    if not pa.types.is_dictionary(kind):
        return encoded
    entries = len(cast("pa.DictionaryArray[Any, Any]", encoded).dictionary)
    for index_type, limit in ((pa.int8(), 1 << 7), (pa.int16(), 1 << 15)):
        if entries <= limit:
            return pc.cast(encoded, pa.dictionary(index_type, kind.value_type))
    return encoded


def _compact_integers(array: Column | None, name: str, label: str) -> Column | None:
    """Return an integer column as uint32 when every value fits, as int64 otherwise.

    (Offsets beyond 4 GiB keep 64 bits; sizes and most offsets halve their memory.)
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if array is None:
        return None
    try:
        wide = pc.cast(array, pa.int64())
    except (pa.ArrowException, ValueError) as exc:
        raise ReferenceFormatError(name, None, f"column {label!r}: {exc}") from exc
    bounds = pc.min_max(wide)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or high is None or low < 0 or high >= 1 << 32:
        return wide
    return pc.cast(wide, pa.uint32())
