"""End-to-end: ``--zarr-format 2`` mounts zarr v3 arrays (a kerchunk JSON set, a Parquet set,
Icechunk repositories) as zarr v2, with and without ``--decode``, and readers of v2 get the
original values: zarr-python (v2 open, consolidated or not), GDAL 3.6 (``gdal_translate``),
netCDF-C 4.9 (``ncdump -v``) and node's zarrita."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration.test_interop import JS_DIR, NPM_INSTALL, checksum, which
from tests.support.icechunk_repos import (
    ICECHUNK_MISSING,
    BuiltRepository,
    build_repository,
    requires_icechunk,
)
from tests.support.mounting import Mount, mounted, refmount_command, requires_fuse
from tests.support.zarr3_arrays import (
    Case,
    cases,
    virtualizarr_repository,
    write_cases,
    write_kerchunk_json,
    write_kerchunk_parquet,
)

pytestmark = [
    pytest.mark.fuse,
    requires_fuse,
    pytest.mark.filterwarnings("ignore::UserWarning"),  # zarr-python on v2 and numcodecs.*
]

SOURCES = ["json", "parquet", "icechunk"]
MODES = {"v2": ("--zarr-format", "2"), "v2-decode": ("--zarr-format", "2", "--decode")}
MOUNTS = [f"{source}-{mode}" for source in SOURCES for mode in MODES]
CASES = {case.path: case for case in cases()}
VIEWED = [path for path, case in CASES.items() if case.refusal is None]
PLANES = [path for path in VIEWED if CASES[path].values.ndim == 2]


@dataclass(frozen=True)
class Mounted:
    source: str
    decoded: bool
    mount: Mount

    @property
    def path(self) -> Path:
        return self.mount.path

    def zarray(self, name: str) -> dict[str, Any]:
        document: dict[str, Any] = json.loads((self.path / name / ".zarray").read_bytes())
        return document


def icechunk_cases(base: Path) -> Path:
    """An Icechunk repository holding the cases (native and inline chunks)."""
    import icechunk

    repository = icechunk.Repository.create(icechunk.local_filesystem_storage(str(base)))
    session = repository.writable_session("main")
    write_cases(session.store)
    session.commit("the cases")
    return base


@pytest.fixture(scope="module")
def mounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Mounted]]:
    import zarr

    root = tmp_path_factory.mktemp("zarr2")
    store_dir = root / "store"
    write_cases(zarr.storage.LocalStore(str(store_dir)))
    sets = {
        "json": write_kerchunk_json(store_dir, root / "refs.json"),
        "parquet": write_kerchunk_parquet(store_dir, root / "refs.parq"),
    }
    if ICECHUNK_MISSING is None:
        sets["icechunk"] = icechunk_cases(root / "repo")
    with ExitStack() as stack:
        result: dict[str, Mounted] = {}
        for source, refs in sets.items():
            for mode, options in MODES.items():
                mount = stack.enter_context(
                    mounted(refs, root / "mnt" / f"{source}-{mode}", *options)
                )
                result[f"{source}-{mode}"] = Mounted(source, mode.endswith("decode"), mount)
        yield result


def get(mounts: dict[str, Mounted], key: str) -> Mounted:
    if key not in mounts:
        pytest.skip(ICECHUNK_MISSING or f"{key} is not mounted")
    return mounts[key]


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GDAL_PAM_ENABLED": "NO"}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)


def codecs_of(meta: dict[str, Any]) -> list[str]:
    ids = [f["id"] for f in meta.get("filters") or []]
    return ids + ([meta["compressor"]["id"]] if meta.get("compressor") else [])


# what is served -------------------------------------------------------------------------------


@pytest.mark.parametrize("key", MOUNTS)
def test_every_v3_node_is_served_as_v2_and_refused_arrays_as_stored(
    mounts: dict[str, Mounted], key: str
) -> None:
    mounted_store = get(mounts, key)
    root = mounted_store.path
    assert {".zgroup", ".zattrs", ".zmetadata"} <= set(os.listdir(root))
    assert "zarr.json" not in os.listdir(root)
    for path in VIEWED:
        names = set(os.listdir(root / path))
        assert {".zarray", ".zattrs"} <= names, path
        assert "zarr.json" not in names
        assert "c" not in names
    assert sorted(os.listdir(root / "codecs/gzip"))[2:] == ["0.0", "0.1", "1.0", "1.1"]
    assert sorted(os.listdir(root / "scalar")) == [".zarray", ".zattrs", "0"]
    assert sorted(os.listdir(root / "codecs/nan_fill"))[2:] == ["0.0", "0.1"]  # 2 unwritten
    assert sorted(os.listdir(root / "refused/sharded")) == ["c", "zarr.json"]
    transposed = sorted(os.listdir(root / "refused/transposed"))
    if mounted_store.decoded:  # no v2 codecs, but decoded: served as v2, decoded
        assert transposed[:2] == [".zarray", ".zattrs"]
        assert len(transposed) == 2 + 2 * 1 * 2  # chunks (2, 5, 3) of (4, 5, 6)
    else:
        assert transposed == ["c", "zarr.json"]
    zattrs = json.loads((root / "plain/zstd/.zattrs").read_bytes())
    assert zattrs == {"long_name": "plain/zstd", "_ARRAY_DIMENSIONS": ["y", "x"]}
    assert json.loads((root / ".zattrs").read_bytes()) == {"title": "zarr v3 codecs"}


@pytest.mark.parametrize("key", MOUNTS)
def test_sizes_are_the_bytes_served(mounts: dict[str, Mounted], key: str) -> None:
    mounted_store = get(mounts, key)
    for path in VIEWED:
        meta = mounted_store.zarray(path)
        for name in os.listdir(mounted_store.path / path):
            file = mounted_store.path / path / name
            data = file.read_bytes()
            assert file.stat().st_size == len(data), file
            if mounted_store.decoded and not name.startswith("."):
                itemsize = np.dtype(meta["dtype"]).itemsize
                assert len(data) == int(np.prod(meta["chunks"])) * itemsize


@pytest.mark.parametrize("key", MOUNTS)
def test_the_metadata_says_what_each_mode_serves(mounts: dict[str, Mounted], key: str) -> None:
    mounted_store = get(mounts, key)
    gzip = mounted_store.zarray("codecs/gzip")
    crc = mounted_store.zarray("codecs/zstd_crc32c")
    big = mounted_store.zarray("codecs/big_endian")
    fortran = mounted_store.zarray("codecs/fortran")
    if mounted_store.decoded:
        for meta in (gzip, crc, big, fortran):
            assert (meta["compressor"], meta["filters"], meta["order"]) == (None, None, "C")
        assert big["dtype"] == "<i4"
    else:
        assert gzip["compressor"] == {"id": "gzip", "level": 5}
        assert codecs_of(crc) == ["zstd", "crc32c"]
        assert big["dtype"] == ">i4"
        assert fortran["order"] == "F"
    assert mounted_store.zarray("codecs/nan_fill")["fill_value"] == "NaN"


# zarr-python ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", MOUNTS)
@pytest.mark.parametrize("consolidated", [False, True])
def test_zarr_python_opens_the_mount_as_v2_and_reads_the_values(
    mounts: dict[str, Mounted], key: str, consolidated: bool
) -> None:
    import zarr

    mounted_store = get(mounts, key)
    group = zarr.open_group(
        str(mounted_store.path), mode="r", zarr_format=2, use_consolidated=consolidated
    )
    assert group.attrs["title"] == "zarr v3 codecs"
    for path in VIEWED:
        array = group[path]
        assert isinstance(array, zarr.Array)
        np.testing.assert_array_equal(array[...], CASES[path].expected, err_msg=path)


@pytest.mark.parametrize("key", MOUNTS)
def test_arrays_served_as_stored_stay_readable_as_v3(mounts: dict[str, Mounted], key: str) -> None:
    import zarr

    mounted_store = get(mounts, key)
    for path in ("refused/sharded", "refused/transposed"):
        if (mounted_store.path / path / "zarr.json").exists():
            array = zarr.open_array(str(mounted_store.path / path), mode="r", zarr_format=3)
            np.testing.assert_array_equal(array[...], CASES[path].expected, err_msg=path)
        else:
            assert mounted_store.decoded, path


@pytest.mark.interop
@pytest.mark.parametrize("key", [f"{source}-v2-decode" for source in SOURCES])
def test_with_decode_an_array_with_no_v2_codecs_is_read_decoded_as_v2(
    mounts: dict[str, Mounted], key: str
) -> None:
    """A transpose that is neither C nor F order has no v2 form, but --decode decodes it."""
    import zarr

    mounted_store = get(mounts, key)
    path = "refused/transposed"
    case = CASES[path]
    meta = mounted_store.zarray(path)
    assert (meta["compressor"], meta["filters"], meta["order"]) == (None, None, "C")
    assert meta["dtype"] == "<f8"
    array = zarr.open_array(str(mounted_store.path / path), mode="r", zarr_format=2)
    np.testing.assert_array_equal(array[...], case.expected)
    np.testing.assert_allclose(ncdump_values(mounted_store.path, path), case.expected.ravel())
    node = which("node", "nodejs")
    if (JS_DIR / "node_modules" / "zarrita").is_dir():
        result = run([node, str(JS_DIR / "read.mjs"), str(mounted_store.path), path])
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["sha256"] == checksum(case.expected)
    for chunk in (mounted_store.path / path).glob("[0-9]*"):
        assert chunk.stat().st_size == 2 * 5 * 3 * 8
    assert "'refused/transposed' is served as stored" not in mounted_store.mount.log_text()


# GDAL -----------------------------------------------------------------------------------------


def gdal_values(root: Path, path: str, out: Path, case: Case) -> np.ndarray[Any, Any] | str:
    """Read array ``path`` with gdal_translate into a raw ENVI file; its values, or GDAL's error."""
    which("gdal_translate", "gdal-bin")
    result = run(["gdal_translate", "-q", "-of", "ENVI", f'ZARR:"{root / path}"', str(out)])
    if result.returncode != 0 or "ERROR" in result.stderr:
        return result.stderr.strip() or f"exit status {result.returncode}"
    values = np.fromfile(out, dtype=case.values.dtype.newbyteorder("<"))
    return values.reshape(case.values.shape)


