"""``--decode`` through real mounts: every reader gets the original values, whatever codecs.

The arrays of the interoperability tests (netCDF4 with zlib and shuffle, fill values and
partial edge chunks; HDF5 with nested groups and a 0-d dataset; a tiled TIFF) plus a
big-endian netCDF3 file, mounted with ``--decode`` and read by ncdump (netCDF-C), gdalinfo
and gdal_translate (GDAL), zarrita (node) and zarr-python; values compared with the originals.
Hostile sets: object codecs are never decoded, a chunk that inflates past its size is EIO.
"""

from __future__ import annotations

import errno
import json
import math
import subprocess
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration import sources
from tests.integration.test_interop import (
    Mounted,
    checksum,
    dumped_values,
    ncdump,
    run,
    stored,
    which,
    zarrita,
)
from tests.support.mounting import mounted, refmount_command, requires_fuse

pytestmark = [
    pytest.mark.fuse,
    requires_fuse,
    pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated"),
]

MOUNTS = [
    ("netcdf", "json"),
    ("netcdf", "parquet"),
    ("netcdf3", "json"),
    ("hdf5", "json"),
    ("hdf5", "parquet"),
    ("tiff", "json"),
    ("tifflzw", "json"),
    ("tiffdeflate", "json"),
    ("tiffpackbits", "json"),
    ("zarr2", "json"),
    ("zarr3", "json"),
]
ALL = [f"{name}-{layout}" for name, layout in MOUNTS]
ARRAYS = {
    "netcdf": ("temp", "elevation", "level", "y", "x"),
    "netcdf3": ("t", "e"),
    "hdf5": ("a/b/c/values", "a/scalar", "data"),
    "tiff": ("",),
    "tifflzw": ("",),
    "tiffdeflate": ("",),
    "tiffpackbits": ("",),
    "zarr2": tuple(name for name, *_ in sources.ZARR2_ARRAYS),
    "zarr3": ("transposed",),
}
V2 = [key for key in ALL if not key.startswith("zarr3")]
TIFFS = ("tifflzw", "tiffdeflate", "tiffpackbits")
"""Tiled TIFFs whose codecs are imagecodecs' (LZW and deflate with the predictor, PackBits)."""


@pytest.fixture(scope="module")
def decoded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Mounted]]:
    """Make the original files and their references, and mount each with ``--decode``."""
    root = tmp_path_factory.mktemp("decode")
    made = {
        "netcdf": sources.netcdf4(root / "originals"),
        "hdf5": sources.hdf5(root / "originals"),
        "tiff": sources.tiff(root / "originals"),
    }
    pytest.importorskip("imagecodecs", reason="tifffile writes LZW and PackBits with imagecodecs")
    made["tifflzw"] = sources.tiff(root / "originals", "lzw", predictor=True)
    made["tiffdeflate"] = sources.tiff(root / "originals", "adobe_deflate", predictor=True)
    made["tiffpackbits"] = sources.tiff(root / "originals", "packbits")
    pytest.importorskip("scipy", reason="kerchunk's netCDF3 scanner needs scipy")
    made["netcdf3"] = sources.netcdf3(root / "originals")
    made["zarr2"], made["zarr3"] = sources.zarr_codecs(root / "originals")
    with ExitStack() as stack:
        result: dict[str, Mounted] = {}
        for name, layout in MOUNTS:
            source = made[name]
            refs = source.refs
            if layout == "parquet":
                refs = sources.parquet(source, root / f"{name}.parq")
            mountpoint = root / "mnt" / f"{name}-{layout}"
            mount = stack.enter_context(mounted(refs, mountpoint, "--decode"))
            result[f"{name}-{layout}"] = Mounted(source, refs, mount)
        yield result


def strict_json(data: bytes) -> Any:
    """Parse JSON as strict parsers do: UTF-8, no NaN or Infinity literals."""

    def refuse(literal: str) -> None:
        raise AssertionError(f"{literal} literal in served JSON")

    return json.loads(data.decode("utf-8"), parse_constant=refuse)


@pytest.mark.parametrize("key", V2)
def test_metadata_is_plain_strict_json_and_chunks_have_their_decoded_size(
    decoded: dict[str, Mounted], key: str
) -> None:
    mounted_store = decoded[key]
    for name in ARRAYS[key.split("-")[0]]:
        array = mounted_store.path / name
        meta = strict_json((array / ".zarray").read_bytes())
        assert (meta["compressor"], meta["filters"], meta["order"]) == (None, None, "C")
        assert meta["dtype"][0] in "<|", meta["dtype"]
        size = math.prod(meta["chunks"]) * np.dtype(meta["dtype"]).itemsize
        chunks = [p for p in array.iterdir() if not p.name.startswith(".")]
        assert chunks, name
        for chunk in chunks:
            assert chunk.stat().st_size == size, chunk
            assert len(chunk.read_bytes()) == size, chunk
    for document in mounted_store.path.rglob(".z*"):
        text = document.read_bytes()
        strict_json(text)
        assert b"\\u00" not in text, document


@pytest.mark.parametrize("key", ALL)
def test_zarr_python_reads_the_original_values(decoded: dict[str, Mounted], key: str) -> None:
    zarr = pytest.importorskip("zarr")
    mounted_store = decoded[key]
    source = mounted_store.source
    for name in ARRAYS[key.split("-")[0]]:
        array = zarr.open_array(str(mounted_store.path / name), mode="r")
        original = source.read_original(name)
        values = array[...]
        assert values.dtype == original.dtype.newbyteorder("="), name
        np.testing.assert_array_equal(values, stored(source, name, array.fill_value), name)


# (mount, array, GDAL dataset suffix): a 2-D view of each array for gdalinfo. Under --decode
# these include the shuffle+zlib arrays GDAL 3.6 refuses, and the big-endian netCDF3 ones.
GDALINFO_CASES = [
    ("netcdf-json", "temp", ":/temp:0"),
    ("netcdf-parquet", "temp", ":/temp:0"),
    ("netcdf-json", "elevation", ":/elevation"),
    ("netcdf3-json", "t", ":/t"),
    ("netcdf3-json", "e", ":/e"),
    ("hdf5-json", "a/b/c/values", ":/a/b/c/values"),
    ("hdf5-parquet", "data", ":/data"),
    ("tiff-json", "", ""),
    *((f"{tiff}-json", "", "") for tiff in TIFFS),
    *(("zarr2-json", name, f":/{name}") for name in ARRAYS["zarr2"]),
]


@pytest.mark.interop
@pytest.mark.parametrize(("key", "name", "suffix"), GDALINFO_CASES)
def test_gdalinfo_statistics_equal_numpy(
    decoded: dict[str, Mounted], key: str, name: str, suffix: str
) -> None:
    which("gdalinfo", "gdal-bin")
    mounted_store = decoded[key]
    result = run(["gdalinfo", "-json", "-stats", f'ZARR:"{mounted_store.path}"{suffix}'])
    assert "ERROR" not in result.stderr, result.stderr
    info = json.loads(result.stdout)
    meta = mounted_store.zarray(name)
    values = stored(mounted_store.source, name, meta["fill_value"])
    plane = values[0] if values.ndim == 3 else values
    assert info["size"] == [plane.shape[1], plane.shape[0]]
    band = info["bands"][0]
    nodata = band.get("noDataValue")
    valid = plane[plane != nodata] if nodata is not None else plane.ravel()
    assert band["minimum"] == pytest.approx(float(valid.min()), rel=1e-9)
    assert band["maximum"] == pytest.approx(float(valid.max()), rel=1e-9)
    # gdalinfo -json rounds the mean to three decimals
    assert band["mean"] == pytest.approx(float(valid.astype("f8").mean()), rel=1e-6, abs=1e-3)


@pytest.mark.interop
@pytest.mark.parametrize(
    ("key", "name", "suffix"),
    [("tiff-json", "", ""), *((f"{tiff}-json", "", "") for tiff in TIFFS), *GDALINFO_CASES[:2]],
)
def test_gdal_translate_copies_the_original_values(
    decoded: dict[str, Mounted], tmp_path: Path, key: str, name: str, suffix: str
) -> None:
    which("gdal_translate", "gdal-bin")
    tifffile = pytest.importorskip("tifffile")
    mounted_store = decoded[key]
    output = tmp_path / "copy.tif"
    result = run(["gdal_translate", f'ZARR:"{mounted_store.path}"{suffix}', str(output)])
    assert "ERROR" not in result.stderr, result.stderr
    meta = mounted_store.zarray(name)
    values = stored(mounted_store.source, name, meta["fill_value"])
    np.testing.assert_array_equal(
        tifffile.imread(output), values[0] if values.ndim == 3 else values
    )


# (mount, array): zlib+shuffle chunks, big-endian, nested groups, Parquet, inline, a 0-d array.
NCDUMP_CASES = [
    ("netcdf-json", "temp"),
    ("netcdf-parquet", "temp"),
    ("netcdf-json", "elevation"),
    ("netcdf-json", "level"),
    ("netcdf3-json", "t"),
    ("netcdf3-json", "e"),
    ("hdf5-json", "data"),
    ("hdf5-parquet", "data"),
    ("hdf5-json", "a/scalar"),
    *(("zarr2-json", name) for name in ARRAYS["zarr2"]),
]
# Not /a/b/c/values: kerchunk names HDF5's anonymous dimensions phony_dim_0/1 in every group,
# and netCDF-C gives a dimension name one size, so it reads that 30x40 array as 20x25 (on a
# plain copy of the store as well): nothing to do with codecs.


