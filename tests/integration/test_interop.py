"""Programs that are not refmount read what it mounts: zarr-python, GDAL and netCDF-C, on
references that kerchunk makes from real netCDF4/HDF5 files written by the test."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import fsspec
import numpy as np
import pytest

from tests.integration.mounting import mounted, requires_fuse

pytestmark = [pytest.mark.fuse, requires_fuse]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "air" / "refs.json"


def write_netcdf(path: Path) -> np.ndarray:
    netcdf4 = pytest.importorskip("netCDF4")
    values = np.arange(6 * 7 * 9, dtype="f4").reshape(6, 7, 9) / 10 + 250
    with netcdf4.Dataset(path, "w") as ds:
        ds.title = "interop test: ünïcode ☃"
        for name, size in (("t", 6), ("y", 7), ("x", 9)):
            ds.createDimension(name, size)
        var = ds.createVariable(
            "temp",
            "f4",
            ("t", "y", "x"),
            zlib=True,
            shuffle=False,
            chunksizes=(2, 4, 4),
            fill_value=-999.0,
        )
        var.units = "K"
        var[:] = values
        group = ds.createGroup("inner")
        group.createDimension("n", 5)
        group.createVariable("count", "i4", ("n",))[:] = np.arange(5)
    return values


def kerchunk_refs(source: Path, refs_path: Path) -> dict[str, object]:
    hdf = pytest.importorskip("kerchunk.hdf")
    refs: dict[str, object] = hdf.SingleHdf5ToZarr(str(source), inline_threshold=50).translate()
    refs_path.write_text(json.dumps(refs))
    return refs


@pytest.fixture
def netcdf_refs(tmp_path: Path) -> tuple[Path, np.ndarray]:
    source = tmp_path / "data.nc"
    values = write_netcdf(source)
    refs_path = tmp_path / "refs.json"
    kerchunk_refs(source, refs_path)
    return refs_path, values


def test_every_key_equals_fsspec_cat(tmp_path: Path, netcdf_refs: tuple[Path, np.ndarray]) -> None:
    refs_path, _ = netcdf_refs
    fs = fsspec.filesystem("reference", fo=str(refs_path))
    keys = list(fs.find("", withdirs=False))
    assert any(k.startswith("temp/") for k in keys)
    with mounted(refs_path, tmp_path / "mnt") as mount:
        for key in keys:
            path = mount.path / key
            assert path.read_bytes() == fs.cat(key), key
            assert path.stat().st_size == len(fs.cat(key)), key


@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
def test_parquet_made_by_kerchunk_reads_the_same(
    tmp_path: Path, netcdf_refs: tuple[Path, np.ndarray]
) -> None:
    refs_to_dataframe = pytest.importorskip("kerchunk.df").refs_to_dataframe
    zarr = pytest.importorskip("zarr")
    refs_path, values = netcdf_refs
    refs = json.loads(refs_path.read_text())
    refs_to_dataframe(refs, str(tmp_path / "refs.parq"), record_size=4)
    with mounted(tmp_path / "refs.parq", tmp_path / "mnt") as mount:
        group = zarr.open_group(str(mount.path), mode="r", zarr_format=2, use_consolidated=False)
        np.testing.assert_array_equal(group["temp"][:], values)


def test_zarr_python_reads_the_values(tmp_path: Path, netcdf_refs: tuple[Path, np.ndarray]) -> None:
    zarr = pytest.importorskip("zarr")
    refs_path, values = netcdf_refs
    with mounted(refs_path, tmp_path / "mnt") as mount:
        group = zarr.open_group(str(mount.path), mode="r", zarr_format=2)
        np.testing.assert_array_equal(group["temp"][:], values)
        np.testing.assert_array_equal(group["inner/count"][:], np.arange(5))
        assert group.attrs["title"] == "interop test: ünïcode ☃"


gdal_missing = shutil.which("gdalinfo") is None


@pytest.mark.interop
@pytest.mark.skipif(gdal_missing, reason="gdalinfo not installed (Debian package gdal-bin)")
def test_gdalinfo_reads_a_zarr_array_in_the_mount(
    tmp_path: Path, netcdf_refs: tuple[Path, np.ndarray]
) -> None:
    refs_path, values = netcdf_refs
    with mounted(refs_path, tmp_path / "mnt") as mount:
        listing = run(["gdalinfo", f"ZARR:{mount.path}"])
        assert "temp" in listing
        info = run(["gdalinfo", "-json", "-stats", f'ZARR:"{mount.path}":/temp:0'])
        band = json.loads(info)["bands"][0]
        assert json.loads(info)["size"] == [9, 7]
        assert band["minimum"] == pytest.approx(float(values[0].min()), rel=1e-6)
        assert band["maximum"] == pytest.approx(float(values[0].max()), rel=1e-6)


@pytest.mark.interop
@pytest.mark.skipif(gdal_missing, reason="gdalinfo not installed (Debian package gdal-bin)")
def test_gdalinfo_reads_the_bundled_example(tmp_path: Path) -> None:
    with mounted(EXAMPLE, tmp_path / "mnt") as mount:
        info = json.loads(run(["gdalinfo", "-json", "-stats", f'ZARR:"{mount.path}":/air:0']))
        assert info["size"] == [53, 25]
        assert 270 < info["bands"][0]["mean"] < 310


@pytest.mark.interop
@pytest.mark.skipif(shutil.which("ncdump") is None, reason="ncdump not installed (netcdf-bin)")
def test_ncdump_reads_the_header(tmp_path: Path, netcdf_refs: tuple[Path, np.ndarray]) -> None:
    refs_path, _ = netcdf_refs
    with mounted(refs_path, tmp_path / "mnt") as mount:
        header = run(["ncdump", "-h", f"file://{mount.path}#mode=zarr,file"])
        assert "float temp(t, y, x)" in header
        assert 'temp:units = "K"' in header


def run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout
