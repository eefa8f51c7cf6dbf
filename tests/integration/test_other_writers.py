"""Reference sets written by other projects, read through a mount as their writers expect.

Each set comes from a writer other than this project's tests: GDAL's test fixtures (copied
with their licence, see ``fixtures/gdal/README.md``), fsspec's own Parquet writer
(``LazyReferenceMapper``) and VirtualiZarr (JSON and Parquet). Each is checked against the
values its writer put in or its own tests expect, not only against fsspec's reading.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.mounting import mounted, requires_fuse

pytestmark = [pytest.mark.fuse, requires_fuse]

FIXTURES = Path(__file__).parent / "fixtures"


def test_gdal_kerchunk_json_v0_fixture(tmp_path: Path) -> None:
    """GDAL's ``json_ref_v0_min``: a whole-file ``[url]`` relative to the reference file.

    zarr-python 3 refuses its dtype ``>u1`` (a byte order on a single byte), so the chunk is
    decoded with numpy, and read with GDAL itself when it is installed.
    """
    refs = FIXTURES / "gdal" / "json_ref_v0_min" / "ref.json"
    with mounted(refs, tmp_path / "mnt") as mount:
        root = mount.path
        assert sorted(os.listdir(root)) == [".zattrs", ".zgroup", "x"]
        assert sorted(os.listdir(root / "x")) == [".zarray", ".zattrs", "0"]
        assert (root / "x" / "0").stat().st_size == 1
        assert (root / "x" / "0").read_bytes() == b"\x01"
        # GDAL serves the object compactly (17 bytes); refmount, like fsspec, with json.dumps's
        # default separators (docs/semantics.md): the same JSON either way
        assert json.loads((root / ".zgroup").read_bytes()) == {"zarr_format": 2}
        zarray = json.loads((root / "x" / ".zarray").read_bytes())
        assert np.frombuffer((root / "x" / "0").read_bytes(), zarray["dtype"]).tolist() == [1]
        assert gdal_reads(root, "x") in (None, [1])  # GDAL reads its own fixture: x is [1]


def write_fsspec_parquet(directory: Path, engine: str) -> np.ndarray[Any, np.dtype[np.int32]]:
    """Write a set with fsspec's ``LazyReferenceMapper`` through ``engine``: ranges of a raw
    file and an inline chunk, two references per record file; return the array it describes."""
    import fsspec
    from fsspec.implementations.reference import LazyReferenceMapper

    values = np.arange(9, dtype="<i4") * 3
    raw = directory / "raw.bin"
    raw.write_bytes(b"HEAD" + values.tobytes())
    mapper = LazyReferenceMapper.create(
        root=str(directory / "refs.parq"),
        fs=fsspec.filesystem("file"),
        record_size=2,
        engine=engine,
    )
    zarray = {
        "zarr_format": 2,
        "shape": [9],
        "chunks": [3],
        "dtype": "<i4",
        "compressor": None,
        "filters": None,
        "fill_value": 0,
        "order": "C",
    }
    mapper[".zgroup"] = json.dumps({"zarr_format": 2}).encode()
    mapper["x/.zarray"] = json.dumps(zarray).encode()
    mapper["x/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": ["x"]}).encode()
    mapper["x/0"] = [str(raw), 4, 12]
    mapper["x/1"] = values[3:6].tobytes()
    mapper["x/2"] = [str(raw), 4 + 24, 12]
    mapper.flush()
    return values


FASTPARQUET_DEPRECATED = "ignore:The 'fastparquet' engine is deprecated"
"""pandas 3 warns when fsspec writes through fastparquet, fsspec's default engine."""


@pytest.mark.filterwarnings(FASTPARQUET_DEPRECATED)
@pytest.mark.parametrize("engine", ["fastparquet", "pyarrow"])
def test_fsspec_lazy_reference_mapper_parquet(tmp_path: Path, engine: str) -> None:
    """Every chunk reads as written, whichever engine wrote it (fsspec's own
    ``ReferenceFileSystem``, in fsspec 2026.9, fails on the pyarrow-written set with a
    ``TypeError``, so the values written are the oracle)."""
    zarr = pytest.importorskip("zarr")
    pytest.importorskip(engine)

    values = write_fsspec_parquet(tmp_path, engine)
    refs = tmp_path / "refs.parq"
    assert sorted(os.listdir(refs / "x")) == ["refs.0.parq", "refs.1.parq"]
    with mounted(refs, tmp_path / "mnt") as mount:
        x = mount.path / "x"
        assert sorted(os.listdir(x)) == [".zarray", ".zattrs", "0", "1", "2"]
        for index in range(3):
            assert (x / str(index)).read_bytes() == values[3 * index : 3 * index + 3].tobytes()
        assert json.loads((x / ".zarray").read_bytes())["shape"] == [9]
        array = zarr.open_array(str(x), mode="r", zarr_format=2)
        np.testing.assert_array_equal(array[:], values)


