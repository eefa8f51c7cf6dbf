"""Programs other than refmount read the zarr it mounts and get the values of the original files."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

from tests.integration import sources
from tests.integration.sources import Source
from tests.support.mounting import Mount, mounted, requires_fuse

pytestmark = [
    pytest.mark.fuse,
    requires_fuse,
    pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated"),
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "air" / "refs.json"
JS_DIR = Path(__file__).resolve().parents[1] / "js"
NPM_INSTALL = "npm ci --prefix tests/js"

# What is mounted for the whole module: (source, reference layout). kerchunk's refs_to_dataframe
# cannot write a store whose root is an array (the TIFF), so the TIFF is mounted from JSON only.
MOUNTS = [
    ("netcdf", "json"),
    ("netcdf", "parquet"),
    ("netcdf-noshuffle", "json"),
    ("netcdf-noshuffle", "parquet"),
    ("netcdf-utf8", "json"),
    ("hdf5", "json"),
    ("hdf5", "parquet"),
    ("tiff", "json"),
]
ALL = [f"{name}-{layout}" for name, layout in MOUNTS]


@dataclass(frozen=True)
class Mounted:
    """A source mounted from one reference layout."""

    source: Source
    refs: Path
    mount: Mount

    @property
    def path(self) -> Path:
        return self.mount.path

    def zarray(self, name: str) -> dict[str, Any]:
        """Return the ``.zarray`` document of array ``name`` as the mount serves it."""
        meta: dict[str, Any] = json.loads((self.path / name / ".zarray").read_bytes())
        return meta


@pytest.fixture(scope="module")
def mounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Mounted]]:
    """Make the original files and their references, and mount every layout for the module."""
    root = tmp_path_factory.mktemp("interop")
    made = {
        "netcdf": sources.netcdf4(root / "originals"),
        "netcdf-noshuffle": sources.netcdf4(root / "originals", shuffle=False),
        "hdf5": sources.hdf5(root / "originals"),
        "tiff": sources.tiff(root / "originals"),
    }
    made["netcdf-utf8"] = sources.utf8_metadata(made["netcdf-noshuffle"])
    with ExitStack() as stack:
        result: dict[str, Mounted] = {}
        for name, layout in MOUNTS:
            source = made[name]
            refs = source.refs
            if layout == "parquet":
                refs = sources.parquet(source, root / f"{name}.parq")
            mount = stack.enter_context(mounted(refs, root / "mnt" / f"{name}-{layout}"))
            result[f"{name}-{layout}"] = Mounted(source, refs, mount)
        yield result


def which(program: str, package: str) -> str:
    """Return the path of ``program`` or skip the test, naming the package that provides it."""
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} is not installed (Debian package {package})")
    return path


def run(command: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a reader; with ``check``, fail with its output unless it exits with 0."""
    env = {**os.environ, "GDAL_PAM_ENABLED": "NO"}  # GDAL must not try to write .aux.xml files
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=60, check=False, env=env
    )
    if check:
        assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


def failed(result: subprocess.CompletedProcess[str]) -> bool:
    """Whether a reader failed: GDAL reports unreadable blocks on stderr and still exits with 0."""
    return result.returncode != 0 or "ERROR " in result.stderr


def version(command: list[str], pattern: str) -> str:
    """Return the version a program reports (first match of ``pattern`` in its output)."""
    result = run(command, check=False)
    found = re.search(pattern, result.stdout + result.stderr)
    return found.group(1) if found else "(unknown version)"


def gdal_version() -> str:
    return "GDAL " + version(["gdalinfo", "--version"], r"GDAL ([\d.]+)")


def netcdf_version() -> str:
    return "netCDF-C " + version(["ncdump"], r"netcdf library version ([\d.]+)")


def codecs(meta: dict[str, Any]) -> str:
    """Name the codecs of a zarr v2 array: its filters, then its compressor."""
    names = [f["id"] for f in meta.get("filters") or []]
    if meta.get("compressor"):
        names.append(meta["compressor"]["id"])
    return "+".join(names) or "no codec"