@pytest.mark.interop
@pytest.mark.parametrize("key", MOUNTS)
@pytest.mark.parametrize("path", PLANES)
def test_gdal_reads_the_original_values(
    mounts: dict[str, Mounted], tmp_path: Path, key: str, path: str
) -> None:
    mounted_store = get(mounts, key)
    case = CASES[path]
    read = gdal_values(mounted_store.path, path, tmp_path / "out.bin", case)
    if isinstance(read, str):
        codecs = codecs_of(mounted_store.zarray(path))
        lacking = [codec for codec in codecs if codec in read]
        assert not mounted_store.decoded, f"GDAL fails on a decoded array: {read}"
        assert lacking, f"GDAL fails on {path} ({codecs}) without naming a codec: {read}"
        pytest.skip(f"GDAL 3.6 has no {'+'.join(lacking)} ({path}); --decode reads it: {read}")
    np.testing.assert_array_equal(read, case.expected, err_msg=path)


# netCDF-C -------------------------------------------------------------------------------------


def ncdump_values(root: Path, path: str) -> np.ndarray[Any, Any]:
    which("ncdump", "netcdf-bin")
    variable = f"/{path}" if "/" in path else path  # ncdump finds a root variable by name only
    result = run(["ncdump", "-p", "9,17", "-v", variable, f"file://{root}#mode=zarr,file"])
    assert result.returncode == 0, result.stderr
    name = path.rsplit("/", 1)[-1]
    found = re.search(rf"^\s*{re.escape(name)} =\s*(.*?)\s*;\s*$", result.stdout, re.M | re.S)
    assert found is not None, result.stdout
    items = [item.strip() for item in found.group(1).replace("\n", " ").split(",")]
    special = {"_": "nan", "NaNf": "nan", "NaN": "nan"}
    return np.array([float(special.get(item, item.rstrip("f"))) for item in items if item])


