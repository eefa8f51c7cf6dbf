"""The generated data: target files, the JSON and Parquet reference sets pointing into them, the
huge Parquet set, the large JSON set and the compressed set of the decode section."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import KIB, MIB
from tests.support.datasets import zarray

DECODE_ROWS = 256
"""A decoded chunk of the decode section: 256 x 1024 float32 values, 1 MiB."""


@dataclass
class DataSet:
    """Generated target files and reference sets, the same for every target."""

    directory: Path
    big_chunks: int
    many_chunks: int
    big_file: Path = field(init=False)
    many_file: Path = field(init=False)

    def __post_init__(self) -> None:
        self.big_file = self.directory / "data" / "big.bin"
        self.many_file = self.directory / "data" / "many.bin"

    def generate(self) -> None:
        """Write the random target files."""
        (self.directory / "data").mkdir(parents=True, exist_ok=True)
        for path, size, seed in (
            (self.big_file, self.big_chunks * MIB, 1),
            (self.many_file, self.many_chunks * 4 * KIB, 2),
        ):
            rng = np.random.default_rng(seed)
            with open(path, "wb") as handle:
                left = size
                while left:
                    step = min(left, 64 * MIB)
                    handle.write(rng.bytes(step))
                    left -= step

    def write_plain_chunks(self) -> list[Path]:
        """Each 1 MiB chunk of the big file as a plain file of its own, ``plain/big/<i>``."""
        directory = self.directory / "plain" / "big"
        directory.mkdir(parents=True, exist_ok=True)
        paths = [directory / str(i) for i in range(self.big_chunks)]
        with open(self.big_file, "rb") as source:
            for path in paths:
                path.write_bytes(source.read(MIB))
        return paths

    def big_ranges(self) -> list[tuple[int, int]]:
        """(offset, size) of each 1 MiB chunk of the big file."""
        return [(i * MIB, MIB) for i in range(self.big_chunks)]

    def many_ranges(self) -> list[tuple[int, int]]:
        """(offset, size) of each 4 KiB chunk of the many file."""
        return [(i * 4 * KIB, 4 * KIB) for i in range(self.many_chunks)]

    def expected(self, which: str, index: int) -> bytes:
        """The source bytes of chunk ``index`` of "big" or "many"."""
        path, size = (self.big_file, MIB) if which == "big" else (self.many_file, 4 * KIB)
        with open(path, "rb") as handle:
            handle.seek(index * size)
            return handle.read(size)

    def write_refs(self, name: str, big_url: str, many_url: str) -> dict[str, Path]:
        """JSON sets for "big" and "many" and a Parquet set for "many", pointing at the URLs."""
        out = self.directory / name
        out.mkdir(parents=True, exist_ok=True)
        for which, url, chunks, size, ranges in (
            ("big", big_url, self.big_chunks, MIB, self.big_ranges()),
            ("many", many_url, self.many_chunks, 4 * KIB, self.many_ranges()),
        ):
            refs: dict[str, Any] = {
                ".zgroup": '{"zarr_format": 2}',
                f"{which}/.zarray": json.dumps(zarray([chunks * size], [size])),
            }
            for i, (offset, length) in enumerate(ranges):
                refs[f"{which}/{i}"] = [url, offset, length]
            (out / f"{which}.json").write_text(json.dumps({"version": 1, "refs": refs}))
        metadata = {
            ".zgroup": {"zarr_format": 2},
            "many/.zarray": zarray([self.many_chunks * 4 * KIB], [4 * KIB]),
        }
        offsets = np.arange(self.many_chunks, dtype="int64") * 4 * KIB
        write_parquet(out / "many.parq", metadata, "many", many_url, offsets, 4 * KIB)
        return {"big": out / "big.json", "many": out / "many.json", "many_parq": out / "many.parq"}


def write_parquet(
    root: Path,
    metadata: dict[str, Any],
    variable: str,
    url: str,
    offsets: np.ndarray[Any, Any],
    size: int,
    record_size: int = 100_000,
) -> None:
    """A Parquet reference directory: one variable, every chunk in the same target file."""
    (root / variable).mkdir(parents=True, exist_ok=True)
    (root / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": record_size}))
    total = len(offsets)
    for record in range(-(-total // record_size)):
        start = record * record_size
        count = min(record_size, total - start)
        table = pa.table(
            {
                "path": pa.array([url] * count).dictionary_encode(),
                "offset": pa.array(offsets[start : start + count]),
                "size": pa.array(np.full(count, size, dtype="int64")),
                "raw": pa.nulls(count, pa.binary()),
            }
        )
        pq.write_table(table, root / variable / f"refs.{record}.parq", compression="zstd")


def make_huge(directory: Path, references: int, target: Path) -> tuple[Path, str]:
    """A Parquet set of ``references`` 100-byte chunks on a 2-D grid; return it and one key."""
    side = max(1, int(references**0.5))
    rows, columns = side, max(1, references // side)
    total = rows * columns
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "v/.zarray": zarray([rows * 10, columns * 10], [10, 10]),
    }
    offsets = (np.arange(total, dtype="int64") * 100) % (target.stat().st_size - 100)
    write_parquet(directory / "huge.parq", metadata, "v", str(target), offsets, 100)
    return directory / "huge.parq", f"{rows // 2}.{columns // 2}"


def make_json_refs(path: Path, references: int, target: Path) -> None:
    """A JSON set of ``references`` small range references into ``target``."""
    size = target.stat().st_size
    refs: dict[str, Any] = {
        ".zgroup": '{"zarr_format": 2}',
        "v/.zarray": json.dumps(zarray([references * 100], [100])),
    }
    for i in range(references):
        refs[f"v/{i}"] = [str(target), (i * 100) % (size - 100), 100]
    path.write_text(json.dumps({"version": 1, "refs": refs}))


def make_decode_set(directory: Path, chunks: int) -> Path:
    """Write ``chunks`` zlib-compressed 1 MiB float32 chunks to one file and JSON references
    to them as array ``v`` (values in half steps around 280: zlib shrinks them about 3x)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "decode.bin"
    meta = {
        "zarr_format": 2,
        "shape": [DECODE_ROWS * chunks, 1024],
        "chunks": [DECODE_ROWS, 1024],
        "dtype": "<f4",
        "compressor": {"id": "zlib", "level": 1},
        "filters": None,
        "order": "C",
        "fill_value": None,
    }
    refs: dict[str, Any] = {".zgroup": '{"zarr_format": 2}', "v/.zarray": json.dumps(meta)}
    rng = np.random.default_rng(19)
    offset = 0
    with open(target, "wb") as out:
        for index in range(chunks):
            values = np.round(rng.normal(280, 5, DECODE_ROWS * 1024) * 2) / 2
            stored = zlib.compress(values.astype("<f4").tobytes(), 1)
            out.write(stored)
            refs[f"v/{index}.0"] = [str(target), offset, len(stored)]
            offset += len(stored)
    path = directory / "decode.json"
    path.write_text(json.dumps({"version": 1, "refs": refs}))
    return path