def same_failure_on_a_plain_copy(
    mounted_store: Mounted, tmp_path: Path, command: Callable[[Path], list[str]]
) -> str | None:
    """Run ``command`` on a copy of the store on a normal disk.

    Returns the evidence when the reader fails there too (a limitation of the reader, not of
    refmount), or None when the copy reads fine (then the mount is at fault).
    """
    copy = tmp_path / "plain-copy"
    shutil.copytree(mounted_store.path, copy)
    result = run(command(copy), check=False)
    if not failed(result):
        return None
    if result.returncode < 0:
        message = f"killed by {signal.Signals(-result.returncode).name}"
    else:
        message = result.stderr.strip().splitlines()[0].replace(str(copy), "<store>")
    return f"{message!r}, and the same on a plain copy of the store outside the mount"


def checksum(values: np.ndarray[Any, Any]) -> str:
    """SHA-256 of an array's elements in C order, little-endian (as tests/js/read.mjs does)."""
    data = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    return hashlib.sha256(data.tobytes()).hexdigest()


def stored(source: Source, name: str, fill_value: Any) -> np.ndarray[Any, Any]:
    """The original values as zarr stores them: masked points hold the fill value."""
    original = source.read_original(name)
    if np.ma.isMaskedArray(original):
        return np.ma.filled(original, fill_value)
    return original


# zarr-python and xarray ---------------------------------------------------------------------


@pytest.mark.parametrize("key", ALL)
def test_every_key_equals_fsspec_cat(mounts: dict[str, Mounted], key: str) -> None:
    mounted_store = mounts[key]
    # Always fsspec on the JSON set the Parquet set was made from: fsspec's LazyReferenceMapper
    # raises KeyError('a/.zarray') on a Parquet set with nested groups (depending on set order).
    # Parquet metadata is served from .zmetadata as stdlib json.dumps (docs/semantics.md).
    fs = fsspec.filesystem("reference", fo=str(mounted_store.source.refs))
    refs = mounted_store.source.refs_dict()
    keys = sorted(refs.get("refs", refs))
    parquet_metadata: dict[str, Any] = {}
    if key.endswith("parquet"):
        parquet_metadata = json.loads((mounted_store.refs / ".zmetadata").read_bytes())["metadata"]
    assert len(keys) > 3
    for name in keys:
        if name in parquet_metadata:
            expected = json.dumps(parquet_metadata[name]).encode()
        else:
            expected = fs.cat(name)
        path = mounted_store.path / name
        assert path.stat().st_size == len(expected), name
        assert path.read_bytes() == expected, name


@pytest.mark.parametrize("key", ALL)
def test_zarr_python_reads_the_original_values(mounts: dict[str, Mounted], key: str) -> None:
    zarr = pytest.importorskip("zarr")
    mounted_store = mounts[key]
    source = mounted_store.source
    for name in source.arrays:
        array = zarr.open_array(str(mounted_store.path / name), mode="r", zarr_format=2)
        original = source.read_original(name)
        values = array[...]
        assert values.dtype == original.dtype, name
        np.testing.assert_array_equal(values, stored(source, name, array.fill_value), name)
        if name == "temp":
            masked = np.ma.getmaskarray(original)
            assert masked.any()
            np.testing.assert_array_equal(values == array.fill_value, masked)


@pytest.mark.parametrize(
    "key", ["netcdf-json", "netcdf-parquet", "netcdf-noshuffle-json", "netcdf-utf8-json"]
)
def test_xarray_reads_the_netcdf_as_netcdf4_does(mounts: dict[str, Mounted], key: str) -> None:
    xr = pytest.importorskip("xarray")
    mounted_store = mounts[key]
    with (
        xr.open_zarr(mounted_store.path, consolidated=False) as from_mount,
        xr.open_dataset(mounted_store.source.original, engine="netcdf4") as original,
    ):
        xr.testing.assert_identical(from_mount.load(), original.load())
        # The fill value masked the same points: NaN where netCDF4 gives a masked value.
        masked = np.ma.getmaskarray(mounted_store.source.read_original("temp"))
        np.testing.assert_array_equal(np.isnan(from_mount["temp"].values), masked)
        assert from_mount.attrs["title"] == sources.NETCDF_TITLE
        assert from_mount["temp"].attrs["long_name"] == sources.NETCDF_LONG_NAME


