"""``--netcdf`` through real mounts: the root's netCDF-4 file read by netCDF-C (``ncdump``),
netCDF4-python, h5py and xarray equals the original files.

Sets made by kerchunk from a netCDF-4 file (zlib and shuffle, fill values, partial edge
chunks, coordinate variables), an HDF5 file (nested groups, a 0-d dataset, gzip and plain
chunks), a netCDF-3 file (big-endian, unfiltered) and a combination of two netCDF-4 files
along time (MultiZarrToZarr); zarr stores with codecs no netCDF reader has, with and without
``--decode``; the netCDF-4 set as Parquet. A failing target is EIO, never wrong bytes.
"""

from __future__ import annotations

import errno
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration import sources
from tests.integration.sources import Source
from tests.integration.test_interop import dumped_values, run, which
from tests.support.icechunk_repos import build_repository, requires_icechunk
from tests.support.mounting import Mount, mounted, read_errno, refmount_command, requires_fuse
from tests.support.servers import RangeHTTPServer, S3Bucket

pytestmark = [
    pytest.mark.fuse,
    requires_fuse,
    pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated"),
]

h5py = pytest.importorskip("h5py")
netCDF4 = pytest.importorskip("netCDF4")

MOUNTS = {
    "netcdf-json": ("netcdf", "json", ()),
    "netcdf-parquet": ("netcdf", "parquet", ()),
    "hdf5-json": ("hdf5", "json", ()),
    "netcdf3-json": ("netcdf3", "json", ()),
    "multi-json": ("multi", "json", ()),
    "zarr2-json": ("zarr2", "json", ()),
    "zarr2-decode": ("zarr2", "json", ("--decode",)),
    "netcdf-decode": ("netcdf", "json", ("--decode",)),
}


@dataclass(frozen=True)
class Served:
    """A set mounted with ``--netcdf``: its source and the netCDF file."""

    source: Source
    mount: Mount

    @property
    def file(self) -> Path:
        return self.mount.path / f"{self.source.refs.name.split('.')[0]}.nc"


