"""What the netCDF file of a reference set holds, decided from the set's zarr v2 metadata
alone: groups, dimensions, variables with their HDF5 filters, and the arrays left out and why.

No HDF5 here (``layout`` writes what this describes). A variable's chunks are placed as stored
when its codecs map onto HDF5 filters every netCDF reader has (deflate, shuffle, none);
otherwise, when a decoded view of the set decodes the array, it becomes an unfiltered
variable whose chunks are read decoded (``Variable.decoded``). Under ``--decode`` the set
itself is that view: its decoded arrays have no codecs left.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refmount.errors import ReferenceFormatError
from refmount.formats.zarr_meta import ZARR_JSON, ZARRAY, grid_from_zarray
from refmount.model import ChunkGrid, Inline, Reference, ReferenceSet

ZGROUP = ".zgroup"
ZATTRS = ".zattrs"
ZMETADATA = ".zmetadata"
DIMENSIONS_ATTRIBUTE = "_ARRAY_DIMENSIONS"

DEFLATE = 1
SHUFFLE = 2
"""HDF5's filter ids that every netCDF reader has."""


@dataclass(frozen=True, slots=True)
class Filter:
    """One HDF5 filter of a variable's pipeline: its id and client values."""

    id: int
    values: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Variable:
    """One array as a netCDF variable.

    ``path`` is the array's key prefix in the set, ``group`` the path of the group it lies in
    and ``name`` its name there; ``filters`` are HDF5 filters in the order they were applied
    when the chunks were written (none: chunks are ``chunk_bytes`` long, unfiltered).
    """

    path: str
    group: str
    name: str
    dimensions: tuple[str, ...]
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    fill_value: int | float | None
    attributes: Mapping[str, Any]
    filters: tuple[Filter, ...]
    grid: ChunkGrid
    decoded: bool = False
    """Whether its chunks are read decoded (through the decoded view's reader)."""

    @property
    def chunk_bytes(self) -> int:
        """Return the size of one chunk unfiltered."""
        return math.prod(self.chunks) * np.dtype(self.dtype).itemsize

    @property
    def is_coordinate(self) -> bool:
        """Return True for a coordinate variable: 1-d, named after its dimension."""
        return self.dimensions == (self.name,)


@dataclass(slots=True)
class Group:
    """One group: its path (``""``: the root), attributes and dimensions (name → size),
    in the order they were first used."""

    path: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    dimensions: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """An array the file leaves out, and why."""

    path: str
    reason: str

    def describe(self) -> str:
        """Return the warning line: the array and the reason."""
        return f"array {self.path or '/'!r} is left out: {self.reason}"


@dataclass(slots=True)
class Schema:
    """The file's contents: groups (parents first), variables, and what was left out or
    renamed (one line each)."""

    groups: list[Group] = field(default_factory=list)
    variables: list[Variable] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)


class _Refusal(Exception):
    """An array cannot be expressed in the file; the message says why."""


def schema_of(
    references: ReferenceSet, root_name: str, decoded: ReferenceSet | None = None
) -> Schema:
    """Return the schema of the set's netCDF file; a root array is named ``root_name``.

    ``decoded``, the decoded view of the same set, offers its rewritten metadata for the
    arrays whose codecs have no HDF5 filter: an array it decodes becomes a ``decoded``
    variable. Raises ``ReferenceFormatError`` naming the set and the key for malformed
    metadata (as loading would). Metadata documents are read from the set's inline keys and
    from consolidated ``.zmetadata`` documents; an array whose metadata lies in a target is
    left out.
    """
    source = references.source
    documents, left_out = _documents(references)
    alternatives = {} if decoded is None else _documents(decoded)[0]
    schema = Schema(left_out=left_out)
    arrays = sorted(path for path, name in documents if name == ZARRAY)
    group_paths = {path for path, name in documents if name == ZGROUP} | {""}
    for array in arrays:
        parent = array
        while parent:
            parent = parent.rpartition("/")[0]
            group_paths.add(parent)
    groups = {
        path: Group(path, _attributes(documents.get((path, ZATTRS)), source, path))
        for path in sorted(group_paths, key=lambda p: (p.count("/") if p else -1, p))
    }
    schema.groups = list(groups.values())
    for array in arrays:
        try:
            meta, is_decoded = _storage(array, documents, alternatives, source)
            schema.variables.append(
                _variable(
                    array, meta, is_decoded, documents, groups, root_name, source, schema.renamed
                )
            )
        except _Refusal as refusal:
            schema.left_out.append(LeftOut(array, str(refusal)))
    _check_names(schema)
    return schema