@pytest.mark.parametrize("key", ["hdf5-json", "hdf5-parquet"])
def test_xarray_reads_nested_groups_and_a_scalar(mounts: dict[str, Mounted], key: str) -> None:
    xr = pytest.importorskip("xarray")
    mounted_store = mounts[key]
    source = mounted_store.source
    with xr.open_zarr(mounted_store.path, group="a/b/c", consolidated=False) as nested:
        np.testing.assert_array_equal(nested["values"].values, source.read_original("a/b/c/values"))
        assert nested.attrs["note"] == "tief verschachtelt ☃"
    with xr.open_zarr(mounted_store.path, group="a", consolidated=False) as group_a:
        assert group_a["scalar"].shape == ()
        assert float(group_a["scalar"]) == sources.HDF5_SCALAR
        assert group_a["scalar"].attrs["units"] == "m"
    with xr.open_zarr(mounted_store.path, consolidated=False) as top:
        np.testing.assert_array_equal(top["data"].values, source.read_original("data"))
        assert top.attrs["title"] == sources.HDF5_TITLE


# GDAL ---------------------------------------------------------------------------------------

# (mount, array, GDAL dataset suffix): a 2-D view of each array for gdalinfo.
GDALINFO_CASES = [
    ("netcdf-noshuffle-json", "temp", ":/temp:0"),
    ("netcdf-noshuffle-parquet", "temp", ":/temp:0"),
    ("netcdf-json", "temp", ":/temp:0"),
    ("netcdf-noshuffle-json", "elevation", ":/elevation"),
    ("hdf5-json", "a/b/c/values", ":/a/b/c/values"),
    ("hdf5-parquet", "data", ":/data"),
    ("tiff-json", "", ""),
]


@pytest.mark.interop
@pytest.mark.parametrize(("key", "name", "suffix"), GDALINFO_CASES)
def test_gdalinfo_statistics_equal_numpy(
    mounts: dict[str, Mounted], tmp_path: Path, key: str, name: str, suffix: str
) -> None:
    which("gdalinfo", "gdal-bin")
    mounted_store = mounts[key]

    def command(root: Path) -> list[str]:
        return ["gdalinfo", "-json", "-stats", f'ZARR:"{root}"{suffix}']

    result = run(command(mounted_store.path), check=False)
    meta = mounted_store.zarray(name)
    if failed(result):
        evidence = same_failure_on_a_plain_copy(mounted_store, tmp_path, command)
        assert evidence is not None, f"GDAL reads a plain copy but not the mount:\n{result.stderr}"
        pytest.skip(f"{gdal_version()} cannot decode {codecs(meta)} in /{name}: {evidence}")
    info = json.loads(result.stdout)
    values = stored(mounted_store.source, name, meta["fill_value"])
    plane = values[0] if values.ndim == 3 else values
    assert info["size"] == [plane.shape[1], plane.shape[0]]
    band = info["bands"][0]
    nodata = band.get("noDataValue")
    assert nodata == meta["fill_value"]
    valid = plane[plane != nodata] if nodata is not None else plane.ravel()
    assert band["minimum"] == pytest.approx(float(valid.min()), rel=1e-9)
    assert band["maximum"] == pytest.approx(float(valid.max()), rel=1e-9)
    assert band["mean"] == pytest.approx(float(valid.astype("f8").mean()), rel=1e-6)


@pytest.mark.interop
def test_gdalinfo_says_which_filter_it_lacks(mounts: dict[str, Mounted]) -> None:
    """GDAL refuses the shuffle filter by name instead of returning wrong values."""
    which("gdalinfo", "gdal-bin")
    path = mounts["netcdf-json"].path
    result = run(["gdalinfo", "-json", "-stats", f'ZARR:"{path}":/temp:0'], check=False)
    if result.returncode == 0:
        pytest.skip(
            f"{gdal_version()} decodes shuffle: test_gdalinfo_statistics_equal_numpy checks it"
        )
    assert "Filter shuffle not handled" in result.stderr


@pytest.mark.interop
@pytest.mark.parametrize("key", ["netcdf-noshuffle-json", "netcdf-noshuffle-parquet"])
def test_gdalmdiminfo_reports_dimensions_and_attributes(
    mounts: dict[str, Mounted], key: str
) -> None:
    which("gdalmdiminfo", "gdal-bin")
    info = json.loads(run(["gdalmdiminfo", str(mounts[key].path)]).stdout)
    assert info["attributes"]["title"] == sources.NETCDF_TITLE
    assert {d["name"]: d["size"] for d in info["dimensions"]} == {"level": 5, "y": 11, "x": 13}
    assert set(info["arrays"]) == {"temp", "elevation", "level", "y", "x"}
    temp = info["arrays"]["temp"]
    assert temp["datatype"] == "Float32"
    assert temp["dimensions"] == ["/level", "/y", "/x"]
    assert temp["block_size"] == [2, 4, 5]
    assert temp["unit"] == "K"
    assert temp["nodata_value"] == sources.NETCDF_FILL
    assert temp["attributes"]["long_name"] == sources.NETCDF_LONG_NAME
    assert info["arrays"]["elevation"]["datatype"] == "Int16"