def multi(directory: Path) -> Source:
    """Two netCDF-4 files of three time steps each, combined along time by kerchunk."""
    from kerchunk.combine import MultiZarrToZarr
    from kerchunk.hdf import SingleHdf5ToZarr

    directory.mkdir(parents=True, exist_ok=True)
    singles = []
    for part in range(2):
        path = directory / f"part{part}.nc"
        with netCDF4.Dataset(path, "w") as ds:
            ds.title = "combined"
            ds.createDimension("time", None)
            ds.createDimension("y", 6)
            time = ds.createVariable("time", "f8", ("time",))
            time.units = "days since 2000-01-01"
            time.calendar = "standard"
            time[:] = np.arange(3) + 3 * part
            var = ds.createVariable(
                "tas", "f4", ("time", "y"), zlib=True, shuffle=True, chunksizes=(1, 6)
            )
            var.units = "K"
            var[:] = np.arange(18, dtype="f4").reshape(3, 6) + 100 * part
        singles.append(SingleHdf5ToZarr(str(path), inline_threshold=0).translate())
    refs = MultiZarrToZarr(singles, concat_dims=["time"], identical_dims=["y"]).translate()
    refs_path = directory / "multi.json"
    refs_path.write_text(json.dumps(refs))
    return Source("netcdf", directory / "part*.nc", refs_path, ("tas", "time"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """Make the originals and their references; mount each with ``--netcdf``."""
    pytest.importorskip("scipy", reason="kerchunk's netCDF3 scanner needs scipy")
    root = tmp_path_factory.mktemp("netcdf")
    made = {
        "netcdf": sources.netcdf4(root / "originals"),
        "hdf5": sources.hdf5(root / "originals"),
        "netcdf3": sources.netcdf3(root / "originals"),
        "multi": multi(root / "multi"),
        "zarr2": sources.zarr_codecs(root / "originals")[0],
    }
    with ExitStack() as stack:
        result: dict[str, Served] = {}
        for key, (name, layout, options) in MOUNTS.items():
            source = made[name]
            refs = source.refs
            if layout == "parquet":
                refs = sources.parquet(source, root / f"{name}.parq")
                source = Source(source.kind, source.original, refs, source.arrays)
            mountpoint = root / "mnt" / key
            mount = stack.enter_context(mounted(refs, mountpoint, "--netcdf", *options))
            result[key] = Served(source, mount)
        yield result


def original(source: Source, name: str) -> np.ndarray[Any, Any]:
    """Return array ``name`` of the original file, filled where netCDF4 masks."""
    values = source.read_original(name)
    return np.ma.filled(values, np.nan) if np.ma.isMaskedArray(values) else values


def through_netcdf4(path: Path, name: str) -> np.ndarray[Any, Any]:
    with netCDF4.Dataset(path) as ds:
        values = ds[name][...]
    return np.ma.filled(values, np.nan) if np.ma.isMaskedArray(values) else np.asarray(values)


VARIABLES = {
    "netcdf-json": ("temp", "elevation", "level", "y", "x"),
    "netcdf-parquet": ("temp", "elevation", "level", "y", "x"),
    "netcdf-decode": ("temp", "elevation", "level", "y", "x"),
    "hdf5-json": ("a/b/c/values", "a/scalar", "data"),
    "netcdf3-json": ("t", "e"),
}


@pytest.mark.parametrize("key", list(VARIABLES))
def test_netcdf4_python_reads_the_original_values(served: dict[str, Served], key: str) -> None:
    mount = served[key]
    for name in VARIABLES[key]:
        expected = original(mount.source, name)
        np.testing.assert_array_equal(through_netcdf4(mount.file, name), expected, err_msg=name)


@pytest.mark.parametrize("key", list(VARIABLES))
def test_h5py_reads_the_stored_values(served: dict[str, Served], key: str) -> None:
    mount = served[key]
    with h5py.File(mount.file, "r") as file:
        for name in VARIABLES[key]:
            values = np.asarray(file[name][()])
            expected = mount.source.read_original(name)
            np.testing.assert_array_equal(values, np.ma.getdata(expected), err_msg=name)


def test_the_layout_places_filtered_chunks_as_stored(served: dict[str, Served]) -> None:
    """The chunks of the netCDF-4 set keep their deflate and shuffle filters."""
    with h5py.File(served["netcdf-json"].file, "r") as file:
        temp = file["temp"]
        assert (temp.compression, temp.shuffle, temp.chunks) == ("gzip", True, (2, 4, 5))
    with h5py.File(served["netcdf-decode"].file, "r") as file:
        assert (file["temp"].compression, file["temp"].shuffle) == (None, False)


def test_multi_file_set_reads_as_one_dataset(served: dict[str, Served]) -> None:
    mount = served["multi-json"]
    parts = sorted(mount.source.refs.parent.glob("part*.nc"))
    expected = {}
    for name in ("time", "tas"):
        pieces = []
        for part in parts:
            with netCDF4.Dataset(part) as ds:
                pieces.append(np.asarray(ds[name][...]))
        expected[name] = np.concatenate(pieces)
    with netCDF4.Dataset(mount.file) as ds:
        assert ds["tas"].dimensions == ("time", "y")
        assert ds.title == "combined"
        for name, values in expected.items():
            np.testing.assert_array_equal(np.asarray(ds[name][...]), values, err_msg=name)


@pytest.mark.parametrize(("engine", "module"), [("netcdf4", "netCDF4"), ("h5netcdf", "h5netcdf")])
def test_xarray_equals_the_originals(served: dict[str, Served], engine: str, module: str) -> None:
    xarray = pytest.importorskip("xarray")
    pytest.importorskip(module)
    mount = served["netcdf-json"]
    with (
        xarray.open_dataset(mount.file, engine=engine) as got,
        xarray.open_dataset(mount.source.original, engine="netcdf4") as expected,
    ):
        xarray.testing.assert_identical(got.load(), expected.load())


@pytest.mark.interop
def test_ncdump_header_shows_dimensions_variables_and_attributes(
    served: dict[str, Served],
) -> None:
    which("ncdump", "netcdf-bin")
    header = run(["ncdump", "-h", str(served["netcdf-json"].file)]).stdout
    for line in (
        "level = 5 ;",
        "y = 11 ;",
        "x = 13 ;",
        "float temp(level, y, x) ;",
        "temp:_FillValue = -999.f ;",
        'temp:units = "K" ;',
        "double level(level) ;",
        'level:units = "hPa" ;',
        "short elevation(y, x) ;",
    ):
        assert line in header, header
    nested = run(["ncdump", "-h", str(served["hdf5-json"].file)]).stdout
    assert "group: c {" in nested, nested


@pytest.mark.interop
@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("netcdf-json", "temp"),
        ("netcdf-json", "level"),
        ("netcdf3-json", "t"),
        ("hdf5-json", "data"),
    ],
)
def test_ncdump_values_equal_the_original(served: dict[str, Served], key: str, name: str) -> None:
    which("ncdump", "netcdf-bin")
    mount = served[key]
    output = run(["ncdump", "-v", name, str(mount.file)]).stdout
    expected = original(mount.source, name).ravel()
    np.testing.assert_array_almost_equal(dumped_values(output, name), expected, decimal=3)


