"""The netCDF-4 file of a schema laid out with h5py: every byte of metadata, and where each
chunk's referenced bytes go.

The file is written into a ``Recorder``: groups, dimension scales, variables and attributes as
netCDF-C writes them, and each chunk given to ``write_direct_chunk`` as a placeholder of its
exact stored length, which the recorder places but does not keep. What stays is the metadata
(``Pages``) and a chunk table sorted by file offset: memory linear in the chunk count. The
layout is deterministic for a given set: no times are stored, the format is HDF5's earliest
and objects are written in a fixed order.

Metadata and chunks are interleaved, as HDF5 allocates them (h5py's file-object driver does
not aggregate metadata): a read that spans a chunk whose target fails is EIO, even when the
reader wanted the metadata beside it (netCDF-C reads 128 KiB at once to find the format).
"""

from __future__ import annotations

import array
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from refmount.netcdf.recorder import Pages, Recorder
from refmount.netcdf.schema import Schema, Variable
from refmount.release import __version__

log = logging.getLogger(__name__)

NOT_A_VARIABLE = b"This is a netCDF dimension but not a netCDF variable."
"""The ``NAME`` netCDF-C gives the scale of a dimension without a coordinate variable."""

DIMENSION_ID = "_Netcdf4Dimid"
FILL_VALUE = "_FillValue"
PROPERTIES = "_NCProperties"

LIBVER = ("v110", "v110")
"""The oldest HDF5 format that holds the file: every netCDF-4 reader, whatever its HDF5."""

PLACEHOLDER = 0xA5
"""The byte placeholders are made of (the recorder does not keep them)."""

PAYLOADS_KEPT = 256
"""Placeholder views kept by length while placing a variable's chunks (bounded: the lengths
of compressed chunks hardly recur)."""

ChunkLengths = Callable[[Variable], Iterator[tuple[int, int]]]
"""For a variable: ``(chunk index, stored length)`` of each chunk that exists, in order."""


@dataclass(frozen=True, slots=True)
class Layout:
    """A laid-out file: its size, metadata, and its chunks sorted by file offset
    (``starts``, ``lengths``; ``variables`` index the schema's variables and ``indices`` are
    chunk indices in each variable's grid)."""

    size: int
    pages: Pages
    starts: np.ndarray[Any, np.dtype[np.uint64]]
    lengths: np.ndarray[Any, np.dtype[np.uint64]]
    variables: np.ndarray[Any, np.dtype[np.uint32]]
    indices: np.ndarray[Any, np.dtype[np.uint64]]

    @property
    def nbytes(self) -> int:
        """Return the memory the layout holds."""
        arrays = (self.starts, self.lengths, self.variables, self.indices)
        return self.pages.nbytes + sum(a.nbytes for a in arrays)


class _Table:
    """The chunk table while it is being written: compact columns."""

    def __init__(self) -> None:
        self.starts = array.array("Q")
        self.lengths = array.array("Q")
        self.variables = array.array("I")
        self.indices = array.array("Q")

    def add(self, start: int, length: int, variable: int, index: int) -> None:
        self.starts.append(start)
        self.lengths.append(length)
        self.variables.append(variable)
        self.indices.append(index)


def lay_out(schema: Schema, chunk_lengths: ChunkLengths) -> Layout:
    """Return the layout of ``schema``'s file, the chunks ``chunk_lengths`` gives placed."""
    recorder = Recorder()
    table = _Table()
    with h5py.File(recorder, "w", libver=LIBVER, track_order=False) as file:
        file.attrs.create(PROPERTIES, np.bytes_(_properties()))
        scales, dimension_ids = _write_groups(file, schema)
        created: set[str] = set()
        for number, variable in enumerate(schema.variables):
            try:
                dataset = _create(file, variable, scales)
            except (ValueError, TypeError, KeyError, OSError, RuntimeError) as error:
                log.warning(
                    "--netcdf: array %r is left out: HDF5 refused it: %s", variable.path, error
                )
                continue
            created.add(variable.path)
            _place(dataset, variable, number, chunk_lengths(variable), recorder, table)
            if not variable.shape:
                _place_scalar(dataset, variable, number, table)
        _attach(file, schema, scales, dimension_ids, created)
    order = np.argsort(np.frombuffer(table.starts, dtype=np.uint64), kind="stable")
    pages = recorder.pages()
    return Layout(
        size=max(recorder.size, _end_of_file(pages)),
        pages=pages,
        starts=np.frombuffer(table.starts, dtype=np.uint64)[order],
        lengths=np.frombuffer(table.lengths, dtype=np.uint64)[order],
        variables=np.frombuffer(table.variables, dtype=np.uint32)[order],
        indices=np.frombuffer(table.indices, dtype=np.uint64)[order],
    )


