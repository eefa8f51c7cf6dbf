"""Original netCDF4, HDF5 and TIFF files made by the tests, and kerchunk's references to them."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

Kind = Literal["netcdf", "hdf5", "tiff", "zarr"]

NETCDF_TITLE = "interop: ünïcode ☃ 気温"
NETCDF_LONG_NAME = "température de l'air ☃"
NETCDF_FILL = -999.0
HDF5_TITLE = "groupes imbriqués ☃"
HDF5_SCALAR = 3.25


@dataclass(frozen=True)
class Source:
    """An original file, kerchunk's JSON references to it, and the arrays they describe."""

    kind: Kind
    original: Path
    refs: Path
    arrays: tuple[str, ...]

    def read_original(self, name: str) -> np.ndarray[Any, Any]:
        """Read array ``name`` (a zarr path) from the original file with its own library.

        netCDF4 applies ``_FillValue``, so netCDF variables come back as masked arrays.
        """
        if self.kind == "netcdf":
            import netCDF4

            with netCDF4.Dataset(self.original) as ds:
                values: np.ndarray[Any, Any] = ds[name][...]
                return values
        if self.kind == "hdf5":
            import h5py

            with h5py.File(self.original, "r") as f:
                return np.asarray(f[name][()])
        if self.kind == "zarr":
            import zarr

            return np.asarray(zarr.open_array(str(self.original / name), mode="r")[...])
        import tifffile

        return np.asarray(tifffile.imread(self.original))

    def refs_dict(self) -> dict[str, Any]:
        """Return the JSON references as a dict."""
        refs: dict[str, Any] = json.loads(self.refs.read_text())
        return refs


def netcdf4(directory: Path, *, shuffle: bool = True) -> Source:
    """A netCDF4 file: zlib (and shuffle) chunks, a fill value, partial edge chunks, unicode.

    ``temp`` is float32 (level, y, x) = (5, 11, 13) in (2, 4, 5) chunks, so every dimension ends
    in a partial chunk; some points are masked (written as ``_FillValue``). ``elevation`` is an
    int16 (y, x) variable; ``level``, ``y`` and ``x`` are coordinate variables.
    """
    import netCDF4

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ("data.nc" if shuffle else "data-noshuffle.nc")
    shape = (5, 11, 13)
    values = (np.arange(np.prod(shape), dtype="f4").reshape(shape) / 8 + 250).astype("f4")
    level, y, x = np.indices(shape)
    temp = np.ma.masked_where((level + 2 * y + 3 * x) % 11 == 0, values)
    with netCDF4.Dataset(path, "w") as ds:
        ds.title = NETCDF_TITLE
        ds.history = "written by the refmount interop tests"
        for name, size in zip(("level", "y", "x"), shape, strict=True):
            ds.createDimension(name, size)
            coordinate = ds.createVariable(name, "f8", (name,))
            coordinate[:] = np.arange(size) * 0.5 + (1000 if name == "level" else 0)
        coordinates = ds.variables
        coordinates["level"].units = "hPa"
        var = ds.createVariable(
            "temp",
            "f4",
            ("level", "y", "x"),
            zlib=True,
            shuffle=shuffle,
            chunksizes=(2, 4, 5),
            fill_value=NETCDF_FILL,
        )
        var.units = "K"
        var.long_name = NETCDF_LONG_NAME
        var[:] = temp
        elevation = ds.createVariable(
            "elevation", "i2", ("y", "x"), zlib=True, shuffle=shuffle, chunksizes=(4, 5)
        )
        elevation.units = "m"
        elevation[:] = (np.arange(11 * 13).reshape(11, 13) * 37 - 2000).astype("i2")
    return Source("netcdf", path, kerchunk_hdf(path), ("temp", "elevation", "level", "y", "x"))


def hdf5(directory: Path) -> Source:
    """An HDF5 file: nested groups ``/a/b/c``, a 0-d dataset, gzip and plain chunked datasets."""
    import h5py

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "data.h5"
    with h5py.File(path, "w") as f:
        f.attrs["title"] = HDF5_TITLE
        nested = f.create_group("a/b/c")
        nested.attrs["note"] = "tief verschachtelt ☃"
        values = nested.create_dataset(
            "values",
            data=(np.arange(30 * 40, dtype="i4").reshape(30, 40) * 3 - 1000),
            chunks=(8, 16),
            compression="gzip",
        )
        values.attrs["units"] = "counts"
        scalar = f["a"].create_dataset("scalar", data=np.float64(HDF5_SCALAR))
        scalar.attrs["units"] = "m"
        f.create_dataset("data", data=np.linspace(-1, 1, 20 * 25).reshape(20, 25), chunks=(10, 10))
    return Source("hdf5", path, kerchunk_hdf(path), ("a/b/c/values", "a/scalar", "data"))


