"""Tests of checking a set: keys, arrays, targets, bytes and every problem, as summarised."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import trio

from refmount.check import Summary, ask_sizes, check_references, format_summary
from refmount.errors import TargetReadError
from refmount.formats.options import LoadOptions
from tests.fakes import LocalSource
from tests.unit.formats.parquet.writers import write_parquet_set

ZARRAY = {"shape": [4, 6], "chunks": [2, 3], "dtype": "<f4", "zarr_format": 2}
ZARR_JSON = {
    "zarr_format": 3,
    "node_type": "array",
    "shape": [10],
    "data_type": "int16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5]}},
    "chunk_key_encoding": {"name": "default"},
}


def write_json(tmp_path: Path, document: dict[str, Any]) -> LocalSource:
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(document))
    return LocalSource(path)


def check(source: LocalSource, **kwargs: Any) -> Summary:
    return check_references(source, LoadOptions(), **kwargs)


def test_json_v0_summary(tmp_path: Path) -> None:
    source = write_json(
        tmp_path,
        {
            ".zgroup": {"zarr_format": 2},
            "a/.zarray": ZARRAY,
            "a/.zattrs": {"units": "K"},
            "a/0.0": ["data.nc", 100, 50],
            "a/0.1": ["data.nc", 150, 50],
            "a/1.1": ["s3://bucket/other.nc", 0, 1000],
            "v3/zarr.json": ZARR_JSON,
            "v3/c/0": "base64:AAAA",
            "whole": ["data.nc"],
        },
    )
    summary = check(source)
    assert summary.ok
    assert summary.format == "json"
    assert summary.explicit_keys == 9
    assert summary.chunk_keys == 4
    assert [array.path for array in summary.arrays] == ["a", "v3"]
    a, v3 = summary.arrays
    assert (a.zarr_format, a.shape, a.chunks, a.dtype) == (2, (4, 6), (2, 3), "<f4")
    assert (a.grid, a.chunk_count, a.present) == ((2, 2), 4, 3)
    assert (v3.zarr_format, v3.dtype, v3.chunk_count, v3.present) == (3, "int16", 2, 1)
    local = str(tmp_path / "data.nc")
    assert set(summary.targets) == {local, "s3://bucket/other.nc"}
    assert summary.targets[local].references == 3
    assert summary.targets[local].bytes is None  # a whole-target reference of unknown size
    assert summary.targets["s3://bucket/other.nc"].bytes == 1000
    assert (summary.ranges, summary.range_bytes) == (3, 1100)
    assert summary.inline == 5
    assert (summary.whole, summary.whole_bytes) == (1, None)
    assert summary.total_bytes == 1100 + summary.inline_bytes
    assert summary.problems == []


def test_json_v1_counts_generated_keys(tmp_path: Path) -> None:
    source = write_json(
        tmp_path,
        {
            "version": 1,
            "templates": {"u": "data.bin"},
            "refs": {"x/.zarray": json.dumps({"shape": [8], "chunks": [2], "dtype": "|u1"})},
            "gen": [
                {
                    "key": "x/{{i}}",
                    "url": "{{u}}",
                    "offset": "{{i * 2}}",
                    "length": "2",
                    "dimensions": {"i": {"stop": 4}},
                }
            ],
        },
    )
    summary = check(source)
    assert summary.ok
    assert (summary.explicit_keys, summary.chunk_keys, summary.chunk_positions) == (5, 4, 4)
    assert summary.range_bytes == 8
    assert summary.targets[str(tmp_path / "data.bin")].end == 8


def test_every_problem_is_listed_with_its_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = write_json(
        tmp_path,
        {
            "good": "text",
            "bad64": "base64:!!!x",
            "negative": ["data.bin", 0, -5],
            "a//b": "x",
            "d": "file",
            "d/x": "under a file",
            "arr/.zarray": {"shape": [4], "chunks": [0], "dtype": "<i2"},
        },
    )
    with caplog.at_level(logging.WARNING):
        summary = check(source)
    assert not summary.ok
    assert not summary.malformed
    keys = [str(problem.key) for problem in summary.problems]
    assert sorted(keys) == sorted(["bad64", "negative", "a//b", "d", "arr/.zarray"])
    by_key = {problem.key: problem.problem for problem in summary.problems}
    assert "base64" in by_key["bad64"]
    assert "empty path component" in by_key["a//b"]
    assert "both a file and a directory" in by_key["d"]
    assert "positive" in by_key["arr/.zarray"]
    assert caplog.records == []  # collected, not logged
    text = format_summary(summary)
    assert "problems    5" in text
    assert "key 'a//b': key contains an empty path component" in text


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(b"{not json", "not valid JSON"), (b'{"version": 2}', "unknown version")],
)
def test_a_set_that_cannot_load_is_malformed(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "refs.json"
    path.write_bytes(content)
    summary = check(LocalSource(path))
    assert summary.malformed
    assert not summary.ok
    assert len(summary.problems) == 1
    assert fragment in summary.problems[0].problem
    assert "malformed" in format_summary(summary)


def test_a_missing_file_is_malformed(tmp_path: Path) -> None:
    summary = check(LocalSource(tmp_path / "absent.json"))
    assert summary.malformed
    assert "cannot read" in summary.problems[0].problem
    assert summary.format == "unreadable"
    report = format_summary(summary)
    assert (
        report.splitlines()[0]
        == f"{tmp_path / 'absent.json'}: cannot be read, so it cannot be mounted"
    )
    assert "JSON" not in report


def parquet_set(tmp_path: Path) -> LocalSource:
    """Array ``a``: 4x6 chunks in records of 5; record 1 is missing, rows are partly null."""
    root = tmp_path / "refs.parq"
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "a/.zarray": {"shape": [8, 18], "chunks": [2, 3], "dtype": "<u2"},
        "b/.zarray": {"shape": [3], "chunks": [1], "dtype": "<u1"},
    }
    chunks: dict[str, dict[int, Any]] = {
        "a": {0: ["t.bin", 0, 10], 3: ["t.bin", 10, 10], 4: "raw!", 10: ["u.bin"], 23: None},
        "b": {0: ["t.bin", 0, 1], 1: ["t.bin", 1, 1], 2: ["t.bin", 2, 1]},
    }
    write_parquet_set(root, metadata, chunks, record_size=5)
    return LocalSource(root)


def test_parquet_counts_present_chunks_by_scanning_records(tmp_path: Path) -> None:
    source = parquet_set(tmp_path)
    scanned: list[tuple[int, int]] = []
    summary = check(source, scan_progress=lambda done, total: scanned.append((done, total)))
    assert summary.ok, summary.problems
    assert summary.format == "parquet"
    assert summary.explicit_keys == 4  # three metadata keys and .zmetadata
    assert summary.chunk_positions == 24 + 3
    assert summary.chunk_keys == 4 + 3
    a, b = summary.arrays
    assert (a.path, a.present, a.chunk_count, a.dtype) == ("a", 4, 24, "<u2")
    assert (b.path, b.present) == ("b", 3)
    assert summary.ranges == 5
    assert summary.whole == 1
    # one call per record file that exists (a's records 1 and 3 do not), at the end it reaches
    assert scanned == [(5, 27), (15, 27), (24, 27), (27, 27)]


def test_parquet_scan_reads_only_the_record_files_that_exist(tmp_path: Path) -> None:
    # 10**18 chunk positions, 10**13 record positions; two record files exist
    root = tmp_path / "sparse.parq"
    metadata = {"s/.zarray": {"shape": [10**9, 10**9], "chunks": [1, 1], "dtype": "<u1"}}
    last = 10**18 - 1
    chunks: dict[str, dict[int, Any]] = {"s": {0: ["t.bin", 0, 1], last: ["t.bin", 1, 1]}}
    write_parquet_set(root, metadata, chunks, record_size=100_000)
    source = LocalSource(root)
    summary = check(source)
    assert summary.ok, summary.problems
    assert summary.chunk_keys == 2
    assert summary.ranges == 2
    assert [read for read in source.reads if read.endswith(".parq")] == [
        "s/refs.0.parq",  # the probe
        "s/refs.0.parq",
        f"s/refs.{last // 100_000}.parq",
    ]


def test_check_warns_of_a_record_file_without_every_column(tmp_path: Path) -> None:
    root = tmp_path / "cols.parq"
    metadata = {"a/.zarray": {"shape": [2], "chunks": [1], "dtype": "<u1"}}
    write_parquet_set(root, metadata, {"a": {0: ["t.bin", 0, 1]}}, record_size=2)
    record = root / "a" / "refs.0.parq"
    table = pq.read_table(record).drop_columns(["raw"])
    pq.write_table(table, record)
    summary = check(LocalSource(root))
    assert summary.ok  # a warning: the exit status stays what the mount would decide
    assert summary.warnings == [
        f"{record}: columns are path, offset, size, not path, offset, size, raw "
        "(fsspec and refmount read it; other readers may not)"
    ]
    text = format_summary(summary)
    assert "warnings    1" in text
    assert summary.to_json()["warnings"] == summary.warnings


def test_check_does_not_warn_of_a_record_file_with_every_column(tmp_path: Path) -> None:
    assert check(parquet_set(tmp_path)).warnings == []


def test_parquet_quick_skips_the_scan(tmp_path: Path) -> None:
    summary = check(parquet_set(tmp_path), quick=True)
    assert summary.ok
    assert summary.chunk_keys is None
    assert [array.present for array in summary.arrays] == [None, None]
    assert summary.ranges == 0
    assert "chunks not counted (--quick)" in format_summary(summary)


def test_parquet_problems_name_arrays_and_record_files(tmp_path: Path) -> None:
    source = parquet_set(tmp_path)
    (source.path / "a" / "refs.2.parq").write_bytes(b"PAR1 but not really")
    metadata = json.loads((source.path / ".zmetadata").read_text())
    metadata["metadata"]["c/.zarray"] = {"shape": [2], "dtype": "<u1"}
    (source.path / ".zmetadata").write_text(json.dumps(metadata))
    summary = check(source)
    assert not summary.ok
    assert not summary.malformed
    assert any(p.key == "c/.zarray" and "chunks" in p.problem for p in summary.problems)
    record = [p for p in summary.problems if "refs.2.parq" in p.problem]
    assert len(record) == 1
    assert summary.arrays[0].present == 3  # the chunks of the corrupt record are not counted


async def sizes(url: str) -> int:
    if url.endswith("missing.bin"):
        raise TargetReadError(url, "not found")
    return 1000


def test_sizes_fill_in_whole_targets_and_find_ranges_past_the_end(tmp_path: Path) -> None:
    source = write_json(
        tmp_path,
        {
            "whole": ["data.bin"],
            "inside": ["data.bin", 0, 1000],
            "past": ["other.bin", 990, 20],
            "gone": ["missing.bin", 0, 1],
        },
    )
    summary = check_references(source, LoadOptions())
    trio.run(ask_sizes, summary, sizes)
    by_key = {problem.key: problem.problem for problem in summary.problems}
    assert set(by_key) == {"past", "gone"}
    assert "ends at byte 1,010" in by_key["past"]
    assert "cannot get the size" in by_key["gone"]
    assert summary.whole_bytes == 1000
    assert summary.targets[str(tmp_path / "data.bin")].bytes == 2000
    assert summary.total_bytes == 1000 + 20 + 1 + 1000


def test_json_output_is_serialisable(tmp_path: Path) -> None:
    summary = check(parquet_set(tmp_path))
    document = json.loads(json.dumps(summary.to_json()))
    assert document["ok"] is True
    assert document["chunk_keys"] == 7
    assert document["arrays"][0]["chunk_count"] == 24
    assert sum(target["references"] for target in document["targets"]) == 6


def test_chunks_are_counted_for_the_innermost_array_however_deep_the_keys(
    tmp_path: Path,
) -> None:
    deep = "d/" * 5000 + "x"
    source = write_json(
        tmp_path,
        {
            "g/a/.zarray": ZARRAY,
            "g/a/0.0": ["data.nc", 0, 10],
            "g/a/b/.zarray": ZARRAY,
            "g/a/b/0.0": ["data.nc", 0, 10],
            "g/a/b/1.1": ["data.nc", 0, 10],
            "g/a/b/c/d/e": ["data.nc", 0, 10],
            deep: ["data.nc", 0, 10],
        },
    )
    summary = check(source)
    assert summary.ok
    assert {array.path: array.present for array in summary.arrays} == {"g/a": 1, "g/a/b": 3}


def test_decode_lists_the_arrays_served_as_stored(tmp_path: Path) -> None:
    zarray = {
        "zarr_format": 2,
        "shape": [4],
        "chunks": [2],
        "dtype": "<f8",
        "compressor": None,
        "fill_value": None,
        "order": "C",
    }
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        "ok/.zarray": json.dumps({**zarray, "compressor": {"id": "zlib"}, "filters": None}),
        "objects/.zarray": json.dumps({**zarray, "dtype": "|O", "filters": [{"id": "pickle"}]}),
    }
    summary = check(write_json(tmp_path, {"version": 1, "refs": refs}), decode_cache=1 << 20)
    assert summary.served_as_stored is not None
    assert [(path, codec) for path, codec, _ in summary.served_as_stored] == [("objects", "dtype")]
    assert summary.ok
    assert "objects  dtype: object dtype '|O'" in format_summary(summary)
    assert summary.to_json()["served_as_stored"][0]["array"] == "objects"
    assert (
        "served_as_stored"
        not in check(write_json(tmp_path, {"version": 1, "refs": refs})).to_json()
    )


def test_zarr_format_2_lists_the_v3_arrays_served_as_stored(tmp_path: Path) -> None:
    def v3(codecs: list[dict[str, Any]]) -> str:
        return json.dumps(
            {
                "zarr_format": 3,
                "node_type": "array",
                "shape": [4],
                "data_type": "int32",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
                "chunk_key_encoding": {"name": "default"},
                "fill_value": 0,
                "codecs": codecs,
            }
        )

    little = {"name": "bytes", "configuration": {"endian": "little"}}
    sharded = {"name": "sharding_indexed", "configuration": {"chunk_shape": [1]}}
    refs = {
        "zarr.json": '{"zarr_format": 3, "node_type": "group"}',
        "ok/zarr.json": v3([little]),
        "sharded/zarr.json": v3([sharded]),
    }
    source = write_json(tmp_path, {"version": 1, "refs": refs})
    summary = check(source, zarr_format=2, decode_cache=1 << 20)
    assert summary.served_as_v3 is not None
    assert [(path, codec) for path, codec, _ in summary.served_as_v3] == [
        ("sharded", "sharding_indexed")
    ]
    assert summary.ok
    assert "sharded  sharding_indexed: a shard holds many chunks" in format_summary(summary)
    assert summary.to_json()["served_as_v3"][0]["array"] == "sharded"
    assert summary.served_as_stored is not None  # --decode looked at the v2 view
    assert [path for path, _, _ in summary.served_as_stored] == ["sharded"]
    assert "served_as_v3" not in check(source).to_json()