@pytest.mark.interop
@pytest.mark.parametrize(("key", "name"), NCDUMP_CASES)
def test_ncdump_values_equal_the_original(decoded: dict[str, Mounted], key: str, name: str) -> None:
    which("ncdump", "netcdf-bin")
    mounted_store = decoded[key]
    group, _, variable = name.rpartition("/")
    meta = mounted_store.zarray(name)
    if meta["shape"] == []:
        pytest.skip("netCDF-C 4.9.0 crashes (SIGSEGV) dumping 0-d zarr arrays, decoded or not")
    options = ["-p", "9,17", "-v", f"/{group}/{variable}" if group else variable]
    result = run(ncdump(mounted_store.path, *options))
    # Masked points hold the fill value, as zarr stores them; ncdump prints it as a number.
    original = stored(mounted_store.source, name, meta["fill_value"]).astype("f8").ravel()
    dumped = dumped_values(result.stdout, variable)
    if meta["fill_value"] is not None:  # ncdump prints "_" for the fill value
        dumped[np.isnan(dumped)] = meta["fill_value"]
    np.testing.assert_allclose(dumped, original, rtol=1e-7)


@pytest.mark.interop
def test_ncdump_shows_unicode_that_kerchunk_escaped(decoded: dict[str, Mounted]) -> None:
    which("ncdump", "netcdf-bin")
    header = run(ncdump(decoded["netcdf-json"].path, "-h")).stdout
    assert f':title = "{sources.NETCDF_TITLE}" ;' in header


@pytest.mark.interop
@pytest.mark.parametrize(
    ("key", "name"), [(key, name) for key in ALL for name in ARRAYS[key.split("-")[0]]]
)
def test_zarrita_reads_the_original_values(
    decoded: dict[str, Mounted], key: str, name: str
) -> None:
    mounted_store = decoded[key]
    fill = None if key.startswith("zarr3") else mounted_store.zarray(name)["fill_value"]
    read = zarrita(mounted_store.path, name)
    values = stored(mounted_store.source, name, fill)
    assert read["shape"] == list(values.shape)
    assert read["dtype"] == values.dtype.name
    assert read["sha256"] == checksum(values)


def test_a_v3_array_is_served_with_only_the_bytes_codec(decoded: dict[str, Mounted]) -> None:
    array = decoded["zarr3-json"].path / "transposed"
    meta = strict_json((array / "zarr.json").read_bytes())
    assert meta["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
    chunk = array / "c" / "0" / "0"
    assert chunk.stat().st_size == 4 * 5 * 4
    expected = decoded["zarr3-json"].source.read_original("transposed")[:4, :5]
    np.testing.assert_array_equal(np.frombuffer(chunk.read_bytes(), "<f4").reshape(4, 5), expected)


# Hostile sets ---------------------------------------------------------------------------------


BOMB_SIZE = 512 * 1024 * 1024
"""What the hostile chunk inflates to (from about 512 KiB)."""

PEAK_MEMORY = 256 * 1024 * 1024
"""The daemon's resident peak stays below this (half the bomb) while it refuses it; about
54 MB was measured."""


def zlib_bomb(size: int) -> bytes:
    """Return a zlib stream of ``size`` zero bytes, made without holding them in memory."""
    compressor = zlib.compressobj(6)
    block = bytes(1024 * 1024)
    parts = [compressor.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, compressor.flush()])