def write_netcdf(path: Path) -> None:
    """Write a small netCDF4 file: a chunked, compressed variable and two coordinates."""
    import xarray as xr

    air = np.arange(24, dtype="f4").reshape(4, 6) * 1.5 + 250
    dataset = xr.Dataset(
        {"air": (("time", "lat"), air, {"units": "K"})},
        coords={"time": np.arange(4), "lat": np.linspace(10.0, 60.0, 6)},
        attrs={"title": "written for refmount's tests"},
    )
    encoding = {"air": {"chunksizes": (2, 6), "zlib": True, "shuffle": True}}
    dataset.to_netcdf(path, engine="netcdf4", encoding=encoding)


@pytest.mark.filterwarnings(FASTPARQUET_DEPRECATED)
@pytest.mark.parametrize("layout", ["json", "parquet"])
def test_virtualizarr_references_to_a_netcdf4_file(tmp_path: Path, layout: str) -> None:
    """VirtualiZarr's round trip: the virtual dataset read back equals the original file."""
    pytest.importorskip("virtualizarr", reason="VirtualiZarr is in the dev extra")
    import xarray as xr
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser

    try:
        from obspec_utils.registry import ObjectStoreRegistry
    except ImportError:  # VirtualiZarr before it moved the registry out
        from virtualizarr.registry import ObjectStoreRegistry

    original = tmp_path / "air.nc"
    write_netcdf(original)
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    virtual = open_virtual_dataset(
        url=original.as_uri(), parser=HDFParser(), registry=registry, loadable_variables=[]
    )
    refs = tmp_path / ("refs.json" if layout == "json" else "refs.parq")
    virtual.vz.to_kerchunk(str(refs), format=layout)
    with (
        mounted(refs, tmp_path / "mnt") as mount,
        xr.open_dataset(original, engine="netcdf4") as expected,
        xr.open_dataset(mount.path, engine="zarr", consolidated=False, zarr_format=2) as got,
    ):
        np.testing.assert_array_equal(got["air"].values, expected["air"].values)
        np.testing.assert_array_equal(got["lat"].values, expected["lat"].values)
        np.testing.assert_array_equal(got["time"].values, expected["time"].values)
        assert got["air"].attrs["units"] == "K"
        assert got.attrs["title"] == expected.attrs["title"]


GDAL_ZMETADATA_MIN = {
    "metadata": {
        ".zgroup": {"zarr_format": 2},
        ".zattrs": {},
        "x/.zarray": {
            "zarr_format": 2,
            "shape": [1],
            "chunks": [1],
            "compressor": None,
            "dtype": ">u1",
            "order": "C",
            "filters": [],
            "fill_value": None,
        },
        "x/.zattrs": {},
    },
    "record_size": 1,
}
"""The ``.zmetadata`` of GDAL's ``parquet_ref_min`` family of fixtures, as GDAL writes it."""