@pytest.mark.interop
@pytest.mark.parametrize("key", ["hdf5-json", "hdf5-parquet"])
def test_gdalmdiminfo_walks_nested_groups_and_reads_a_scalar(
    mounts: dict[str, Mounted], key: str
) -> None:
    which("gdalmdiminfo", "gdal-bin")
    path = str(mounts[key].path)
    info = json.loads(run(["gdalmdiminfo", path]).stdout)
    assert info["attributes"]["title"] == sources.HDF5_TITLE
    group_c = info["groups"]["a"]["groups"]["b"]["groups"]["c"]
    assert group_c["attributes"]["note"] == "tief verschachtelt ☃"
    values = group_c["arrays"]["values"]
    assert (values["datatype"], values["dimension_size"]) == ("Int32", [30, 40])
    scalar = json.loads(run(["gdalmdiminfo", "-detailed", "-array", "/a/scalar", path]).stdout)
    assert scalar["datatype"] == "Float64"
    assert scalar["values"] == sources.HDF5_SCALAR
    assert scalar["unit"] == "m"


@pytest.mark.interop
@pytest.mark.parametrize("key", ["netcdf-noshuffle-json", "netcdf-noshuffle-parquet"])
def test_gdalmdimtranslate_to_netcdf_keeps_values_and_mask(
    mounts: dict[str, Mounted], tmp_path: Path, key: str
) -> None:
    which("gdalmdimtranslate", "gdal-bin")
    netcdf4 = pytest.importorskip("netCDF4")
    mounted_store = mounts[key]
    output = tmp_path / "temp.nc"
    run(["gdalmdimtranslate", "-array", "temp", str(mounted_store.path), str(output)])
    original = mounted_store.source.read_original("temp")
    with netcdf4.Dataset(output) as ds:
        copied = ds["temp"][...]
        assert ds["temp"].long_name == sources.NETCDF_LONG_NAME
        assert ds["temp"].units == "K"
    np.testing.assert_array_equal(np.ma.getmaskarray(copied), np.ma.getmaskarray(original))
    np.testing.assert_array_equal(np.ma.compressed(copied), np.ma.compressed(original))


@pytest.mark.interop
def test_gdalmdimtranslate_to_netcdf_reads_a_nested_group(
    mounts: dict[str, Mounted], tmp_path: Path
) -> None:
    which("gdalmdimtranslate", "gdal-bin")
    netcdf4 = pytest.importorskip("netCDF4")
    mounted_store = mounts["hdf5-json"]
    output = tmp_path / "values.nc"
    run(["gdalmdimtranslate", "-array", "/a/b/c/values", str(mounted_store.path), str(output)])
    with netcdf4.Dataset(output) as ds:
        ds.set_auto_mask(False)
        copied = ds["values"][...]
    np.testing.assert_array_equal(copied, mounted_store.source.read_original("a/b/c/values"))


@pytest.mark.interop
def test_gdalmdimtranslate_to_geotiff_equals_the_original_tiff(
    mounts: dict[str, Mounted], tmp_path: Path
) -> None:
    which("gdalmdimtranslate", "gdal-bin")
    tifffile = pytest.importorskip("tifffile")
    mounted_store = mounts["tiff-json"]
    output = tmp_path / "image.tif"
    run(["gdalmdimtranslate", "-of", "GTiff", f'ZARR:"{mounted_store.path}"', str(output)])
    np.testing.assert_array_equal(tifffile.imread(output), mounted_store.source.read_original(""))


@pytest.mark.interop
def test_gdalinfo_reads_the_bundled_example(tmp_path: Path) -> None:
    which("gdalinfo", "gdal-bin")
    with mounted(EXAMPLE, tmp_path / "mnt") as mount:
        info = json.loads(
            run(["gdalinfo", "-json", "-stats", f'ZARR:"{mount.path}":/air:0']).stdout
        )
        assert info["size"] == [53, 25]
        assert 270 < info["bands"][0]["mean"] < 310


# netCDF-C -----------------------------------------------------------------------------------