def peak_resident(pid: int) -> int:
    """Return a process's peak resident memory in bytes (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def hostile_set(directory: Path) -> Path:
    """A set with a pickle-coded array, a zlib bomb chunk beside a good one, and huge chunks."""
    directory.mkdir(parents=True, exist_ok=True)
    good = np.arange(16, dtype="<f8")
    bomb = zlib_bomb(BOMB_SIZE)
    target = directory / "data.bin"
    target.write_bytes(zlib.compress(good.tobytes()) + bomb)
    meta = {
        "zarr_format": 2,
        "shape": [32],
        "chunks": [16],
        "dtype": "<f8",
        "compressor": {"id": "zlib", "level": 1},
        "filters": None,
        "order": "C",
        "fill_value": 0.0,
    }
    first = len(zlib.compress(good.tobytes()))
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        "z/.zarray": json.dumps(meta),
        "z/0": [str(target), 0, first],
        "z/1": [str(target), first, len(bomb)],
        "p/.zarray": json.dumps({**meta, "compressor": {"id": "pickle"}}),
        "p/0": "base64:gASVAAAAAAAAAAAu",
        "huge/.zarray": json.dumps({**meta, "shape": [2**40], "chunks": [2**40]}),
        "huge/0": [str(target), 0, first],
    }
    path = directory / "hostile.json"
    path.write_text(json.dumps({"version": 1, "refs": refs}))
    return path


def test_hostile_sets_never_decode_objects_or_inflate_without_bound(tmp_path: Path) -> None:
    refs = hostile_set(tmp_path / "set")
    with mounted(refs, tmp_path / "mnt", "--decode") as mount:
        root = mount.path
        log = mount.log_text()
        assert "array 'p' is served as stored: pickle" in log
        assert "array 'huge' is served as stored" in log
        assert (root / "p" / "0").read_bytes() == b"\x80\x04\x95" + bytes(8) + b"."
        assert json.loads((root / "p" / ".zarray").read_bytes())["compressor"] == {"id": "pickle"}
        huge = root / "huge" / "0"  # served as stored: its compressed bytes
        assert huge.read_bytes() == zlib.compress(np.arange(16, dtype="<f8").tobytes())
        assert (root / "z" / "1").stat().st_size == 128
        with pytest.raises(OSError, match="Input/output error") as failed:
            (root / "z" / "1").read_bytes()
        assert failed.value.errno == errno.EIO
        values = np.frombuffer((root / "z" / "0").read_bytes(), "<f8")
        np.testing.assert_array_equal(values, np.arange(16))
        log = mount.log_text()
        assert "'z/1'" in log
        assert "zlib" in log
        assert "inflates past the declared chunk size of 128 bytes" in log
        assert peak_resident(mount.process.pid) < PEAK_MEMORY


def test_check_decode_lists_the_arrays_served_as_stored(tmp_path: Path) -> None:
    refs = hostile_set(tmp_path / "set")
    result = subprocess.run(
        refmount_command("check", "--decode", str(refs)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "--decode    2 arrays served as stored" in result.stdout
    assert "  p  pickle: an object codec, never decoded" in result.stdout
    assert "  huge  zlib: a decoded chunk would be 8796093022208 bytes" in result.stdout
    plain = subprocess.run(
        refmount_command("check", str(refs)), capture_output=True, text=True, timeout=120
    )
    assert "--decode" not in plain.stdout


def test_tiff_chunks_without_a_size_header_are_decoded_within_their_declared_size(
    tmp_path: Path,
) -> None:
    """LZW and PackBits carry no decoded size: a bomb of either gives EIO, not memory."""
    imagecodecs = pytest.importorskip("imagecodecs")
    good = np.arange(64, dtype="<u2").reshape(8, 8)
    bombs = {
        "imagecodecs_packbits": b"\x81\x00" * (BOMB_SIZE // 128),  # runs of 128 zeros
        "imagecodecs_lzw": bytes(imagecodecs.lzw_encode(bytes(64 * 1024 * 1024))),
    }
    refs: dict[str, Any] = {".zgroup": '{"zarr_format": 2}'}
    for name, bomb in bombs.items():
        packed = bytes(getattr(imagecodecs, name.removeprefix("imagecodecs_") + "_encode")(good))
        target = tmp_path / f"{name}.bin"
        target.write_bytes(packed + bomb)
        meta = {"zarr_format": 2, "shape": [16, 8], "chunks": [8, 8], "dtype": "<u2"}
        meta |= {"compressor": {"id": name}, "filters": None, "order": "C", "fill_value": 0}
        refs[f"{name}/.zarray"] = json.dumps(meta)
        refs[f"{name}/0.0"] = [str(target), 0, len(packed)]
        refs[f"{name}/1.0"] = [str(target), len(packed), len(bomb)]
    (tmp_path / "tiff.json").write_text(json.dumps({"version": 1, "refs": refs}))
    with mounted(tmp_path / "tiff.json", tmp_path / "mnt", "--decode") as mount:
        for name in bombs:
            assert (mount.path / name / "0.0").read_bytes() == good.tobytes()
            with pytest.raises(OSError, match="Input/output error") as failed:
                (mount.path / name / "1.0").read_bytes()
            assert failed.value.errno == errno.EIO
        log = mount.log_text()
        for name in bombs:
            assert f"'{name}/1.0'" in log
            assert f"({name}): inflates past the declared chunk size of 128 bytes" in log
        assert peak_resident(mount.process.pid) < PEAK_MEMORY
