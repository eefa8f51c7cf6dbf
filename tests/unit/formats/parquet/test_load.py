"""Tests of loading a Parquet set: ``.zmetadata`` (its keys served, its arrays as grids, what
is wrong with it), one record file probed, what ``skip_invalid`` lets pass, and a large
generated set loaded."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.options import LoadOptions
from refmount.formats.parquet import load_parquet
from refmount.model import ChunkGrid, Inline, Range, ReferenceSet, Whole
from tests.fakes import LocalSource
from tests.unit.formats.parquet.conftest import (
    Store,
    cat,
    grid_number,
    lookup,
    present_keys,
    reference_fs,
)
from tests.unit.formats.parquet.writers import (
    BAD_KINDS,
    RefValue,
    bad_table,
    generate_large_set,
    refs_to_parquet,
    write_parquet_set,
    write_table,
    zarray,
)


def test_p01_layout_is_accepted(p_parq: Store) -> None:
    files = sorted(str(p.relative_to(p_parq.root)) for p in p_parq.root.rglob("*") if p.is_file())
    assert files == [
        ".zmetadata",
        "deep/s/refs.0.parq",
        "x/refs.0.parq",
        "z/refs.0.parq",
        "z/refs.1.parq",
    ]
    schema = pq.read_schema(p_parq.root / "x" / "refs.0.parq")
    assert schema.names == ["path", "offset", "size", "raw"]
    assert pq.ParquetFile(p_parq.root / "x" / "refs.0.parq").metadata.num_rows == 3
    references = p_parq.load()
    protocol: ReferenceSet = references  # checked by mypy: the class satisfies the protocol
    assert protocol.source == str(p_parq.root)
    assert [g.array for g in references.grids] == ["deep/s", "x", "z"]
    assert references.grids == (
        ChunkGrid("deep/s", (), "."),
        ChunkGrid("x", (2, 2), "."),
        ChunkGrid("z", (5,), "."),
    )
    assert references.record_size == 3
    assert references.source == str(p_parq.root)


def test_p02_p13_zmetadata_serves_the_raw_file(p_parq: Store) -> None:
    raw = (p_parq.root / ".zmetadata").read_bytes()
    document = json.loads(raw)
    assert set(document) == {"metadata", "record_size"}
    references = p_parq.load()
    assert references.get(".zmetadata") == Inline(raw)
    assert reference_fs(p_parq.root).cat(".zmetadata") == raw


def test_p12_metadata_is_stdlib_json(p_parq: Store) -> None:
    references = p_parq.load()
    fs = reference_fs(p_parq.root)
    for key in ["x/.zarray", ".zgroup", ".zattrs", "deep/s/.zarray", "deep/.zgroup"]:
        reference = references.get(key)
        assert isinstance(reference, Inline)
        expected = json.loads(p_parq.root.joinpath(".zmetadata").read_bytes())["metadata"][key]
        assert reference.data == json.dumps(expected).encode()
        assert json.loads(reference.data) == json.loads(fs.cat(key))  # fsspec: same document
    assert references.get(".zgroup") == Inline(b'{"zarr_format": 2}')
    assert references.get(".zattrs") == Inline(b'{"title": "t/\\u00e9"}')


def test_p14_p15_keys_are_the_metadata(p_parq: Store) -> None:
    references = p_parq.load()
    assert references.get("z/.zattrs") is None
    assert references.get("x/0.0") is None  # chunks are not explicit keys
    assert sorted(references.keys()) == [
        ".zattrs",
        ".zgroup",
        ".zmetadata",
        "deep/.zgroup",
        "deep/s/.zarray",
        "x/.zarray",
        "z/.zarray",
    ]


def test_p24_no_intermediate_zgroup(tmp_path: Path, target: str) -> None:
    root = tmp_path / "g.parq"
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        "g/x/.zarray": json.dumps(zarray([2], [1])),
        "g/x/0": [target, 0, 5],
    }
    refs_to_parquet(refs, root, record_size=10)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert [g.array for g in references.grids] == ["g/x"]
    assert cat(references, "g/x/0") == b"HELLO"
    assert lookup(references, "g/x/1") is None


def test_p25_top_level_non_zarr_key(tmp_path: Path) -> None:
    root = tmp_path / "info.parq"
    write_parquet_set(root, {".zgroup": {"zarr_format": 2}, "info.json": {"a": [1, 2]}}, {}, 5)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.get("info.json") == Inline(b'{"a": [1, 2]}')
    assert references.grids == ()


def test_metadata_string_value_is_its_text(tmp_path: Path) -> None:
    root = tmp_path / "s.parq"
    metadata = {"README": "hello \u00e9", "n": 3, "l": [1, "a"], "nothing": None}
    write_parquet_set(root, metadata, {}, 5)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.get("README") == Inline("hello \u00e9".encode())
    assert references.get("n") == Inline(b"3")
    assert references.get("l") == Inline(b'[1, "a"]')
    assert references.get("nothing") == Inline(b"null")


def test_v3_zarr_json_array(tmp_path: Path, target: str) -> None:
    root = tmp_path / "v3.parq"
    metadata = {
        "zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": {}},
        "v/zarr.json": {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [4, 6],
            "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
            "chunk_key_encoding": {"name": "default"},
            "fill_value": 0,
            "codecs": [{"name": "bytes"}],
        },
    }
    chunks: dict[str, dict[int, RefValue]] = {"v": {1: [target, 6, 6], 2: b"raw"}}
    write_parquet_set(root, metadata, chunks, 4)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.grids == (ChunkGrid("v", (2, 2), "/", "c"),)
    assert present_keys(references, "v") == ["v/c/0/1", "v/c/1/0"]
    assert cat(references, "v/c/0/1") == b"WORLD "
    assert cat(references, "v/c/1/0") == b"raw"
    assert lookup(references, "v/0.1") is None
    assert lookup(references, "v/c/0.1") is None
    assert references.get("v/zarr.json") == Inline(json.dumps(metadata["v/zarr.json"]).encode())


def test_v2_slash_separator(tmp_path: Path, target: str) -> None:
    root = tmp_path / "slash.parq"
    metadata = {"n/.zarray": zarray([4, 6], [2, 3], dimension_separator="/")}
    write_parquet_set(root, metadata, {"n": {3: [target, 0, 5]}}, 4)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert present_keys(references, "n") == ["n/1/1"]
    assert cat(references, "n/1/1") == b"HELLO"
    assert lookup(references, "n/1.1") is None


def test_array_at_the_root(tmp_path: Path, target: str) -> None:
    root = tmp_path / "rootarray.parq"
    write_parquet_set(root, {".zarray": zarray([2], [1])}, {"": {1: [target, 0, 2]}}, 2)
    assert (root / "refs.0.parq").is_file()
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.grids == (ChunkGrid("", (2,), "."),)
    assert present_keys(references, "") == ["1"]
    assert cat(references, "1") == b"HE"


def test_array_with_both_v2_and_v3_metadata_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "both.parq"
    v3 = {
        "node_type": "array",
        "shape": [2],
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
    }
    write_parquet_set(root, {"a/.zarray": zarray([2], [1]), "a/zarr.json": v3}, {}, 2)
    with pytest.raises(ReferenceFormatError, match="both v2 and v3"):
        load_parquet(LocalSource(root), LoadOptions())


def test_load_reads_zmetadata_and_one_probe(p_parq: Store) -> None:
    references = p_parq.load()
    assert p_parq.source.reads == [".zmetadata", "deep/s/refs.0.parq"]
    assert not any(
        references.chunk_is_loaded(g, i)
        for g, grid in enumerate(references.grids)
        for i in range(grid.count)
    )
    x = grid_number(references, "x")
    assert references.chunk(x, 1) == Range(p_parq.target, 6, 6)
    assert p_parq.source.reads[2:] == ["x/refs.0.parq"]
    assert references.chunk_is_loaded(x, 0)
    assert references.chunk_is_loaded(x, 2)
    assert not references.chunk_is_loaded(x, 3)
    assert references.chunk(x, 0) == Range(p_parq.target, 0, 6)
    assert references.chunk(x, 2) == Whole(p_parq.target)
    assert p_parq.source.reads[2:] == ["x/refs.0.parq"]
    assert references.chunk(x, 3) is None
    assert references.chunk(x, 3) is None  # a missing record is remembered too
    assert p_parq.source.reads[2:] == ["x/refs.0.parq", "x/refs.1.parq"]
    assert references.chunk_is_loaded(x, 3)
    assert references.chunk_is_loaded(x, 99)  # outside the grid: answered without I/O


def test_probe_skips_missing_records_and_empty_grids(tmp_path: Path, target: str) -> None:
    root = tmp_path / "sparse.parq"
    metadata = {"a/.zarray": zarray([0], [1]), "b/.zarray": zarray([20], [1])}
    write_parquet_set(root, metadata, {"b": {7: [target, 0, 1]}}, 2)
    source = LocalSource(root)
    load_parquet(source, LoadOptions())
    assert source.reads == [".zmetadata", "b/refs.0.parq", "b/refs.1.parq", "b/refs.2.parq",
                            "b/refs.3.parq"]  # fmt: skip
    source2 = LocalSource(root)
    write_parquet_set(root, metadata, {"b": {9: [target, 0, 1]}}, 2)
    (root / "b" / "refs.3.parq").unlink()
    load_parquet(source2, LoadOptions())
    assert source2.reads == [".zmetadata", "b/refs.0.parq", "b/refs.1.parq", "b/refs.2.parq",
                             "b/refs.3.parq"]  # fmt: skip  # gives up after PROBE_LIMIT


def test_missing_zmetadata(tmp_path: Path) -> None:
    (tmp_path / "empty.parq").mkdir()
    with pytest.raises(ReferenceFormatError) as caught:
        load_parquet(LocalSource(tmp_path / "empty.parq"), LoadOptions())
    assert caught.value.problem == "missing .zmetadata"
    assert caught.value.source == str(tmp_path / "empty.parq")


@pytest.mark.parametrize(
    ("content", "key", "problem"),
    [
        (b"{not json", None, "not valid JSON"),
        (b"\xff\xfe", None, "not valid JSON"),
        (b"", None, "not valid JSON"),
        (b"[1, 2]", None, "must be a JSON object"),
        (b'{"record_size": 3}', "metadata", "missing"),
        (b'{"metadata": [], "record_size": 3}', "metadata", "must be a JSON object"),
        (b'{"metadata": {}}', "record_size", "missing"),
        (b'{"metadata": {}, "record_size": 0}', "record_size", "must be a positive integer"),
        (b'{"metadata": {}, "record_size": -3}', "record_size", "must be a positive integer"),
        (b'{"metadata": {}, "record_size": "3"}', "record_size", "must be a positive integer"),
        (b'{"metadata": {}, "record_size": 2.5}', "record_size", "must be a positive integer"),
        (b'{"metadata": {}, "record_size": true}', "record_size", "must be a positive integer"),
    ],
)
def test_bad_zmetadata(tmp_path: Path, content: bytes, key: str | None, problem: str) -> None:
    root = tmp_path / "bad.parq"
    root.mkdir()
    (root / ".zmetadata").write_bytes(content)
    with pytest.raises(ReferenceFormatError) as caught:
        load_parquet(LocalSource(root), LoadOptions(skip_invalid=True))
    assert caught.value.source == f"{root}/.zmetadata"
    assert caught.value.key == key
    assert caught.value.problem.startswith(problem)


def test_zarray_mismatch_refuses_the_set(tmp_path: Path) -> None:
    root = tmp_path / "mismatch.parq"
    write_parquet_set(root, {"x/.zarray": zarray([4, 6], [2, 3, 1])}, {}, 3)
    with pytest.raises(ReferenceFormatError) as caught:
        load_parquet(LocalSource(root), LoadOptions())
    assert caught.value.source == f"{root}/.zmetadata"
    assert caught.value.key == "x/.zarray"
    assert caught.value.problem == "shape has 2 dimensions but chunks has 3"


def test_skip_invalid_drops_the_array_with_one_warning(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skip.parq"
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "bad/.zarray": zarray([4, 6], [2, 3, 1]),
        "bad/.zattrs": {"units": "m"},
        "good/.zarray": zarray([2], [1]),
    }
    write_parquet_set(root, metadata, {"good": {0: [target, 0, 2]}, "bad": {0: b"x"}}, 3)
    with caplog.at_level(logging.WARNING, logger="refmount.formats.parquet"):
        references = load_parquet(LocalSource(root), LoadOptions(skip_invalid=True))
    assert [r.getMessage() for r in caplog.records] == [
        f"skipping array: {root}/.zmetadata: key 'bad/.zarray': "
        "shape has 2 dimensions but chunks has 3"
    ]
    assert [g.array for g in references.grids] == ["good"]
    assert sorted(references.keys()) == [".zgroup", ".zmetadata", "good/.zarray"]
    assert cat(references, "good/0") == b"HE"


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_wrong_columns_are_caught_at_load(tmp_path: Path, target: str, kind: str) -> None:
    root = tmp_path / "cols.parq"
    write_parquet_set(root, {"a/.zarray": zarray([2], [1])}, {}, 2)
    write_table(root / "a" / "refs.0.parq", bad_table(kind, target))
    with pytest.raises(ReferenceFormatError) as caught:
        load_parquet(LocalSource(root), LoadOptions())
    assert caught.value.source == f"{root}/a/refs.0.parq"
    assert caught.value.key is None


def test_corrupt_probe_with_skip_invalid_warns(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "probe.parq"
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, {"a": {0: [target, 0, 1]}}, 2)
    (root / "a" / "refs.0.parq").write_bytes(b"junk")
    with caplog.at_level(logging.WARNING, logger="refmount.formats.parquet"):
        references = load_parquet(LocalSource(root), LoadOptions(skip_invalid=True))
    assert len(caplog.records) == 1
    assert f"{root}/a/refs.0.parq" in caplog.records[0].getMessage()
    with pytest.raises(ReferenceFormatError):
        references.chunk(0, 0)


def test_generate_large_set_small(tmp_path: Path) -> None:
    root = tmp_path / "big.parq"
    count = generate_large_set(root, shape=(20, 25), record_size=100, files=5)
    assert count == 500
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions(record_cache=2))
    assert references.grids == (ChunkGrid("big", (20, 25), "."),)
    assert source.reads == [".zmetadata", "big/refs.0.parq"]
    assert references.chunk(0, 499) == Range("s3://bucket/data/file-4.nc", 499_000, 1000)
    assert lookup(references, "big/3.7") == Range("s3://bucket/data/file-0.nc", 82_000, 1000)
    present: Iterator[int] = iter(references.chunks_present(0))
    assert sum(1 for _ in present) == 500