def write_gdal_parquet_set(
    directory: Path, array: str, zmetadata: dict[str, Any], records: list[list[dict[str, Any]]]
) -> Path:
    """Lay out a Parquet reference set as GDAL's kerchunk fixtures do: ``.zmetadata`` and
    ``ARRAY/refs.N.parq`` with the columns ``path, offset, size, raw`` (int64 and binary, as
    GDAL's OGR Parquet writer types them), the targets beside the record files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields: list[pa.Field[Any]] = [
        pa.field("path", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("size", pa.int64()),
        pa.field("raw", pa.binary()),
    ]
    schema = pa.schema(fields)
    directory.mkdir()
    (directory / ".zmetadata").write_text(json.dumps(zmetadata))
    (directory / array).mkdir()
    for number, rows in enumerate(records):
        table = pa.Table.from_pylist(
            [{"offset": None, "size": None, "raw": None, **row} for row in rows], schema=schema
        )
        pq.write_table(table, directory / array / f"refs.{number}.parq")
    return directory


def gdal_reads(root: Path, array: str) -> list[int] | None:
    """The values of ``array`` as GDAL reads them through the mount, or None without GDAL."""
    if shutil.which("gdalmdiminfo") is None:
        return None
    result = subprocess.run(
        ["gdalmdiminfo", "-detailed", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    values = json.loads(result.stdout)["arrays"][array]["values"]
    return list(np.ravel(values).tolist())


@pytest.mark.parametrize(
    ("fixture", "row"),
    [
        ("parquet_ref_min", {"path": "0.bin", "offset": 0, "size": 1}),
        ("parquet_ref_0_dim_missing_size", {"path": "0.bin"}),  # null offset and size
        ("parquet_ref_0_dim_path_dot_dot", {"path": "../x/0.bin"}),
    ],
)
def test_gdal_kerchunk_parquet_fixtures(tmp_path: Path, fixture: str, row: dict[str, Any]) -> None:
    """GDAL's one-chunk Parquet fixtures, rebuilt with the rows GDAL's own scripts write
    (``x/create_refs.0.parq.py``): a path relative to the record file's directory, with or
    without offset and size. GDAL's ``zarr_kerchunk_parquet.py`` expects the root to list
    ``.zattrs``, ``.zgroup`` and ``x``, ``x`` to list ``.zattrs``, ``.zarray`` and ``0``, and
    ``x/0`` to be one byte, ``\\x01``. refmount also lists the set's consolidated metadata,
    ``.zmetadata``, at the root (docs/semantics.md)."""
    refs = write_gdal_parquet_set(tmp_path / fixture, "x", GDAL_ZMETADATA_MIN, [[row]])
    (refs / "x" / "0.bin").write_bytes(b"\x01")
    with mounted(refs, tmp_path / "mnt") as mount:
        root = mount.path
        assert sorted(os.listdir(root)) == [".zattrs", ".zgroup", ".zmetadata", "x"]
        assert sorted(os.listdir(root / "x")) == [".zarray", ".zattrs", "0"]
        assert (root / "x" / "0").stat().st_size == 1
        assert (root / "x" / "0").read_bytes() == b"\x01"
        assert json.loads((root / ".zgroup").read_bytes()) == {"zarr_format": 2}
        assert gdal_reads(root, "x") in (None, [1])


def test_gdal_kerchunk_parquet_two_dimensions(tmp_path: Path) -> None:
    """GDAL's ``parquet_ref_2_dim``: a 3 by 4 array of 2 by 3 chunks, three references per
    record file (the rows of its ``ar/refs.N.parq.csv``). GDAL's tests expect ``ar`` to list
    ``.zarray``, ``.zattrs`` and the four chunks of 6 bytes, ``0.2`` and ``2.0`` not to exist,
    and the array to read as ``00 01 02 00 / 03 04 05 03 / 00 01 02 00``."""
    zmetadata = json.loads(json.dumps(GDAL_ZMETADATA_MIN).replace('"x/', '"ar/'))
    zmetadata["metadata"]["ar/.zarray"].update(shape=[3, 4], chunks=[2, 3])
    zmetadata["record_size"] = 3
    paths = [[f"{n}.bin" for n in (0, 1, 2)], ["4.bin"]]
    records = [[{"path": path, "offset": 0, "size": 6} for path in rows] for rows in paths]
    refs = write_gdal_parquet_set(tmp_path / "parquet_ref_2_dim", "ar", zmetadata, records)
    for name in ("0.bin", "1.bin", "2.bin", "4.bin"):
        (refs / "ar" / name).write_bytes(bytes(range(6)))
    with mounted(refs, tmp_path / "mnt") as mount:
        ar = mount.path / "ar"
        assert sorted(os.listdir(ar)) == [".zarray", ".zattrs", "0.0", "0.1", "1.0", "1.1"]
        assert {(ar / name).stat().st_size for name in ("0.0", "0.1", "1.0", "1.1")} == {6}
        assert not (ar / "0.2").exists()
        assert not (ar / "2.0").exists()
        chunks = {
            name: np.frombuffer((ar / name).read_bytes(), "u1").reshape(2, 3)
            for name in ("0.0", "0.1", "1.0", "1.1")
        }
        whole = np.block([[chunks["0.0"], chunks["0.1"]], [chunks["1.0"], chunks["1.1"]]])[:3, :4]
        expected = [0, 1, 2, 0, 3, 4, 5, 3, 0, 1, 2, 0]
        assert whole.ravel().tolist() == expected
        assert gdal_reads(mount.path, "ar") in (None, expected)