def _end_of_file(pages: Pages) -> int:
    """Return the end of file the superblock (version 2 or 3, as ``LIBVER`` makes it) states:
    HDF5 may allocate the last bytes without writing them, and a shorter file is refused
    as truncated."""
    head = bytes(pages.read(0, 36))
    if head[:8] != b"\x89HDF\r\n\x1a\n" or head[8] not in (2, 3):
        raise RuntimeError(f"HDF5 wrote an unexpected superblock: {head[:9]!r}")
    return int.from_bytes(head[28:36], "little")


def _properties() -> str:
    return (
        f"version=2,refmount={__version__},hdf5={h5py.version.hdf5_version},h5py={h5py.__version__}"
    )


Scales = dict[tuple[str, str], h5py.Dataset]
"""The dimension scales by (group path, dimension name)."""


def _write_groups(file: h5py.File, schema: Schema) -> tuple[Scales, dict[tuple[str, str], int]]:
    """Create the groups, their attributes and the scales of dimensions that have no
    coordinate variable; return those scales (the coordinate variables' come later) and
    every dimension's number."""
    coordinates = {(v.group, v.name) for v in schema.variables if v.is_coordinate}
    scales: Scales = {}
    dimension_ids: dict[tuple[str, str], int] = {}
    for group in schema.groups:
        node = file if not group.path else file.create_group(group.path, track_order=False)
        _write_attributes(node.attrs, group.attributes, group.path or "/")
        for name, size in group.dimensions.items():
            if (group.path, name) not in coordinates:
                scale = node.create_dataset(name, shape=(size,), dtype=">f4")
                scale.make_scale(NOT_A_VARIABLE.decode() + f"{size:10d}")
                scales[(group.path, name)] = scale
            dimension_ids[(group.path, name)] = len(dimension_ids)
    return scales, dimension_ids


def _create(file: h5py.File, variable: Variable, scales: Scales) -> h5py.Dataset:
    """Create the dataset of a variable: its type, shape, chunking, filters and fill."""
    group = file[variable.group] if variable.group else file
    dtype = np.dtype(variable.dtype)
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    plist.set_obj_track_times(False)
    if variable.shape:
        plist.set_chunk(variable.chunks)
        for step in variable.filters:
            plist.set_filter(step.id, 0, step.values)
    if variable.fill_value is not None:
        plist.set_fill_value(np.array(variable.fill_value, dtype=dtype))
    maximum = tuple(max(n, c) for n, c in zip(variable.shape, variable.chunks, strict=True))
    space = (
        h5py.h5s.create_simple(variable.shape, maximum)
        if variable.shape
        else (h5py.h5s.create(h5py.h5s.SCALAR))
    )
    identifier = h5py.h5d.create(
        group.id, variable.name.encode(), h5py.h5t.py_create(dtype), space, dcpl=plist
    )
    dataset = h5py.Dataset(identifier)
    if variable.fill_value is not None:
        dataset.attrs.create(FILL_VALUE, np.array(variable.fill_value, dtype=dtype))
    _write_attributes(dataset.attrs, variable.attributes, variable.path)
    if variable.is_coordinate:
        dataset.make_scale(variable.name)
        scales[(variable.group, variable.name)] = dataset
    return dataset