@pytest.mark.interop
@pytest.mark.parametrize("key", MOUNTS)
@pytest.mark.parametrize("path", PLANES)
def test_ncdump_prints_the_original_values(mounts: dict[str, Mounted], key: str, path: str) -> None:
    mounted_store = get(mounts, key)
    meta = mounted_store.zarray(path)
    codecs = codecs_of(meta)
    dumped = ncdump_values(mounted_store.path, path)
    original = CASES[path].expected
    expected = original.astype("f8").ravel()
    if not np.allclose(dumped, expected, rtol=1e-6, equal_nan=True):
        assert not mounted_store.decoded, f"ncdump misreads a decoded array ({path})"
        if codecs:
            # netCDF-C 4.9.0 (Debian) ignores zarr compressors and filters: it prints the
            # stored bytes as numbers; --decode is what makes these arrays readable to it
            pytest.skip(f"netCDF-C 4.9 does not decode {'+'.join(codecs)} ({path})")
        swapped = original.byteswap().astype("f8").ravel()
        assert meta["dtype"].startswith(">"), f"ncdump misreads {path}: {dumped[:4]}"
        assert np.allclose(dumped, swapped, equal_nan=True), dumped[:4]
        pytest.skip(f"netCDF-C 4.9 reads {meta['dtype']} as little-endian ({path})")
    np.testing.assert_allclose(dumped, expected, rtol=1e-6, equal_nan=True)


