"""Decoding a record file: its schema and columns checked, its columns made compact (paths
dictionary-encoded with narrow indices, integers as uint32 where they fit), a ``Record``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from refmount.errors import ReferenceFormatError
from refmount.formats.parquet.records import Record

if TYPE_CHECKING:
    import pyarrow as pa

    from refmount.formats.parquet.records import Column

COLUMN_SETS: Final = (
    frozenset({"path", "offset", "size", "raw"}),
    frozenset({"path", "offset", "size"}),
    frozenset({"raw"}),
)
"""The column sets a record file may have (fsspec accepts the URL-only and raw-only forms)."""


def read_schema(data: bytes, name: str) -> pa.Schema:
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


def parse_record(data: bytes, name: str) -> Record:
    """Parse a record file, then hand the decoding buffers back to the system."""
    import pyarrow as pa

    record = _decode_record(data, name)
    pa.default_memory_pool().release_unused()
    return record


def _decode_record(data: bytes, name: str) -> Record:
    """Decode a record file into compact columns (see ``compact_path``, ``compact_integers``)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = read_schema(data, name)
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
        path = compact_path(path)
    raw = column("raw")
    offset = compact_integers(column("offset"), name, "offset")
    size = compact_integers(column("size"), name, "size")

    masks = [array.is_valid() for array in (path, raw) if array is not None]
    present: pa.BooleanArray | None = None
    if len(masks) == 2:
        present = pc.or_(masks[0], masks[1])
    elif masks:
        present = masks[0]
    return Record(name, table.num_rows, path, offset, size, raw, present, tuple(columns))


def compact_path(path: Column) -> Column:
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


def compact_integers(array: Column | None, name: str, label: str) -> Column | None:
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
