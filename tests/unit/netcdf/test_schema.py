"""The schema: groups, dimensions, variables and filters from zarr v2 metadata, and what is
left out or renamed, and why."""

from __future__ import annotations

import math

import pytest

from refmount.errors import ReferenceFormatError
from refmount.model import Inline, Range, Reference
from refmount.netcdf.schema import DEFLATE, SHUFFLE, Filter, schema_of
from tests.fakes import DictReferences
from tests.unit.netcdf.conftest import CACHE, document, make_set, zarray


def test_groups_dimensions_and_variables() -> None:
    schema = schema_of(make_set()[0], "root")
    assert [group.path for group in schema.groups] == ["", "deep"]
    root, deep = schema.groups
    assert root.dimensions == {"time": 4, "x": 6}
    assert deep.dimensions == {"level": 3}  # a dimension given as a path: its name
    assert root.attributes["note"] == "ünïcode ☃"
    variables = {variable.path: variable for variable in schema.variables}
    temp = variables["temp"]
    assert (temp.dimensions, temp.chunks, temp.dtype) == (("time", "x"), (2, 6), "<f4")
    assert temp.filters == (Filter(SHUFFLE), Filter(DEFLATE, (4,)))
    assert temp.fill_value == -999.0
    assert "_ARRAY_DIMENSIONS" not in temp.attributes
    assert variables["time"].is_coordinate
    assert variables["height"].shape == ()
    assert math.isnan(variables["height"].fill_value or 0.0)
    assert (variables["deep/depth"].group, variables["deep/depth"].name) == ("deep", "depth")
    assert variables["deep/depth"].dtype == ">i2"  # big-endian stays: HDF5 has it
    assert not schema.left_out
    assert not schema.renamed


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"compressor": {"id": "zstd"}, "filters": None}, "codec 'zstd'"),
        ({"filters": [{"id": "shuffle", "elementsize": 2}]}, "2-byte elements"),
        ({"order": "F"}, "Fortran order"),
        ({"dtype": "<c8"}, "no netCDF type"),
        ({"dtype": "|O"}, "no netCDF type"),
        ({"dtype": "<M8[ns]"}, "no netCDF type"),
        ({"fill_value": "x"}, "fill_value"),
        ({"compressor": {"id": "gzip"}, "filters": None}, "codec 'gzip'"),
    ],
)
def test_arrays_that_cannot_be_expressed_are_left_out(
    change: dict[str, object], reason: str
) -> None:
    schema = schema_of(make_set(temp=change)[0], "root")
    assert [left.path for left in schema.left_out] == ["temp"]
    assert reason in schema.left_out[0].describe()
    assert "temp" not in {variable.path for variable in schema.variables}


def test_booleans_are_bytes_and_missing_dimension_names_are_phony() -> None:
    extra = {"flags/.zarray": zarray([3, 6], [3, 6], "|b1"), "flags/0.0": Inline(bytes(18))}
    schema = schema_of(make_set(extra=extra)[0], "root")
    flags = next(v for v in schema.variables if v.path == "flags")
    assert flags.dtype == "|u1"
    assert flags.dimensions == ("phony_dim_0", "phony_dim_1")  # one per size, as h5netcdf
    assert schema.groups[0].dimensions["phony_dim_0"] == 3


def test_one_name_with_two_sizes_gets_a_name_per_size() -> None:
    """Arrays are taken in key order: the first gives a name its size."""
    extra = {
        "other/.zarray": zarray([5], [5], "<i4"),
        "other/.zattrs": document({"_ARRAY_DIMENSIONS": ["x"]}),
    }
    schema = schema_of(make_set(extra=extra)[0], "root")
    dimensions = {v.path: v.dimensions for v in schema.variables}
    assert (dimensions["other"], dimensions["temp"]) == (("x",), ("time", "x_6"))
    assert schema.groups[0].dimensions["x_6"] == 6
    assert schema.renamed == [
        "array 'temp': dimension 'x' has size 5 elsewhere in its group; here (size 6) it is 'x_6'"
    ]


def test_a_root_array_is_named_after_the_file() -> None:
    keys: dict[str, Reference] = {
        ".zarray": zarray([2], [2], "<i2"),
        "0": Range("memory://x", 0, 4),
    }
    schema = schema_of(DictReferences(keys), "scene")
    assert [(v.group, v.name) for v in schema.variables] == [("", "scene")]


def test_a_variable_named_like_a_dimension_it_does_not_describe_is_left_out() -> None:
    extra = {
        "x/.zarray": zarray([4, 6], [4, 6], "<f4"),
        "x/.zattrs": document({"_ARRAY_DIMENSIONS": ["time", "x"]}),
    }
    schema = schema_of(make_set(extra=extra)[0], "root")
    assert [left.path for left in schema.left_out] == ["x"]


def test_consolidated_metadata_is_read_too() -> None:
    keys: dict[str, Reference] = {
        ".zmetadata": document(
            {
                "metadata": {
                    ".zgroup": {"zarr_format": 2},
                    "v/.zarray": json_text(zarray([2], [2], "<i2")),
                    "v/.zattrs": {"_ARRAY_DIMENSIONS": ["n"]},
                },
                "zarr_consolidated_format": 1,
            }
        ),
        "v/0": Inline(bytes(4)),
    }
    schema = schema_of(DictReferences(keys), "root")
    assert [(v.path, v.dimensions) for v in schema.variables] == [("v", ("n",))]


def json_text(reference: Inline) -> str:
    return reference.data.decode()


def test_malformed_metadata_names_the_set_and_the_key() -> None:
    with pytest.raises(ReferenceFormatError, match=r"key 'temp/\.zattrs': attributes must be"):
        schema_of(make_set(extra={"temp/.zattrs": document([1])})[0], "root")
    with pytest.raises(ReferenceFormatError, match=r"key 'temp/\.zarray': not valid JSON"):
        schema_of(make_set(extra={"temp/.zarray": Inline(b"{")})[0], "root")


def test_metadata_in_a_target_is_left_out() -> None:
    extra = {"far/.zarray": Range("memory://meta", 0, 10)}
    schema = schema_of(make_set(extra=extra)[0], "root")
    assert [left.path for left in schema.left_out] == ["far"]


def test_an_array_the_decoded_view_decodes_becomes_a_decoded_variable() -> None:
    from refmount.decode.view import DecodedReferences, plan

    references, _ = make_set(temp={"filters": None, "compressor": {"id": "zstd", "level": 1}})
    view = DecodedReferences(references, plan(references, CACHE))
    without = schema_of(references, "root")
    assert [left.path for left in without.left_out] == ["temp"]
    schema = schema_of(references, "root", view)
    temp = next(v for v in schema.variables if v.path == "temp")
    assert (temp.decoded, temp.filters, temp.dtype) == (True, (), "<f4")
    assert not next(v for v in schema.variables if v.path == "time").decoded
    assert not schema.left_out


def test_zarr_v3_arrays_are_left_out_for_now() -> None:
    v3 = {"zarr_format": 3, "node_type": "array", "shape": [2], "data_type": "int16"}
    extra = {
        "v3/zarr.json": document(v3),
        "g3/zarr.json": document({"zarr_format": 3, "node_type": "group"}),
    }
    schema = schema_of(make_set(extra=extra)[0], "root")
    assert [(left.path, left.reason) for left in schema.left_out] == [
        ("v3", "zarr v3 arrays are not mapped to netCDF yet")
    ]
