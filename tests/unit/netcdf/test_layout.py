"""The layout: a netCDF-4 file that h5py and netCDF4 read as netCDF-C writes it, each chunk
where HDF5's own index says it is, the same bytes every time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest

from refmount.model import Inline, Range
from refmount.netcdf.chunks import Chunks
from refmount.netcdf.layout import Layout, lay_out
from refmount.netcdf.schema import Schema, schema_of
from tests.fakes import DictReferences, MemoryTarget
from tests.unit.netcdf.conftest import DEPTH, TEMP, TIME, document, make_set


def image(
    layout: Layout, schema: Schema, references: DictReferences, target: MemoryTarget
) -> bytes:
    """Return the whole file: the metadata, and each chunk's referenced bytes in its place."""
    out = layout.pages.read(0, layout.size)
    chunks = Chunks(references)
    for start, length, number, index in zip(
        layout.starts, layout.lengths, layout.variables, layout.indices, strict=True
    ):
        reference = chunks.chunk(schema.variables[int(number)], int(index))
        if isinstance(reference, Inline):
            data = reference.data
        else:
            assert isinstance(reference, Range)
            data = target.objects[reference.url][
                reference.offset : reference.offset + reference.length
            ]
        out[int(start) : int(start) + int(length)] = data
    return bytes(out)


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, Layout, Schema]:
    references, target = make_set()
    schema = schema_of(references, "root")
    layout = lay_out(schema, Chunks(references).lengths)
    path = tmp_path / "set.nc"
    path.write_bytes(image(layout, schema, references, target))
    return path, layout, schema


def test_netcdf4_reads_the_values_dimensions_and_attributes(
    written: tuple[Path, Layout, Schema],
) -> None:
    path, _, _ = written
    with netCDF4.Dataset(path) as ds:
        assert ds.data_model == "NETCDF4"
        assert {name: len(d) for name, d in ds.dimensions.items()} == {"time": 4, "x": 6}
        np.testing.assert_array_equal(ds["temp"][...], TEMP)
        np.testing.assert_array_equal(ds["time"][...], TIME)
        assert ds["height"][...] == 2.5
        np.testing.assert_array_equal(ds["deep/depth"][...], DEPTH)
        assert ds["deep/depth"].dimensions == ("level",)
        assert ds["temp"].dimensions == ("time", "x")
        assert ds["temp"].getncattr("_FillValue") == np.float32(-999.0)
        assert ds["temp"].units == "K"
        np.testing.assert_array_equal(ds["temp"].valid_range, [0.5, 400.0])
        assert (ds.title, ds.note, ds.version) == ("ascii text", "ünïcode ☃", 3)


def test_text_is_nc_char_when_ascii_and_dimensions_are_netcdf_c_scales(
    written: tuple[Path, Layout, Schema],
) -> None:
    path, _, _ = written
    with h5py.File(path, "r") as file:
        title = file.attrs.get_id("title").get_type()
        assert (title.get_class(), title.is_variable_str()) == (h5py.h5t.STRING, False)
        assert file.attrs.get_id("note").get_type().is_variable_str()
        assert file.attrs["_NCProperties"].startswith(b"version=2,refmount=")
        x = file["x"]
        assert x.attrs["CLASS"] == b"DIMENSION_SCALE"
        assert x.attrs["NAME"].startswith(b"This is a netCDF dimension but not a netCDF variable.")
        assert file["time"].attrs["NAME"] == b"time"  # a coordinate variable is its scale
        ids = sorted(int(file[name].attrs["_Netcdf4Dimid"]) for name in ("time", "x"))
        assert ids == [0, 1]
        assert [d[0].name for d in file["temp"].dims] == ["/time", "/x"]
        assert (file["temp"].compression, file["temp"].shuffle) == ("gzip", True)


def test_each_chunk_lies_where_the_chunk_index_says(written: tuple[Path, Layout, Schema]) -> None:
    path, layout, schema = written
    placed = {
        (schema.variables[int(v)].path, int(i)): (int(s), int(n))
        for s, n, v, i in zip(
            layout.starts, layout.lengths, layout.variables, layout.indices, strict=True
        )
    }
    found: dict[tuple[str, int], tuple[int, int]] = {}
    with h5py.File(path, "r") as file:
        for variable in schema.variables:
            dataset = file[variable.path]
            if not variable.shape:
                found[(variable.path, 0)] = (dataset.id.get_offset(), dataset.id.get_storage_size())
                continue
            for number in range(dataset.id.get_num_chunks()):
                info = dataset.id.get_chunk_info(number)
                index = int(
                    np.ravel_multi_index(
                        [o // c for o, c in zip(info.chunk_offset, variable.chunks, strict=True)],
                        variable.grid.shape,
                    )
                )
                found[(variable.path, index)] = (info.byte_offset, info.size)
    assert found == placed
    assert list(layout.starts) == sorted(layout.starts)


def test_the_layout_is_the_same_every_time() -> None:
    references, _ = make_set()
    schema = schema_of(references, "root")
    first = lay_out(schema, Chunks(references).lengths)
    second = lay_out(schema_of(references, "root"), Chunks(references).lengths)
    assert first.pages == second.pages
    assert first.starts.tolist() == second.starts.tolist()


def test_chunks_never_written_read_as_the_fill_value(tmp_path: Path) -> None:
    references, target = make_set()
    del references.explicit["temp/1.0"]
    schema = schema_of(references, "root")
    layout = lay_out(schema, Chunks(references).lengths)
    path = tmp_path / "sparse.nc"
    path.write_bytes(image(layout, schema, references, target))
    with netCDF4.Dataset(path) as ds:
        values: Any = ds["temp"][...]
    np.testing.assert_array_equal(values[:2], TEMP[:2])
    assert values.mask[2:].all()  # -999: netCDF4 masks the fill value


def test_the_held_memory_is_metadata_and_the_table_only() -> None:
    references, _ = make_set()
    layout = lay_out(schema_of(references, "root"), Chunks(references).lengths)
    assert len(layout.starts) == 5  # temp's two, time, height, depth
    assert layout.nbytes < 64 * 1024


def test_an_attribute_hdf5_cannot_hold_is_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    references, target = make_set(
        extra={"time/.zattrs": document({"_ARRAY_DIMENSIONS": ["time"], "": 1, "empty": ""})}
    )
    schema = schema_of(references, "root")
    layout = lay_out(schema, Chunks(references).lengths)
    path = tmp_path / "odd.nc"
    path.write_bytes(image(layout, schema, references, target))
    with netCDF4.Dataset(path) as ds:
        assert ds["time"].getncattr("empty") == ""
    assert "attribute '' of 'time' is left out" in caplog.text


def test_an_array_hdf5_refuses_is_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from refmount.netcdf import layout as module

    real = module._create

    def refusing(file: Any, variable: Any, scales: Any) -> Any:
        if variable.path == "temp":
            raise RuntimeError("injected refusal")
        return real(file, variable, scales)

    monkeypatch.setattr(module, "_create", refusing)
    references, target = make_set()
    schema = schema_of(references, "root")
    layout = lay_out(schema, Chunks(references).lengths)
    path = tmp_path / "partial.nc"
    path.write_bytes(image(layout, schema, references, target))
    with netCDF4.Dataset(path) as ds:
        assert "temp" not in ds.variables
        np.testing.assert_array_equal(ds["time"][...], TIME)
    assert "array 'temp' is left out: HDF5 refused it: injected refusal" in caplog.text