@pytest.mark.interop
@pytest.mark.parametrize("key", [f"{source}-v2" for source in SOURCES])
def test_ncdump_names_dimensions_from_dimension_names(mounts: dict[str, Mounted], key: str) -> None:
    which("ncdump", "netcdf-bin")
    root = get(mounts, key).path
    header = run(["ncdump", "-h", f"file://{root}#mode=zarr,file"]).stdout
    assert "double zstd(y, x) ;" in header
    assert ':title = "zarr v3 codecs" ;' in header
    assert ':about = "default codecs" ;' in header


# zarrita --------------------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("key", MOUNTS)
@pytest.mark.parametrize("path", VIEWED)
def test_zarrita_reads_the_original_values(mounts: dict[str, Mounted], key: str, path: str) -> None:
    node = which("node", "nodejs")
    if not (JS_DIR / "node_modules" / "zarrita").is_dir():
        pytest.skip(f"zarrita is not installed: run `{NPM_INSTALL}`")
    mounted_store = get(mounts, key)
    result = run([node, str(JS_DIR / "read.mjs"), str(mounted_store.path), path])
    unknown = re.search(r"Unknown codec: (\S+)", result.stderr)
    if result.returncode != 0 and unknown is not None and not mounted_store.decoded:
        pytest.skip(f"zarrita cannot decode {unknown.group(1)} in v2 ({path})")
    assert result.returncode == 0, result.stderr
    read = json.loads(result.stdout)
    case = CASES[path]
    assert read["shape"] == list(case.values.shape)
    assert read["sha256"] == checksum(case.expected), (
        f"{path}: {codecs_of(mounted_store.zarray(path))}"
    )


# Icechunk: virtual, native and inline chunks, unwritten chunks -------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltRepository:
    if ICECHUNK_MISSING is not None:
        pytest.skip(ICECHUNK_MISSING)
    return build_repository(tmp_path_factory.mktemp("icechunk-zarr2"))


@requires_icechunk
@pytest.mark.interop
@pytest.mark.parametrize("mode", list(MODES))
def test_a_repository_of_virtual_native_and_inline_chunks_reads_as_v2(
    built: BuiltRepository, tmp_path: Path, mode: str
) -> None:
    import zarr

    options = (*MODES[mode], "--authorize-container", "all")
    expected = built.arrays[built.second]
    with mounted(built.path, tmp_path / "mnt", *options) as mount:
        root = mount.path
        assert sorted(os.listdir(root / "sparse")) == [".zarray", ".zattrs", "0.1"]
        assert sorted(os.listdir(root / "virtual/v"))[2:] == ["0", "1", "2", "3"]
        assert json.loads((root / "obs/.zattrs").read_bytes()) == {"units": "K"}
        group = zarr.open_group(str(root), mode="r", zarr_format=2)
        for path, values in expected.items():
            array = group[path]
            assert isinstance(array, zarr.Array)
            np.testing.assert_array_equal(array[...], values, err_msg=path)
        read = gdal_values(
            root, "sparse", tmp_path / "sparse.bin", Case("sparse", expected["sparse"], dict)
        )
        assert not isinstance(read, str), read
        np.testing.assert_array_equal(read, expected["sparse"])
        if mode.endswith("decode"):
            np.testing.assert_allclose(
                ncdump_values(root, "obs/temp"), expected["obs/temp"].ravel(), rtol=1e-15
            )
        np.testing.assert_array_equal(ncdump_values(root, "virtual/v"), expected["virtual/v"])
    assert "--zarr-format 2: 5 arrays and 3 groups served as v2, 0 arrays as stored" in (
        mount.log_text()
    )


