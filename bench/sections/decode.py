"""The decode section: decoded MiB/s of a ``--decode`` mount read cold by GNU cat (1 and 8
readers) against in-process zarr-python reading the same references, with CPU per MiB of each
party."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

from bench.common import MIB
from bench.datasets import make_decode_set
from bench.goals import Row, absolute
from bench.measure import cat_all
from bench.mounts import fresh_mountpoint, mount_child
from bench.processes import process_cpu_seconds
from bench.report import cell
from bench.section import Context, Section
from bench.tools import Tool

READERS = (1, 8)

ZARR_READ = """
import json, resource, sys, time
import zarr
refs = sys.argv[1]
begun = time.perf_counter()
before = resource.getrusage(resource.RUSAGE_SELF)
store = zarr.storage.FsspecStore.from_url(
    "reference://", storage_options={"fo": refs}, read_only=True
)
values = zarr.open_array(store=store, path="v", mode="r", zarr_format=2)[...]
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
print(json.dumps({"seconds": time.perf_counter() - begun, "cpu_s": cpu, "bytes": values.nbytes}))
"""
"""zarr-python 3 reading the whole array in one process through fsspec's references."""


@dataclass(frozen=True)
class CatFigures:
    """GNU cat with ``readers`` processes through a fresh ``--decode`` mount."""

    mib_s: float
    cpu_ms_per_mib: float
    """The daemon's and cat's CPU together."""
    daemon_cpu_ms_per_mib: float


@dataclass
class DecodeFigures:
    """Every party's decoded MiB/s and CPU per MiB."""

    chunks: int
    cat: dict[int, CatFigures] = field(default_factory=dict)
    zarr_mib_s: float = 0.0
    zarr_cpu_ms_per_mib: float = 0.0

    def vs_zarr(self, readers: int) -> float:
        """cat through the mount with ``readers`` readers, as a ratio to zarr-python."""
        return self.cat[readers].mib_s / self.zarr_mib_s

    def to_json(self) -> dict[str, object]:
        """The figures under the JSON's flat keys (``cat8_mib_s``, ``zarr_mib_s``, ...)."""
        out: dict[str, object] = {"chunks": self.chunks, "decoded_mib": self.chunks}
        for readers, figures in self.cat.items():
            out[f"cat{readers}_mib_s"] = figures.mib_s
            out[f"cat{readers}_cpu_ms_per_mib"] = figures.cpu_ms_per_mib
            out[f"cat{readers}_daemon_cpu_ms_per_mib"] = figures.daemon_cpu_ms_per_mib
        out["zarr_mib_s"] = self.zarr_mib_s
        out["zarr_cpu_ms_per_mib"] = self.zarr_cpu_ms_per_mib
        for readers in self.cat:
            out[f"cat{readers}_vs_zarr"] = self.vs_zarr(readers)
        return out


def cat_through_mount(
    context: Context, refs: os.PathLike[str], chunks: int, readers: int
) -> CatFigures:
    """Mount ``refs`` with ``--decode`` and cat every chunk file with ``readers`` processes."""
    mountpoint = fresh_mountpoint(context.workdir, f"decode-{readers}")
    command = [sys.executable, "-m", "refmount", "-f", "--decode", str(refs), str(mountpoint)]
    with mount_child(command, mountpoint) as mount:
        chunk_files = (p for p in (mountpoint / "v").iterdir() if p.name[0].isdigit())
        files = sorted(chunk_files, key=lambda p: int(p.name.split(".")[0]))
        daemon_before = process_cpu_seconds(mount.process.pid)
        children_before = os.times()
        begun = time.perf_counter()
        cat_all(files, readers)
        seconds = time.perf_counter() - begun
        children_after = os.times()
        daemon_cpu = process_cpu_seconds(mount.process.pid) - daemon_before
    cat_cpu = (children_after.children_user + children_after.children_system) - (
        children_before.children_user + children_before.children_system
    )
    return CatFigures(
        chunks / seconds, 1000 * (daemon_cpu + cat_cpu) / chunks, 1000 * daemon_cpu / chunks
    )


def run(context: Context) -> DecodeFigures:
    """Write the compressed set, read it through the mount with 1 and 8 cats, then zarr."""
    chunks = max(8, int(256 * context.options.scale))
    refs = make_decode_set(context.workdir / "decode", chunks)
    result = DecodeFigures(chunks)
    for readers in READERS:
        result.cat[readers] = cat_through_mount(context, refs, chunks, readers)
    zarr_run = subprocess.run(
        [sys.executable, "-c", ZARR_READ, str(refs)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    zarr_figures = json.loads(zarr_run.stdout.strip().splitlines()[-1])
    if zarr_figures["bytes"] != chunks * MIB:
        raise RuntimeError(f"zarr-python read {zarr_figures['bytes']} bytes, not {chunks} MiB")
    result.zarr_mib_s = chunks / zarr_figures["seconds"]
    result.zarr_cpu_ms_per_mib = 1000 * zarr_figures["cpu_s"] / chunks
    return result


def rows(decode: DecodeFigures) -> list[Row]:
    """Per number of readers: MiB/s, the ratio to zarr-python (goal at 8) and CPU per MiB."""
    out = []
    for readers, figures in decode.cat.items():
        many = f"{readers} reader{'s' if readers > 1 else ''}"
        goal = absolute(lambda v: v >= 0.9) if readers == 8 else None
        ratio = {Tool.REFMOUNT: decode.vs_zarr(readers)}
        out += [
            Row(f"decode: cat, {many}", "MiB/s", {Tool.REFMOUNT: figures.mib_s}, True),
            Row(
                f"decode: {many} / zarr-python",
                "x",
                ratio,
                True,
                "≥ 0.9 (8 readers)" if readers == 8 else "",
                goal,
            ),
            Row(
                f"decode: CPU per MiB, {many}", "ms", {Tool.REFMOUNT: figures.cpu_ms_per_mib}, False
            ),
        ]
    return out


def notes(decode: DecodeFigures) -> list[str]:
    """How the decode rows were measured, and zarr-python's own figures."""
    return [
        f"decode: {decode.chunks} zlib chunks of 1 MiB decoded, local file; a fresh"
        f" --decode mount per row, read by GNU cat. zarr-python 3 in one process through"
        f" fsspec references: {cell(decode.zarr_mib_s)} MiB/s,"
        f" {cell(decode.zarr_cpu_ms_per_mib)} ms CPU per MiB. refmount's CPU per MiB"
        f" counts the daemon and cat."
    ]


SECTION = Section("decode", run, rows, notes=notes)