def ncdump(root: Path, *options: str) -> list[str]:
    return ["ncdump", *options, f"file://{root}#mode=zarr,file"]


@pytest.mark.interop
@pytest.mark.parametrize("key", ["netcdf-json", "netcdf-parquet", "netcdf-utf8-json"])
def test_ncdump_header_has_dimensions_types_and_attributes(
    mounts: dict[str, Mounted], key: str
) -> None:
    which("ncdump", "netcdf-bin")
    header = run(ncdump(mounts[key].path, "-h")).stdout
    for dimension in ("level = 5 ;", "y = 11 ;", "x = 13 ;"):
        assert f"\t{dimension}" in header
    for declaration in (
        "float temp(level, y, x) ;",
        "short elevation(y, x) ;",
        "double level(level) ;",
        "double x(x) ;",
    ):
        assert f"\t{declaration}" in header
    assert 'temp:units = "K" ;' in header
    assert 'level:units = "hPa" ;' in header
    assert ':history = "written by the refmount interop tests" ;' in header


@pytest.mark.interop
@pytest.mark.parametrize("key", ["netcdf-utf8-json", "netcdf-json"])
def test_ncdump_shows_unicode_attributes(mounts: dict[str, Mounted], key: str) -> None:
    """UTF-8 metadata reads as written; kerchunk's JSON escapes (``\\u00e9``) depend on netCDF-C."""
    which("ncdump", "netcdf-bin")
    mounted_store = mounts[key]
    header = run(ncdump(mounted_store.path, "-h")).stdout
    title = f':title = "{sources.NETCDF_TITLE}" ;'
    if title not in header and key == "netcdf-json":
        zattrs = (mounted_store.path / ".zattrs").read_text()
        escaped = re.search(r'"title":\s*"([^"]*)"', zattrs)
        shown = re.search(r':title = "([^"]*)"', header)
        assert escaped is not None
        assert shown is not None
        assert shown.group(1) == escaped.group(1).replace("\\", ""), header
        pytest.skip(
            f"{netcdf_version()} cannot decode JSON \\uXXXX escapes (kerchunk writes"
            f" ASCII-escaped .zattrs): {escaped.group(1)!r} is shown as {shown.group(1)!r}"
        )
    assert title in header
    assert f'temp:long_name = "{sources.NETCDF_LONG_NAME}" ;'.replace("'", "\\'") in header


@pytest.mark.interop
def test_ncdump_header_walks_nested_groups(mounts: dict[str, Mounted]) -> None:
    which("ncdump", "netcdf-bin")
    header = run(ncdump(mounts["hdf5-json"].path, "-h")).stdout
    assert re.search(r"group: a \{.*group: b \{.*group: c \{", header, re.DOTALL)
    assert "\tdouble scalar ;" in header
    assert 'scalar:units = "m" ;' in header
    assert "int values(phony_dim_0, phony_dim_1) ;" in header


def dumped_values(output: str, variable: str) -> np.ndarray[Any, Any]:
    """Parse the values of ``variable`` from ncdump's data section (``_`` is NaN)."""
    found = re.search(rf"^ {re.escape(variable)} =\s*(.*?)\s*;\s*$", output, re.M | re.S)
    assert found is not None, output
    items = [item.strip() for item in found.group(1).replace("\n", " ").split(",")]
    special = {"_": "nan", "NaNf": "nan", "Infinityf": "inf", "-Infinityf": "-inf"}
    return np.array([float(special.get(item, item)) for item in items if item])


# (mount, array): uncompressed range references, inline base64, compressed chunks, a 0-d array.
NCDUMP_VALUE_CASES = [
    ("netcdf-noshuffle-json", "x"),
    ("netcdf-noshuffle-parquet", "level"),
    ("hdf5-json", "data"),
    ("hdf5-parquet", "data"),
    ("netcdf-noshuffle-json", "temp"),
    ("netcdf-json", "temp"),
    ("hdf5-json", "a/scalar"),
]


