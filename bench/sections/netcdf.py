"""The netcdf section: laying out the ``--netcdf`` file of a set of a million chunks (seconds
and extra resident memory, in a child process), and netCDF4-python reading a whole variable
of 1 MiB zlib chunks through the file against reading the original netCDF file directly."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.goals import Row, absolute
from bench.mounts import fresh_mountpoint, mount_child
from bench.report import cell
from bench.section import Context, Section
from bench.tools import Tool

LAYOUT_CHUNKS = 1_000_000
"""Chunks of the layout row at scale 1."""

READ_CHUNKS = 128
"""1 MiB chunks of the read rows at scale 1."""

ROUNDS = 3
"""Reads of each side; the best is kept (the original is in the page cache for all)."""

LAYOUT = """
import json, sys, time
from pathlib import Path
from refmount.config import MountConfig
from refmount.daemon.loading import load_references
from refmount.netcdf.served import open_netcdf

def status(field):
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

loaded = load_references(MountConfig(refs=sys.argv[1], mountpoint=Path("/nonexistent")))
with open("/proc/self/clear_refs", "w") as clear:
    clear.write("5")  # the peak resident set starts again from now
before = status("VmRSS")
begun = time.perf_counter()
served = open_netcdf("set.nc", loaded.references, None, budget=1 << 40, eager=True)
seconds = time.perf_counter() - begun
extra = (status("VmHWM") - before) / 1e6
print(json.dumps({"seconds": seconds, "extra_mb": extra, "size": served.size_now()}))
"""
"""Load the set, then lay its file out eagerly; the extra RSS is the peak during the layout
(the kernel's peak reset after loading) less the RSS after loading."""

READ = """
import json, sys, time
import netCDF4
begun = time.perf_counter()
with netCDF4.Dataset(sys.argv[1]) as ds:
    values = ds["v"][...]
print(json.dumps({"seconds": time.perf_counter() - begun, "bytes": values.nbytes}))
"""


@dataclass
class NetcdfFigures:
    """The layout's figures and both sides' read rates."""

    chunks: int
    layout_s: float = 0.0
    layout_extra_mb: float = 0.0
    read_chunks: int = 0
    direct_mib_s: float = 0.0
    mount_mib_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        """The figures as flat keys."""
        return {
            "chunks": self.chunks,
            "layout_s": self.layout_s,
            "layout_extra_mb": self.layout_extra_mb,
            "read_chunks": self.read_chunks,
            "direct_mib_s": self.direct_mib_s,
            "mount_mib_s": self.mount_mib_s,
            "mount_vs_direct": self.mount_mib_s / self.direct_mib_s,
        }


def layout_set(directory: Path, chunks: int) -> Path:
    """A JSON set of one zlib + shuffle array of ``chunks`` 16-byte chunks (never read)."""
    directory.mkdir(parents=True, exist_ok=True)
    columns = 1000
    rows = max(1, chunks // columns)
    meta = {
        "zarr_format": 2,
        "shape": [rows, columns * 4],
        "chunks": [1, 4],
        "dtype": "<f4",
        "fill_value": None,
        "order": "C",
        "filters": [{"id": "shuffle", "elementsize": 4}],
        "compressor": {"id": "zlib", "level": 1},
    }
    path = directory / "layout.json"
    with open(path, "w") as out:
        out.write('{"version": 1, "refs": {".zgroup": "{\\"zarr_format\\": 2}", ')
        out.write(f'"v/.zarray": {json.dumps(json.dumps(meta))}, ')
        out.write('"v/.zattrs": "{\\"_ARRAY_DIMENSIONS\\": [\\"t\\", \\"x\\"]}"')
        for row in range(rows):
            for column in range(columns):
                offset = (row * columns + column) * 16
                out.write(f', "v/{row}.{column}": ["data.bin", {offset}, 16]')
        out.write("}}")
    return path


def read_set(directory: Path, chunks: int) -> tuple[Path, Path]:
    """A netCDF-4 file of ``chunks`` 1 MiB zlib + shuffle chunks and kerchunk's references."""
    import netCDF4
    import numpy as np
    from kerchunk.hdf import SingleHdf5ToZarr

    directory.mkdir(parents=True, exist_ok=True)
    original = directory / "original.nc"
    with netCDF4.Dataset(original, "w") as ds:
        for name, size in (("t", chunks), ("y", 512), ("x", 512)):
            ds.createDimension(name, size)
        variable = ds.createVariable(
            "v",
            "f4",
            ("t", "y", "x"),
            zlib=True,
            complevel=1,
            shuffle=True,
            chunksizes=(1, 512, 512),
        )
        generator = np.random.default_rng(0)
        for step in range(chunks):
            variable[step] = (generator.normal(size=(512, 512)) * 10).round(1).astype("f4")
    refs = directory / "original.json"
    refs.write_text(json.dumps(SingleHdf5ToZarr(str(original), inline_threshold=0).translate()))
    return original, refs


def read_once(path: Path) -> float:
    """Read the whole variable with netCDF4-python in a child; return its seconds."""
    done = subprocess.run(
        [sys.executable, "-c", READ, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def run(context: Context) -> NetcdfFigures:
    """Lay out the big set in a child, then read the variable both ways, best of rounds."""
    scale = context.options.scale
    figures = NetcdfFigures(max(1000, int(LAYOUT_CHUNKS * scale)))
    refs = layout_set(context.workdir / "netcdf", figures.chunks)
    done = subprocess.run(
        [sys.executable, "-c", LAYOUT, str(refs)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    layout = json.loads(done.stdout.strip().splitlines()[-1])
    figures.layout_s, figures.layout_extra_mb = layout["seconds"], layout["extra_mb"]
    figures.read_chunks = max(8, int(READ_CHUNKS * scale))
    original, read_refs = read_set(context.workdir / "netcdf-read", figures.read_chunks)
    direct = min(read_once(original) for _ in range(ROUNDS))
    through = []
    for _ in range(ROUNDS):  # a fresh mount each time: nothing in the kernel's cache
        mountpoint = fresh_mountpoint(context.workdir, "netcdf")
        command = [
            sys.executable,
            "-m",
            "refmount",
            "-f",
            "--netcdf-eager",
            str(read_refs),
            str(mountpoint),
        ]
        with mount_child(command, mountpoint):
            through.append(read_once(mountpoint / "original.nc"))
    figures.direct_mib_s = figures.read_chunks / direct
    figures.mount_mib_s = figures.read_chunks / min(through)
    return figures


def rows(netcdf: NetcdfFigures) -> list[Row]:
    """The layout's time and memory, and the read ratio, each with the issue's goal."""
    many = f"{netcdf.chunks:,} chunks"
    return [
        Row(
            f"netcdf: layout, {many}",
            "s",
            {Tool.REFMOUNT: netcdf.layout_s},
            False,
            "< 10 (1,000,000 chunks)",
            absolute(lambda v: v < 10),
        ),
        Row(
            f"netcdf: layout extra RSS, {many}",
            "MB",
            {Tool.REFMOUNT: netcdf.layout_extra_mb},
            False,
            "< 200",
            absolute(lambda v: v < 200),
        ),
        Row("netcdf: netCDF4 reads the .nc", "MiB/s", {Tool.REFMOUNT: netcdf.mount_mib_s}, True),
        Row(
            "netcdf: .nc / original file",
            "x",
            {Tool.REFMOUNT: netcdf.mount_mib_s / netcdf.direct_mib_s},
            True,
            "≥ 0.8",
            absolute(lambda v: v >= 0.8),
        ),
    ]


def notes(netcdf: NetcdfFigures) -> list[str]:
    """How the rows were measured."""
    return [
        f"netcdf: layout of a JSON set of {netcdf.chunks:,} zlib + shuffle chunks, in a child"
        f" (load, then --netcdf-eager's layout; extra RSS is the peak less the RSS after"
        f" loading). Reads: netCDF4-python reads a (t, 512, 512) float32 variable of"
        f" {netcdf.read_chunks} zlib chunks of 1 MiB, best of {ROUNDS}, through a fresh"
        f" --netcdf mount of kerchunk's references and from the original file (page cache"
        f" warm): {cell(netcdf.direct_mib_s)} MiB/s decoded directly."
    ]


SECTION = Section("netcdf", run, rows, notes=notes)
