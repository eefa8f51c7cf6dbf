"""Records: one Parquet file of ``record_size`` rows, decoded (``decoding``), its columns read
row by row from their Arrow buffers without pyarrow scalars, each row by the one row rule."""

from __future__ import annotations

import binascii
import enum
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

from refmount.errors import ReferenceFormatError
from refmount.formats.values import decode_base64
from refmount.model import (
    ChunkGrid,
    Inline,
    Range,
    Reference,
    Whole,
)

if TYPE_CHECKING:
    import pyarrow as pa

    Column: TypeAlias = pa.Array[Any]


logger = logging.getLogger(__name__)

_BASE64: Final = b"base64:"


@dataclass(frozen=True, slots=True)
class Cells:
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


def cells_of(array: Column | None) -> Cells | None:
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
    return Cells(validity, values, names, data.offset)


class Row(enum.Enum):
    """What a row of a Parquet reference set is (see ``row_rule``)."""

    ABSENT = enum.auto()
    INLINE = enum.auto()
    WHOLE = enum.auto()
    RANGE = enum.auto()


_ABSENT, _INLINE, _WHOLE, _RANGE = Row.ABSENT, Row.INLINE, Row.WHOLE, Row.RANGE


def number_rule(offset: object, size: object) -> Row | str:
    """Return what a row with a path is by its numbers: ``WHOLE`` when both are null (GDAL's
    whole-file row, which fsspec drops) or both 0, ``RANGE`` for two integers of at least 0,
    else what is wrong with them (the offset checked first)."""
    if isinstance(offset, int) and isinstance(size, int) and offset >= 0 and size >= 0:
        return _RANGE if offset or size else _WHOLE
    if offset is None and size is None:
        return _WHOLE
    if not isinstance(offset, int):
        return "offset is null for a row with a path"
    if offset < 0:
        return f"offset is negative ({offset})"
    if not isinstance(size, int):
        return "size is null for a row with a path"
    return f"size is negative ({size})"


def row_rule(inline: bool, path: object, offset: object, size: object) -> Row | str:
    """Return what a row of the Parquet reference format is, or what is wrong with it.

    The one statement of the rule: raw data makes it ``INLINE`` whatever else it holds; with
    none, a null path makes it ``ABSENT``; a path that is not a non-empty string is wrong;
    otherwise its numbers decide (``number_rule``).
    """
    if inline:
        return _INLINE
    if path is None:
        return _ABSENT
    if not isinstance(path, str) or not path:
        return f"path {path!r} is not a URL"
    return number_rule(offset, size)


def _cell(column: Column | None, cells: Cells | None, row: int) -> Any:
    """Return the value in ``row`` of ``column``: from its cells when they hold the values,
    else as pyarrow's scalar gives it (None: null, or no column)."""
    if cells is not None and cells.values is not None:
        return cells.value(row)
    return None if column is None else column[row].as_py()


@dataclass(frozen=True, slots=True)
class Record:
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
    path_cells: Cells | None = field(init=False)
    offset_cells: Cells | None = field(init=False)
    size_cells: Cells | None = field(init=False)
    raw_cells: Cells | None = field(init=False)

    def __post_init__(self) -> None:
        for name, column in (
            ("path_cells", self.path),
            ("offset_cells", self.offset),
            ("size_cells", self.size),
            ("raw_cells", self.raw),
        ):
            object.__setattr__(self, name, cells_of(column))

    def reference(
        self, row: int, grid: ChunkGrid, index: int, resolve: Callable[[str], str]
    ) -> Reference | None:
        """Return the reference in ``row`` (chunk ``index`` of ``grid``), or ``None`` if null."""
        if row >= self.rows:
            raise ReferenceFormatError(
                self.name, grid.key(index), f"record has {self.rows} rows, chunk needs row {row}"
            )
        raw = self.raw_cells
        inline = self.raw is not None and raw is not None and raw.is_valid(row)
        path = _cell(self.path, self.path_cells, row)
        offset = _cell(self.offset, self.offset_cells, row)
        size = _cell(self.size, self.size_cells, row)
        kind = row_rule(inline, path, offset, size)
        if kind is _RANGE:
            return Range(resolve(path), offset, size)
        if kind is _ABSENT:
            return None
        if kind is _WHOLE:
            return Whole(resolve(path))
        if kind is _INLINE:
            assert self.raw is not None
            data = cast(bytes, self.raw[row].as_py())
            return Inline(_decode_raw(data, self.name, grid.key(index)))
        assert isinstance(kind, str)
        raise ReferenceFormatError(self.name, grid.key(index), kind)

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
            elif is_inline:
                out.append(None)  # decoded only when read
            else:
                # A whole file's size takes the target; a malformed row is for ``chunk`` to
                # name. The path is not read: only ``chunk`` and ``ranges`` check it.
                out.append(size if number_rule(offset, size) is Row.RANGE else None)
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
            if size and row_rule(bool(is_inline), path, offset, size) is Row.RANGE:
                yield cast(str, path), cast(int, offset), size

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


def _decode_raw(data: bytes, name: str, key: str) -> bytes:
    if not data.startswith(_BASE64):
        return data
    try:
        return decode_base64(data[len(_BASE64) :])
    except binascii.Error as exc:
        raise ReferenceFormatError(name, key, f"bad base64 in raw: {exc}") from exc