def _documents(references: ReferenceSet) -> tuple[dict[tuple[str, str], Any], list[LeftOut]]:
    """Return the metadata documents by (path, name), and the arrays whose metadata is not
    inline."""
    source = references.source
    found: dict[tuple[str, str], Any] = {}
    left_out: list[LeftOut] = []
    consolidated: list[tuple[str, Any]] = []
    keys = references.keys()  # a ReferenceSet is not itself iterable
    for key in keys:
        path, _, name = key.rpartition("/")
        if name == ZARR_JSON:
            _note_v3(references.get(key), path, left_out)
            continue
        if name not in (ZARRAY, ZATTRS, ZGROUP, ZMETADATA):
            continue
        reference = references.get(key)
        if not isinstance(reference, Inline):
            if reference is not None and name == ZARRAY:
                left_out.append(LeftOut(path, "its metadata lies in a target, not in the set"))
            continue
        document = _parse(reference.data, source, key)
        if name == ZMETADATA:
            consolidated.append((path, document))
        else:
            found[(path, name)] = document
    for path, document in consolidated:
        entries = document.get("metadata") if isinstance(document, dict) else None
        for entry, value in entries.items() if isinstance(entries, dict) else ():
            full = f"{path}/{entry}" if path else entry
            where, _, name = full.rpartition("/")
            if name in (ZARRAY, ZATTRS, ZGROUP):
                text = value if isinstance(value, str | bytes) else None
                parsed = _parse(text, source, full) if text is not None else value
                found.setdefault((where, name), parsed)
    return found, left_out


def _note_v3(reference: Reference | None, path: str, left_out: list[LeftOut]) -> None:
    """Leave out a zarr v3 array (``zarr.json`` of ``node_type`` array): not mapped yet."""
    try:
        document = json.loads(reference.data) if isinstance(reference, Inline) else None
    except ValueError:
        return  # the loader reports malformed metadata
    if isinstance(document, dict) and document.get("node_type") == "array":
        left_out.append(LeftOut(path, "zarr v3 arrays are not mapped to netCDF yet"))