def _place(
    dataset: h5py.Dataset,
    variable: Variable,
    number: int,
    chunks: Iterator[tuple[int, int]],
    recorder: Recorder,
    table: _Table,
) -> None:
    """Write a placeholder for each existing chunk of a chunked variable; record where."""
    if not variable.shape:
        return
    placeholder = memoryview(b"")
    payloads: dict[int, memoryview] = {}  # a few lengths recur (unfiltered: one)
    write, place = dataset.id.write_direct_chunk, recorder.place
    starts, lengths = table.starts.append, table.lengths.append
    variables, indices = table.variables.append, table.indices.append
    strides = [math.prod(variable.grid.shape[axis + 1 :]) for axis in range(len(variable.shape))]
    steps = list(zip(strides, variable.grid.shape, variable.chunks, strict=True))
    for index, length in chunks:
        payload = payloads.get(length)
        if payload is None:
            if length > len(placeholder):
                placeholder = memoryview(bytes([PLACEHOLDER]) * max(length, 2 * len(placeholder)))
                payloads.clear()
            if len(payloads) >= PAYLOADS_KEPT:
                payloads.clear()
            payload = payloads[length] = placeholder[:length]
        starts(place(write, tuple([index // s % e * c for s, e, c in steps]), payload))
        lengths(length)
        variables(number)
        indices(index)


def _place_scalar(dataset: h5py.Dataset, variable: Variable, number: int, table: _Table) -> None:
    """Give a 0-d variable (contiguous, unfiltered) its storage, and record where it lies:
    its few bytes are written, and kept, like metadata; its reference serves them."""
    dataset[()] = np.zeros((), dtype=variable.dtype)
    start = dataset.id.get_offset()
    if start is not None:
        table.add(start, np.dtype(variable.dtype).itemsize, number, 0)


def _attach(
    file: h5py.File,
    schema: Schema,
    scales: Scales,
    dimension_ids: Mapping[tuple[str, str], int],
    created: set[str],
) -> None:
    """Attach each variable's dimension scales (``DIMENSION_LIST`` and ``REFERENCE_LIST``)
    and number every dimension (``_Netcdf4Dimid``); a scale whose coordinate variable HDF5
    refused is not attached."""
    for (group, name), scale in scales.items():
        scale.attrs.create(DIMENSION_ID, np.int32(dimension_ids[(group, name)]))
    for variable in schema.variables:
        if variable.is_coordinate or not variable.shape or variable.path not in created:
            continue
        dataset = file[f"{variable.group}/{variable.name}" if variable.group else variable.name]
        for axis, dimension in enumerate(variable.dimensions):
            scale = scales.get((variable.group, dimension))
            if scale is not None:
                dataset.dims[axis].attach_scale(scale)


def _write_attributes(
    attributes: h5py.AttributeManager, values: Mapping[str, Any], where: str
) -> None:
    """Write zarr attributes as netCDF-C writes them: ASCII text as fixed-length ``NC_CHAR``,
    other text as ``NC_STRING``, numbers as 64-bit arrays, anything else as JSON text. One
    HDF5 cannot hold (an empty name, say) is left out with a warning, not the whole file."""
    for name, value in values.items():
        converted = _attribute(value)
        if converted is None:
            continue
        try:
            attributes.create(name, converted)
        except (ValueError, TypeError, KeyError, OSError, RuntimeError) as error:
            log.warning("--netcdf: attribute %r of %r is left out: %s", name, where, error)


def _attribute(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool):
        return np.int8(value)
    if _is_int64(value):
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    if isinstance(value, list) and value:
        if all(isinstance(v, bool) for v in value):
            return np.array(value, dtype=np.int8)
        if all(
            isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 for v in value
        ):
            return np.array(value, dtype=np.int64)
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            return np.array(value, dtype=np.float64)
        if all(isinstance(v, str) for v in value):
            return np.array(value, dtype=h5py.string_dtype("utf-8"))
    return _text(json.dumps(value))


def _is_int64(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _text(value: str) -> Any:
    if value.isascii() and value:
        return np.bytes_(value.encode())
    return np.array(value, dtype=h5py.string_dtype("utf-8"))


def chunk_count(variable: Variable) -> int:
    """Return how many chunks a variable's grid has."""
    return math.prod(variable.grid.shape)
