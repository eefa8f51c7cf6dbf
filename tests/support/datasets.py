"""Reference sets and target files generated for the integration tests (nothing is committed)."""

from __future__ import annotations

import base64
import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Dataset:
    """A reference file, its directory, and the bytes every key must read as."""

    refs: Path
    expected: dict[str, bytes]


def target_bytes(size: int, seed: int) -> bytes:
    """Return ``size`` deterministic pseudo-random bytes."""
    return random.Random(seed).randbytes(size)


def json_v0(directory: Path) -> Dataset:
    """A v0 set with every kind of value, relative and absolute local URLs."""
    directory.mkdir(parents=True, exist_ok=True)
    data = target_bytes(300_000, 1)
    (directory / "data.bin").write_bytes(data)
    other = directory / "sub"
    other.mkdir(exist_ok=True)
    (other / "other.bin").write_bytes(data[::-1])
    zattrs: dict[str, Any] = {"title": "t/é", "values": [1, 2.5, None, True]}
    refs: dict[str, Any] = {
        ".zgroup": {"zarr_format": 2},
        ".zattrs": zattrs,
        "text": "héllo wörld ☃",
        "b64": "base64:" + base64.b64encode(b"\x00\x01\x02binary").decode(),
        "empty": "",
        "empty_range": ["data.bin", 10, 0],
        "whole": ["data.bin"],
        "absolute": [str(directory / "data.bin"), 1000, 4096],
        "file_url": [f"file://{directory / 'data.bin'}", 5, 7],
        "relative_dot": ["./sub/other.bin", 3, 100],
        "x/.zarray": {"shape": [10], "chunks": [5], "dtype": "<u1"},
    }
    expected: dict[str, bytes] = {
        ".zgroup": json.dumps(refs[".zgroup"]).encode(),
        ".zattrs": json.dumps(zattrs).encode(),
        "text": "héllo wörld ☃".encode(),
        "b64": b"\x00\x01\x02binary",
        "empty": b"",
        "empty_range": b"",
        "whole": data,
        "absolute": data[1000:5096],
        "file_url": data[5:12],
        "relative_dot": data[::-1][3:103],
        "x/.zarray": json.dumps(refs["x/.zarray"]).encode(),
    }
    for i in range(40):
        key = f"x/deep/nested/c{i}"
        offset, length = i * 7000, 1000 + 37 * i
        refs[key] = ["data.bin", offset, length]
        expected[key] = data[offset : offset + length]
    path = directory / "refs.json"
    path.write_text(json.dumps(refs))
    return Dataset(path, expected)


def json_v1(directory: Path, compress: bool = False) -> Dataset:
    """A v1 set with templates, a function-call template, and a 2-D ``gen``."""
    directory.mkdir(parents=True, exist_ok=True)
    data = target_bytes(50_000, 2)
    (directory / "part_0.bin").write_bytes(data)
    (directory / "part_1.bin").write_bytes(data[::-1])
    spec = {
        "version": 1,
        "templates": {"d": str(directory), "f": "{{c}}.bin"},
        "gen": [
            {
                "key": "g/{{i}}.{{j}}",
                "url": "{{d}}/part_{{i}}.bin",
                "offset": "{{j * 1000}}",
                "length": "{{100 + j}}",
                "dimensions": {"i": [0, 1], "j": {"start": 0, "stop": 6, "step": 2}},
            }
        ],
        "refs": {
            "plain": "literal",
            "templated": ["{{d}}/part_1.bin", 10, 20],
            "call": ["{{d}}/{{f(c='part_0')}}", 5, 5],
        },
    }
    expected = {
        "plain": b"literal",
        "templated": data[::-1][10:30],
        "call": data[5:10],
    }
    for i, source in ((0, data), (1, data[::-1])):
        for j in (0, 2, 4):
            expected[f"g/{i}.{j}"] = source[j * 1000 : j * 1000 + 100 + j]
    text = json.dumps(spec).encode()
    path = directory / ("refs.json.gz" if compress else "refs.json")
    path.write_bytes(gzip.compress(text) if compress else text)
    return Dataset(path, expected)


def zarray(shape: list[int], chunks: list[int], dtype: str = "<u1") -> dict[str, Any]:
    """Return a zarr v2 ``.zarray`` document for an uncompressed array."""
    return {
        "shape": shape,
        "chunks": chunks,
        "dtype": dtype,
        "compressor": None,
        "fill_value": 0,
        "filters": None,
        "order": "C",
        "zarr_format": 2,
    }