def _parse(data: bytes | str, source: str, key: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as error:
        raise ReferenceFormatError(source, key, f"not valid JSON: {error}") from None


def _attributes(document: Any, source: str, path: str) -> dict[str, Any]:
    if document is None:
        return {}
    if not isinstance(document, dict):
        key = f"{path}/{ZATTRS}" if path else ZATTRS
        raise ReferenceFormatError(source, key, "attributes must be a JSON object")
    return dict(document)


def _storage(
    array: str,
    documents: Mapping[tuple[str, str], Any],
    alternatives: Mapping[tuple[str, str], Any],
    source: str,
) -> tuple[dict[str, Any], bool]:
    """Return the metadata an array is stored by and whether it is the decoded view's: its
    own when its codecs have HDF5 filters, else the decoded view's when that has none left."""
    key = f"{array}/{ZARRAY}" if array else ZARRAY
    meta = documents[(array, ZARRAY)]
    if not isinstance(meta, dict):
        raise ReferenceFormatError(source, key, "array metadata must be a JSON object")
    grid_from_zarray(array, meta, source, key)  # malformed metadata stops the mount
    try:
        _stored_as(meta)
    except _Refusal as refusal:
        alternative = alternatives.get((array, ZARRAY))
        if not isinstance(alternative, dict) or not _plain(alternative):
            if alternatives:  # a decoded view was asked and does not decode it
                raise _Refusal(f"{refusal}, and it is not decoded") from None
            raise
        return alternative, True
    return meta, False


def _plain(meta: Mapping[str, Any]) -> bool:
    """Return True for metadata with no codecs, C order and a dtype netCDF has."""
    try:
        return not _stored_as(meta)[1]
    except _Refusal:
        return False


def _stored_as(meta: Mapping[str, Any]) -> tuple[str, tuple[Filter, ...]]:
    """Return the dtype and HDF5 filters an array's chunks are stored with."""
    dtype = _dtype(meta.get("dtype"))
    if meta.get("order", "C") != "C":
        raise _Refusal("its chunks are in Fortran order")
    filters = _filters(meta, np.dtype(dtype).itemsize)
    if not meta.get("shape") and filters:
        raise _Refusal("a 0-d array with codecs cannot be stored filtered")
    return dtype, filters


def _variable(
    array: str,
    meta: dict[str, Any],
    decoded: bool,
    documents: Mapping[tuple[str, str], Any],
    groups: Mapping[str, Group],
    root_name: str,
    source: str,
    renamed: list[str],
) -> Variable:
    key = f"{array}/{ZARRAY}" if array else ZARRAY
    grid = grid_from_zarray(array, meta, source, key)
    shape = tuple(int(n) for n in meta["shape"])
    chunks = tuple(int(n) for n in meta["chunks"])
    dtype, filters = _stored_as(meta)
    attributes = _attributes(documents.get((array, ZATTRS)), source, array)
    group_path, _, name = array.rpartition("/")
    group = groups[group_path]
    dimensions = _dimensions(attributes.pop(DIMENSIONS_ATTRIBUTE, None), shape, group, array)
    for position, (dimension, size) in enumerate(zip(dimensions, shape, strict=True)):
        known = group.dimensions.setdefault(dimension, size)
        if known != size:
            other = f"{dimension}_{size}"
            group.dimensions.setdefault(other, size)
            dimensions = (*dimensions[:position], other, *dimensions[position + 1 :])
            renamed.append(
                f"array {array!r}: dimension {dimension!r} has size {known} elsewhere in its "
                f"group; here (size {size}) it is {other!r}"
            )
    return Variable(
        path=array,
        group=group_path,
        name=name or root_name,
        dimensions=dimensions,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        fill_value=_fill_value(meta.get("fill_value"), dtype),
        attributes=attributes,
        filters=filters,
        grid=grid,
        decoded=decoded,
    )


def _dtype(value: object) -> str:
    """Return the numpy dtype string of a v2 ``dtype`` netCDF can hold (booleans as bytes)."""
    if not isinstance(value, str):
        raise _Refusal(f"its dtype {value!r} is not a number type")
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise _Refusal(f"its dtype {value!r} is not understood") from None
    if dtype.kind == "b":
        return "|u1"
    if dtype.kind not in "iuf" or dtype.itemsize > 8 or dtype.str[1:] == "f2":
        raise _Refusal(f"its dtype {value!r} has no netCDF type")
    return dtype.str


def _filters(meta: Mapping[str, Any], itemsize: int) -> tuple[Filter, ...]:
    """Return the HDF5 filters of the array's codecs, applied filters first, then the
    compressor; refuse codecs that have no filter every netCDF reader has."""
    codecs = list(meta.get("filters") or [])
    if meta.get("compressor") is not None:
        codecs.append(meta["compressor"])
    out: list[Filter] = []
    for codec in codecs:
        name = codec.get("id") if isinstance(codec, dict) else None
        if name == "zlib":
            level = codec.get("level", 1)
            if not isinstance(level, int) or not 0 <= level <= 9:
                raise _Refusal(f"its zlib level {level!r} is not 0 to 9")
            out.append(Filter(DEFLATE, (level,)))
        elif name == "shuffle":
            size = codec.get("elementsize", 4)
            if size != itemsize:
                raise _Refusal(
                    f"its shuffle works on {size}-byte elements, its items are {itemsize} bytes"
                )
            out.append(Filter(SHUFFLE, ()))
        else:
            raise _Refusal(f"its codec {name!r} has no HDF5 filter every netCDF reader has")
    return tuple(out)


def _dimensions(value: object, shape: tuple[int, ...], group: Group, array: str) -> tuple[str, ...]:
    """Return the names of an array's dimensions (``phony_dim_N`` where none are given)."""
    if value is None:
        return tuple(_phony(group, size) for size in shape)
    if (
        not isinstance(value, list)
        or len(value) != len(shape)
        or not all(isinstance(n, str) and n.rpartition("/")[2] for n in value)
    ):
        raise _Refusal(
            f"its {DIMENSIONS_ATTRIBUTE} {value!r} does not name {len(shape)} dimensions"
        )
    if len({name.rpartition("/")[2] for name in value}) != len(value):
        raise _Refusal(f"its {DIMENSIONS_ATTRIBUTE} {value!r} names one dimension twice")
    return tuple(name.rpartition("/")[2] for name in value)


def _phony(group: Group, size: int) -> str:
    """Return the group's ``phony_dim_N`` of ``size``, made now if it has none."""
    for name, known in group.dimensions.items():
        if name.startswith("phony_dim_") and known == size:
            return name
    number = sum(name.startswith("phony_dim_") for name in group.dimensions)
    group.dimensions[f"phony_dim_{number}"] = size
    return f"phony_dim_{number}"


def _fill_value(value: object, dtype: str) -> int | float | None:
    kind = np.dtype(dtype).kind
    if value is None:
        return None
    if kind == "f":
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if isinstance(value, str) and value in special:
            return special[value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif isinstance(value, bool | int):
        return int(value)
    raise _Refusal(f"its fill_value {value!r} does not suit its dtype {dtype}")


def _check_names(schema: Schema) -> None:
    """Leave out variables whose name HDF5 or netCDF cannot give them: a group's name, or a
    dimension's name when the variable is not that dimension's coordinate variable."""
    group_names = {(g.path.rpartition("/")[0], g.path.rpartition("/")[2]) for g in schema.groups}
    groups = {group.path: group for group in schema.groups}
    kept: list[Variable] = []
    for variable in schema.variables:
        dimensions = groups[variable.group].dimensions
        if (variable.group, variable.name) in group_names:
            schema.left_out.append(LeftOut(variable.path, "a group has its name"))
        elif variable.name in dimensions and not (
            variable.is_coordinate and dimensions[variable.name] == variable.shape[0]
        ):
            schema.left_out.append(
                LeftOut(variable.path, "a dimension has its name but it is not its coordinate")
            )
        else:
            kept.append(variable)
    schema.variables = kept