def tiff(directory: Path, compression: str = "zlib", predictor: bool = False) -> Source:
    """A tiled TIFF: a 500x600 uint16 image in 256x256 tiles (zlib unless told otherwise).

    The references come from tifffile's ``aszarr().write_fsspec`` (what kerchunk's
    ``tiff_to_zarr`` wraps): the image is the array at the root of the store, key ``""``.
    LZW, PackBits and the horizontal predictor are referenced as imagecodecs' codecs.
    """
    import tifffile

    directory.mkdir(parents=True, exist_ok=True)
    stem = "image" if compression == "zlib" and not predictor else f"image-{compression}"
    path = directory / f"{stem}{'-predictor' if predictor else ''}.tif"
    image = ((np.arange(500 * 600, dtype="u4") * 7919) % 65521).astype("u2").reshape(500, 600)
    tifffile.imwrite(path, image, tile=(256, 256), compression=compression, predictor=predictor)
    with tifffile.TiffFile(path) as tif, tif.series[0].aszarr() as store:
        text = io.StringIO()
        store.write_fsspec(text, url=str(directory), version=0)
    refs_path = directory / f"{path.name}.json"
    refs_path.write_text(text.getvalue())
    return Source("tiff", path, refs_path, ("",))


def netcdf3(directory: Path) -> Source:
    """A netCDF3 classic file, which kerchunk references as big-endian arrays.

    ``t`` is float32 (y, x) = (7, 9) with a fill value and some masked points, ``e`` int16;
    the references come from kerchunk's ``NetCDF3ToZarr`` (it needs scipy).
    """
    import netCDF4
    from kerchunk.netCDF3 import NetCDF3ToZarr

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "classic.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.title = NETCDF_TITLE
        ds.createDimension("y", 7)
        ds.createDimension("x", 9)
        t = ds.createVariable("t", "f4", ("y", "x"), fill_value=NETCDF_FILL)
        t.units = "K"
        values = np.arange(63, dtype="f4").reshape(7, 9) / 4 + 250
        t[:] = np.ma.masked_where(np.arange(63).reshape(7, 9) % 10 == 3, values)
        e = ds.createVariable("e", "i2", ("y", "x"))
        e[:] = (np.arange(63).reshape(7, 9) * 37 - 1000).astype("i2")
    refs = NetCDF3ToZarr(str(path), inline_threshold=0).translate()
    refs_path = path.with_name(path.name + ".json")
    refs_path.write_text(json.dumps(refs))
    return Source("netcdf", path, refs_path, ("t", "e"))


# zarr v2 arrays written by zarr-python, one per codec family: (name, dtype, order, compressor,
# filters). Values are integers, exact in every dtype; the lossy filters are read back through
# zarr-python from the original store, so both sides see the same rounding.
ZARR2_ARRAYS: list[tuple[str, str, str, dict[str, Any] | None, list[dict[str, Any]] | None]] = [
    ("blosc_lz4", "<f8", "C", {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}, None),
    ("blosc_bitshuffle_be", ">i4", "C", {"id": "blosc", "cname": "zstd", "shuffle": 2}, None),
    ("lz4", "<f4", "C", {"id": "lz4"}, None),
    ("zstd", "<u2", "C", {"id": "zstd", "level": 3}, None),
    ("bz2", "<i8", "C", {"id": "bz2"}, None),
    ("lzma", "<f8", "C", {"id": "lzma"}, None),
    ("gzip_delta", "<i4", "C", {"id": "gzip"}, [{"id": "delta", "dtype": "<i4"}]),
    (
        "scaled",
        "<f8",
        "C",
        {"id": "zlib"},
        [{"id": "fixedscaleoffset", "offset": 0, "scale": 4, "dtype": "<f8", "astype": "<i2"}],
    ),
    ("fortran_be", ">f4", "F", {"id": "zlib"}, [{"id": "shuffle", "elementsize": 4}]),
]