@pytest.mark.parametrize("key", ["zarr2-json", "zarr2-decode"])
def test_arrays_without_netcdf_filters_are_served_decoded(
    served: dict[str, Served], key: str
) -> None:
    """zarr codecs no netCDF reader has (blosc, zstd, lz4, delta, Fortran order, ...) are
    decoded, with --decode or without it, and equal what zarr-python reads from the store."""
    mount = served[key]
    with netCDF4.Dataset(mount.file) as ds:
        for name, *_ in sources.ZARR2_ARRAYS:
            expected = mount.source.read_original(name)
            assert ds[name].filters()["zlib"] is False, name
            np.testing.assert_array_equal(np.asarray(ds[name][...]), expected, err_msg=name)
    assert "left out" not in mount.mount.log_text()


def test_the_file_is_listed_and_its_size_is_exact(served: dict[str, Served]) -> None:
    mount = served["netcdf-json"]
    assert mount.file.name in [p.name for p in mount.mount.path.iterdir()]
    assert mount.file.stat().st_size == len(mount.file.read_bytes())


def test_the_layout_is_the_same_every_time(served: dict[str, Served], tmp_path: Path) -> None:
    first = served["netcdf-json"]
    with mounted(first.source.refs, tmp_path / "again", "--netcdf-eager") as again:
        assert (again.path / first.file.name).read_bytes() == first.file.read_bytes()


def test_a_failing_target_is_eio_and_the_rest_is_served(tmp_path: Path) -> None:
    source = sources.netcdf4(tmp_path / "originals")
    with mounted(source.refs, tmp_path / "mnt", "--netcdf") as mount:
        served = mount.path / "data.nc"
        with open(source.original, "r+b") as original:
            original.truncate(4096)  # the header stays, the chunks are gone
        assert read_errno(served) == errno.EIO
        assert read_errno(served) == errno.EIO  # again: never zeros, never short
        assert (mount.path / ".zgroup").read_bytes()  # the rest is served
        log = mount.log_text()
        pattern = rf"ERROR .*key '(temp|elevation)/[\d.]+' \({re.escape(str(source.original))}\)"
        assert re.search(pattern, log), log


