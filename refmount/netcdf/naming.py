"""The netCDF file's name: given, or made from the reference file's (``refs.json`` gives
``refs.nc``, ``data.nc.json.gz`` gives ``data.nc``)."""

from __future__ import annotations

import os

from refmount.names import NAME_MAX

SUFFIX = ".nc"
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4")
FORMAT_SUFFIXES = (".json", ".jsonl", ".parq", ".parquet")
SOURCE_SUFFIXES = (".nc", ".nc4", ".h5", ".hdf5", ".hdf", ".he5", ".zarr")
"""What the set was made from: ``data.nc.json`` gives ``data.nc``, not ``data.nc.nc``."""
DEFAULT_STEM = "refs"
"""The stem when the reference file has none to give (standard input, a bare URL)."""


def stem(refs: str) -> str:
    """Return the stem of the reference file or directory ``refs`` (a path or URL)."""
    name = refs.rstrip("/").rpartition("/")[2].partition("?")[0]
    for suffixes in (COMPRESSION_SUFFIXES, FORMAT_SUFFIXES, SOURCE_SUFFIXES):
        for suffix in suffixes:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
    if name in ("", "-", ".", ".."):
        return DEFAULT_STEM
    return name


def default_name(refs: str) -> str:
    """Return the netCDF file's default name: the stem of ``refs`` and ``.nc``."""
    return checked_name(stem(refs)[: NAME_MAX - len(SUFFIX)] + SUFFIX)


def checked_name(name: str) -> str:
    """Return ``name`` if a file in the root can have it; raise ``ValueError`` otherwise."""
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\0" in name
        or len(os.fsencode(name)) > NAME_MAX
    ):
        raise ValueError(f"--netcdf-name {name!r} cannot name a file")
    return name