# check and options ----------------------------------------------------------------------------


def test_check_names_each_array_served_as_stored(tmp_path: Path) -> None:
    import zarr

    store_dir = tmp_path / "store"
    write_cases(zarr.storage.LocalStore(str(store_dir)))
    refs = write_kerchunk_json(store_dir, tmp_path / "refs.json")
    result = subprocess.run(
        refmount_command("check", "--zarr-format", "2", "--json", str(refs)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    stored = json.loads(result.stdout)["served_as_v3"]
    assert [(s["array"], s["codec"]) for s in stored] == [
        ("refused/sharded", "sharding_indexed"),
        ("refused/transposed", "transpose"),
    ]
    text = subprocess.run(
        refmount_command("check", "-o", "zarr_format=2", str(refs)),
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert "2 arrays served as stored (zarr v3)" in text
    assert "refused/sharded  sharding_indexed: a shard holds many chunks" in text


def test_o_zarr_format_mounts_the_view(tmp_path: Path) -> None:
    import zarr

    store_dir = tmp_path / "store"
    write_cases(zarr.storage.LocalStore(str(store_dir)))
    refs = write_kerchunk_json(store_dir, tmp_path / "refs.json")
    with mounted(refs, tmp_path / "mnt", "-o", "zarr_format=2") as mount:
        assert (mount.path / "codecs/gzip/0.1").is_file()
    with mounted(refs, tmp_path / "mnt3", "--zarr-format", "3") as mount:
        assert (mount.path / "codecs/gzip/c/0/1").is_file()


@requires_icechunk
@pytest.mark.interop
@pytest.mark.parametrize("mode", list(MODES))
def test_a_repository_virtualizarr_wrote_reads_as_v2(tmp_path: Path, mode: str) -> None:
    """VirtualiZarr 2's repository of a netCDF4 file (zlib + shuffle, virtual chunks) through
    the v2 view: xarray's v2 open, and with --decode ncdump, get the original values."""
    pytest.importorskip("virtualizarr")
    import netCDF4
    import xarray as xr

    from tests.integration import sources

    source = sources.netcdf4(tmp_path / "originals")
    repository = virtualizarr_repository(source.original, tmp_path / "repo")
    with netCDF4.Dataset(source.original) as dataset:
        temp = dataset["temp"][:]
    options = (*MODES[mode], "--authorize-container", "all")
    with mounted(repository, tmp_path / "mnt", *options) as mount:
        meta = json.loads((mount.path / "temp/.zarray").read_bytes())
        zattrs = json.loads((mount.path / "temp/.zattrs").read_bytes())
        assert zattrs["_ARRAY_DIMENSIONS"] == ["level", "y", "x"]
        assert zattrs["_FillValue"] == meta["fill_value"] == -999.0
        if not mode.endswith("decode"):
            assert codecs_of(meta) == ["shuffle", "zlib"]
        dataset = xr.open_zarr(str(mount.path), zarr_format=2, consolidated=True)
        np.testing.assert_array_equal(
            dataset["temp"].values, np.ma.filled(temp.astype("f4"), np.nan)
        )
        assert dataset.attrs["title"] == sources.NETCDF_TITLE
        if mode.endswith("decode"):
            dumped = ncdump_values(mount.path, "temp")
            np.testing.assert_allclose(dumped, np.ma.filled(temp, -999.0).ravel(), rtol=1e-6)