def test_malformed_attributes_stop_the_mount_naming_the_key(tmp_path: Path) -> None:
    refs = json.loads(sources.netcdf4(tmp_path / "originals").refs.read_text())
    refs["refs"]["temp/.zattrs"] = "[1, 2]"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(refs))
    (tmp_path / "mnt").mkdir()
    result = subprocess.run(
        refmount_command("-f", "--netcdf", str(path), str(tmp_path / "mnt")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert f"{path}: key 'temp/.zattrs': attributes must be a JSON object" in result.stderr


def test_netcdf_name_names_the_file(tmp_path: Path) -> None:
    source = sources.netcdf3(tmp_path / "originals")
    with mounted(source.refs, tmp_path / "mnt", "-o", "netcdf_name=all.nc") as mount:
        assert (
            shutil.which("ncdump") is None
            or "t(y, x)" in run(["ncdump", "-h", str(mount.path / "all.nc")]).stdout
        )
        with netCDF4.Dataset(mount.path / "all.nc") as ds:
            assert set(ds.variables) == {"t", "e"}


def undecodable(tmp_path: Path) -> Path:
    """The zarr codecs set plus an array of a codec refmount never runs and a complex one."""
    source = sources.zarr_codecs(tmp_path / "originals")[0]
    refs = source.refs_dict()
    entries = refs.get("refs", refs)
    meta = {"zarr_format": 2, "shape": [2], "chunks": [2], "order": "C", "filters": None}
    entries["p/.zarray"] = json.dumps({**meta, "dtype": "<i4", "compressor": {"id": "pickle"}})
    entries["p/0"] = "base64:AAAA"
    entries["c/.zarray"] = json.dumps({**meta, "dtype": "<c8", "compressor": None})
    entries["c/0"] = "base64:" + "A" * 24
    path = tmp_path / "undecodable.json"
    path.write_text(json.dumps(refs))
    return path


def test_arrays_nothing_can_express_are_left_out_and_check_lists_them(tmp_path: Path) -> None:
    refs = undecodable(tmp_path)

    def check(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            refmount_command("check", *options, str(refs)),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    result = check("--netcdf")
    assert result.returncode == 0, result.stderr
    assert "--netcdf    2 arrays left out" in result.stdout, result.stdout
    assert "  c  its dtype '<c8' has no netCDF type" in result.stdout
    assert (
        "  p  its codec 'pickle' has no HDF5 filter every netCDF reader has, and it is not decoded"
        in result.stdout
    )
    decoded = json.loads(check("--netcdf", "--decode", "--json").stdout)
    assert [entry["array"] for entry in decoded["netcdf"]["left_out"]] == ["c", "p"]
    assert "netcdf" not in json.loads(check("--json").stdout)
    with mounted(refs, tmp_path / "mnt", "--netcdf") as mount:
        with netCDF4.Dataset(mount.path / "undecodable.nc") as ds:
            assert "zstd" in ds.variables
            assert not {"p", "c"} & set(ds.variables)
        log = mount.log_text()
        assert "--netcdf: array 'p' is left out: its codec 'pickle'" in log, log


def remote_refs(local: Served, url: str, path: Path) -> Path:
    """Write ``local``'s references with every range pointing at ``url`` instead."""
    refs = json.loads(local.source.refs.read_text())
    for key, value in refs["refs"].items():
        if isinstance(value, list):
            refs["refs"][key] = [url, *value[1:]]
    path.write_text(json.dumps(refs))
    return path


@pytest.mark.http
def test_the_file_reads_the_same_over_http(
    served: dict[str, Served], tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    local = served["netcdf-json"]
    url = http_server.add("data.nc", local.source.original.read_bytes())
    refs = remote_refs(local, url, tmp_path / "data.nc.json")
    with mounted(refs, tmp_path / "mnt", "--netcdf") as mount:
        assert (mount.path / "data.nc").read_bytes() == local.file.read_bytes()


@pytest.mark.s3
def test_the_file_reads_the_same_over_s3(
    served: dict[str, Served], tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    local = served["netcdf-json"]
    url = s3_bucket.put("data.nc", local.source.original.read_bytes())
    refs = remote_refs(local, url, tmp_path / "data.nc.json")
    endpoint = f"s3_endpoint_url={s3_bucket.endpoint_url}"
    with mounted(refs, tmp_path / "mnt", "--netcdf", "-o", endpoint) as mount:
        assert (mount.path / "data.nc").read_bytes() == local.file.read_bytes()
        with netCDF4.Dataset(mount.path / "data.nc") as ds:
            np.testing.assert_array_equal(
                through_netcdf4(mount.path / "data.nc", "temp"), original(local.source, "temp")
            )
            assert ds["temp"].dimensions == ("level", "y", "x")


@pytest.mark.interop
def test_gdal_reads_a_variable_through_its_netcdf_driver(served: dict[str, Served]) -> None:
    which("gdalinfo", "gdal-bin")
    mount = served["netcdf-json"]
    output = run(["gdalinfo", "-json", "-stats", f'NETCDF:"{mount.file}":elevation']).stdout
    band = json.loads(output)["bands"][0]
    values = original(mount.source, "elevation")
    assert (band["minimum"], band["maximum"]) == (values.min(), values.max())
    assert band["mean"] == pytest.approx(values.mean())


@pytest.mark.interop
def test_cdo_lists_the_time_steps_of_both_files_with_their_dates(
    served: dict[str, Served],
) -> None:
    which("cdo", "cdo")
    stamps = run(["cdo", "-s", "showtimestamp", str(served["multi-json"].file)]).stdout.split()
    assert stamps == [f"2000-01-0{day}T00:00:00" for day in range(1, 7)]


@pytest.mark.interop
def test_ncks_values_equal_the_original(served: dict[str, Served]) -> None:
    which("ncks", "nco")
    mount = served["netcdf-json"]
    output = run(["ncks", "--jsn", "-C", "-v", "temp", str(mount.file)]).stdout
    values = np.array(json.loads(output)["variables"]["temp"]["data"], dtype="f4")
    expected = mount.source.read_original("temp")
    np.testing.assert_array_equal(values, np.ma.filled(expected, -999.0))


@pytest.mark.interop
def test_h5dump_reads_it_as_an_hdf5_file(served: dict[str, Served]) -> None:
    which("h5dump", "hdf5-tools")
    mount = served["netcdf-json"]
    header = run(["h5dump", "-H", str(mount.file)]).stdout
    for name in ("temp", "elevation", "level", "y", "x"):
        assert f'DATASET "{name}"' in header, header
    assert 'ATTRIBUTE "DIMENSION_LIST"' in header
    run(["h5dump", "-d", "/elevation", str(mount.file)])  # every chunk read, exit status 0


@requires_icechunk
@pytest.mark.parametrize("options", [(), ("--decode",), ("--zarr-format", "2")])
def test_an_icechunk_repositorys_file_holds_its_v3_arrays(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """zarr v3 arrays (native zstd, virtual, inline, sparse chunks) through their v2 view."""
    built = build_repository(tmp_path / "repo")
    expected = built.arrays[built.second]
    flags = ("--netcdf", "--authorize-container", "all", *options)
    with mounted(built.path, tmp_path / "mnt", *flags) as mount:
        with netCDF4.Dataset(mount.path / "repo.nc") as dataset:
            dataset.set_auto_mask(False)
            for path, values in expected.items():
                variable = dataset[path if "/" not in path else "/" + path]
                np.testing.assert_array_equal(variable[...], values, err_msg=path)
        assert [p.name for p in mount.path.iterdir() if p.name == "zarr.json"] == (
            [] if options == ("--zarr-format", "2") else ["zarr.json"]
        )  # the tree keeps its own format; the file is v2's either way
