"""The netCDF file's name: made from the reference file's, or given and checked."""

from __future__ import annotations

import pytest

from refmount.netcdf.naming import checked_name, default_name, stem


@pytest.mark.parametrize(
    ("refs", "name"),
    [
        ("/data/refs.json", "refs.nc"),
        ("/data/era5.json.zst", "era5.nc"),
        ("/data/data.nc.json", "data.nc"),
        ("s3://bucket/sets/combined.parq/", "combined.nc"),
        ("https://host/a/b.json?sig=1", "b.nc"),
        ("-", "refs.nc"),
        ("/data/.json", ".json.nc"),
    ],
)
def test_default_names(refs: str, name: str) -> None:
    assert default_name(refs) == name


def test_a_stem_keeps_what_is_not_a_known_suffix() -> None:
    assert stem("/x/run.v2.json") == "run.v2"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 256, "nul\0"])
def test_names_no_file_can_have_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="cannot name a file"):
        checked_name(name)