@pytest.mark.interop
@pytest.mark.parametrize(("key", "name"), NCDUMP_VALUE_CASES)
def test_ncdump_values_equal_the_original(
    mounts: dict[str, Mounted], tmp_path: Path, key: str, name: str
) -> None:
    which("ncdump", "netcdf-bin")
    mounted_store = mounts[key]
    variable = name.rsplit("/", 1)[-1]

    def command(root: Path) -> list[str]:
        return ncdump(root, "-p", "9,17", "-v", variable)

    result = run(command(mounted_store.path), check=False)
    meta = mounted_store.zarray(name)
    if failed(result):
        evidence = same_failure_on_a_plain_copy(mounted_store, tmp_path, command)
        assert evidence is not None, f"ncdump reads a plain copy but not the mount:\n{result}"
        shape = "a 0-d array" if meta["shape"] == [] else f"shape {meta['shape']}"
        pytest.skip(f"{netcdf_version()} cannot read {shape} ({name}): {evidence}")
    original: np.ndarray[Any, Any] = np.ma.filled(
        np.ma.asarray(mounted_store.source.read_original(name), dtype="f8"), np.nan
    ).ravel()
    dumped = dumped_values(result.stdout, variable)
    if meta["filters"] or meta["compressor"]:
        # netCDF-C 4.9.0 (Debian) ignores zarr filters and compressors: it prints the still
        # compressed chunk bytes as numbers, with HDF5_PLUGIN_PATH set or not.
        first_chunk = next(iter(sorted(mounted_store.path.glob(f"{name}/0.0*"))))
        raw = first_chunk.read_bytes()
        count = min(meta["chunks"][-1], len(raw) // np.dtype(meta["dtype"]).itemsize)
        undecoded = np.frombuffer(raw[: count * np.dtype(meta["dtype"]).itemsize], meta["dtype"])
        if np.allclose(dumped[:count], undecoded, rtol=1e-6, equal_nan=True):
            pytest.skip(
                f"{netcdf_version()} does not decode {codecs(meta)}:"
                f" it prints the compressed bytes of {first_chunk.name} as {meta['dtype']}"
                f" {dumped[:3].tolist()} instead of {original[:3].tolist()}"
            )
    np.testing.assert_allclose(dumped, original, rtol=1e-7, equal_nan=True)


# node: zarrita ------------------------------------------------------------------------------


def zarrita(root: Path, name: str, *flags: str) -> dict[str, Any]:
    """Run tests/js/read.mjs on array ``name``; skip if node or the packages are missing."""
    node = which("node", "nodejs")
    if not (JS_DIR / "node_modules" / "zarrita").is_dir():
        pytest.skip(f"zarrita is not installed: run `{NPM_INSTALL}`")
    result = run([node, str(JS_DIR / "read.mjs"), str(root), name or "/", *flags], check=False)
    if result.returncode != 0 and "UnknownCodecError" in result.stderr:
        codec = re.search(r"Unknown codec: (\S+)", result.stderr)
        pytest.skip(f"zarrita cannot decode {codec.group(1) if codec else '?'}: {result.stderr}")
    assert result.returncode == 0, f"read.mjs failed:\n{result.stderr}"
    output: dict[str, Any] = json.loads(result.stdout)
    return output


ZARRITA_CASES = [
    (key, name)
    for key in ALL
    for name in {
        "netcdf": ("temp", "elevation", "level"),
        "hdf5": ("a/b/c/values", "a/scalar", "data"),
        "tiff": ("",),
    }[key.split("-")[0]]
]


@pytest.mark.interop
@pytest.mark.parametrize(("key", "name"), ZARRITA_CASES)
def test_zarrita_reads_the_original_values(mounts: dict[str, Mounted], key: str, name: str) -> None:
    mounted_store = mounts[key]
    meta = mounted_store.zarray(name)
    read = zarrita(mounted_store.path, name)
    values = stored(mounted_store.source, name, meta["fill_value"])
    assert read["shape"] == list(values.shape)
    assert read["chunks"] == meta["chunks"]
    assert read["dtype"] == values.dtype.name
    assert read["fill_value"] == meta["fill_value"]
    assert read["sha256"] == checksum(values), f"zarrita {read['zarrita']}, {codecs(meta)}"
    if name == "temp":
        assert read["attrs"]["long_name"] == sources.NETCDF_LONG_NAME


@pytest.mark.interop
def test_zarrita_prints_the_values_of_small_arrays(mounts: dict[str, Mounted]) -> None:
    mounted_store = mounts["hdf5-json"]
    assert zarrita(mounted_store.path, "a/scalar", "--values")["values"] == [sources.HDF5_SCALAR]
    level = zarrita(mounts["netcdf-json"].path, "level", "--values")["values"]
    assert level == mounts["netcdf-json"].source.read_original("level").tolist()