def zarr_codecs(directory: Path) -> tuple[Source, Source]:
    """zarr stores written by zarr-python with the codecs kerchunk's scanners rarely emit.

    The v2 store has one 10x12 array per codec family (``ZARR2_ARRAYS``: blosc, lz4, zstd,
    bz2, lzma, gzip with delta, fixedscaleoffset, big-endian and F order); the v3 store one
    array with ``transpose``, big-endian ``bytes``, ``zstd`` and ``crc32c``. References point
    at the stores' chunk files, metadata inline.
    """
    import numcodecs
    import zarr
    from zarr.codecs import BytesCodec, Crc32cCodec, TransposeCodec, ZstdCodec

    values = np.arange(120).reshape(10, 12) * 2 - 100  # even: never -1 (65535, ncdump's fill)
    v2 = directory / "codecs.zarr"
    group = zarr.open_group(zarr.storage.LocalStore(v2), mode="w", zarr_format=2)
    for name, dtype, order, compressor, filters in ZARR2_ARRAYS:
        array = group.create_array(
            name,
            shape=values.shape,
            chunks=(4, 5),
            dtype=dtype,
            order=order,  # type: ignore[arg-type]
            compressors=None if compressor is None else numcodecs.get_codec(compressor),
            filters=[numcodecs.get_codec(f) for f in filters or []],
            attributes={"_ARRAY_DIMENSIONS": [f"{name}_y", f"{name}_x"]},
        )
        array[:] = values
    v3 = directory / "codecs-v3.zarr"
    group3 = zarr.open_group(zarr.storage.LocalStore(v3), mode="w", zarr_format=3)
    array3 = group3.create_array(
        "transposed",
        shape=values.shape,
        chunks=(4, 5),
        dtype="float32",
        serializer=BytesCodec(endian="big"),
        compressors=[ZstdCodec(), Crc32cCodec()],
        filters=[TransposeCodec(order=(1, 0))],
    )
    array3[:] = values
    names = tuple(name for name, *_ in ZARR2_ARRAYS)
    return (
        Source("zarr", v2, store_refs(v2), names),
        Source("zarr", v3, store_refs(v3), ("transposed",)),
    )


def store_refs(store: Path) -> Path:
    """Write JSON references to every file of a zarr directory store (metadata inline)."""
    refs: dict[str, Any] = {}
    for path in sorted(p for p in store.rglob("*") if p.is_file()):
        key = path.relative_to(store).as_posix()
        if path.name in (".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"):
            refs[key] = path.read_text()
        else:
            refs[key] = [str(path), 0, path.stat().st_size]
    refs_path = store.with_name(store.name + ".json")
    refs_path.write_text(json.dumps({"version": 1, "refs": refs}))
    return refs_path


def kerchunk_hdf(path: Path) -> Path:
    """Write kerchunk's ``SingleHdf5ToZarr`` references to ``path`` beside it; return their path."""
    from kerchunk.hdf import SingleHdf5ToZarr

    refs = SingleHdf5ToZarr(str(path), inline_threshold=50).translate()
    refs_path = path.with_name(path.name + ".json")
    refs_path.write_text(json.dumps(refs))
    return refs_path


def parquet(source: Source, directory: Path, record_size: int = 4) -> Path:
    """Write ``source``'s references as kerchunk Parquet (``refs_to_dataframe``)."""
    from kerchunk.df import refs_to_dataframe

    refs_to_dataframe(source.refs_dict(), str(directory), record_size=record_size)
    return directory


def utf8_metadata(source: Source) -> Source:
    """The same references with the JSON metadata (``.zattrs`` …) as UTF-8, not ``\\u`` escapes."""
    refs = source.refs_dict()
    entries = refs.get("refs", refs)
    for key, value in entries.items():
        if key.rsplit("/", 1)[-1] in {".zattrs", ".zarray", ".zgroup"} and isinstance(value, str):
            entries[key] = json.dumps(json.loads(value), ensure_ascii=False)
    path = source.refs.with_name(source.original.name + ".utf8.json")
    path.write_text(json.dumps(refs, ensure_ascii=False), encoding="utf-8")
    return Source(source.kind, source.original, path, source.arrays)
