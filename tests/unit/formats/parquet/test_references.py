"""Tests of ``ParquetReferenceSet``: chunks found in record files on demand, present chunks,
sizes and ranges for listings, URLs resolved against the record file's directory, and
sparse grids whose record files are listed or skipped."""

from __future__ import annotations

from array import array as int_array
from pathlib import Path

import pyarrow as pa
import pytest

from refmount.formats.options import LoadOptions
from refmount.formats.parquet import SKIP_LOADS, load_parquet, record_directory
from refmount.model import ChunkRanges, Inline, Range
from tests.fakes import LocalSource
from tests.unit.formats.parquet.conftest import Store, cat, grid_number, lookup, present_keys
from tests.unit.formats.parquet.writers import RefValue, write_parquet_set, write_table, zarray


def test_p05_missing_record_file_is_absent(p_parq: Store) -> None:
    references = p_parq.load()
    assert lookup(references, "x/1.1") is None
    assert "x/refs.1.parq" in p_parq.source.reads


@pytest.mark.parametrize("key", ["x/0.2", "x/0.0.0", "x/a.b", "x/-1", "x/00.0", "z/05", "x/0"])
def test_p10_p11_aliases_are_not_chunks(p_parq: Store, key: str) -> None:
    references = p_parq.load()
    assert lookup(references, key) is None


def test_p16_p19_present_chunks_and_sizes(p_parq: Store) -> None:
    references = p_parq.load()
    assert present_keys(references, "x") == ["x/0.0", "x/0.1", "x/1.0"]
    assert present_keys(references, "deep/s") == ["deep/s/0"]
    sizes = {key: len(cat(references, key) or b"") for key in present_keys(references, "z")}
    assert sizes == {"z/0": 2, "z/1": 7, "z/2": 4, "z/4": 2}
    assert len(cat(references, "x/1.0") or b"") == 48
    assert len(cat(references, "deep/s/0") or b"") == 1


def test_chunk_ranges_give_the_loaded_range_chunks_per_target(tmp_path: Path, target: str) -> None:
    root = tmp_path / "ranges.parq"
    other = "other.bin"  # a relative path: resolved against the record file's directory
    rows: dict[int, RefValue] = {0: [target, 0, 1], 2: [other, 2, 3], 3: "abc"}
    rows |= {4: [target, 0, 0], 5: [target, 9, 2]}
    chunks = {"a": {record * 6 + row: value for record in (0, 1) for row, value in rows.items()}}
    write_parquet_set(root, {"a/.zarray": zarray([12], [1])}, chunks, record_size=6)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk_ranges(0, 0, 12) == {}  # nothing loaded: nothing known
    references.chunk(0, 0)
    # range, absent, range into another target, inline, whole file, range
    ranges = references.chunk_ranges(0, 0, 12)  # the second record is still not loaded
    assert ranges == {
        target: ChunkRanges([0, 9], [1, 2]),
        references.chunk(0, 2).url: ChunkRanges([2], [3]),  # type: ignore[union-attr]
    }
    expected: dict[str, ChunkRanges] = {}
    for index in range(6):  # what ``chunk`` says, one chunk at a time
        reference = references.chunk(0, index)
        if isinstance(reference, Range) and reference.length > 0:
            found = expected.setdefault(reference.url, ChunkRanges())
            found.offsets.append(reference.offset)
            found.lengths.append(reference.length)
    assert ranges == expected
    references.chunk(0, 6)
    assert references.chunk_ranges(0, 4, 8) == {target: ChunkRanges([9, 0], [2, 1])}
    assert references.chunk_ranges(0, 12, 20) == {}  # past the grid


def test_chunk_sizes_answer_listings_without_loading(tmp_path: Path, target: str) -> None:
    root = tmp_path / "sizes.parq"
    write_parquet_set(root, {"a/.zarray": zarray([12], [1])}, {}, record_size=6)
    table = pa.table(
        {
            "path": pa.array([target, None, target, None, target, target], pa.string()),
            "offset": pa.array([0, 0, 2, 0, 0, 5], pa.int64()),
            "size": pa.array([1, 0, 3, 0, 0, 2], pa.int64()),
            "raw": pa.array([None, None, None, b"abc", None, None], pa.binary()),
        }
    )
    write_table(root / "a" / "refs.0.parq", table)
    references = load_parquet(LocalSource(root), LoadOptions())
    assert references.chunk_sizes(0, 0, 6) is None  # not loaded: listings must not block
    assert not references.chunk_is_loaded(0, 0)
    references.chunk(0, 0)
    # present, absent, present, inline (ask chunk), whole file (ask the target), present
    assert references.chunk_sizes(0, 0, 100) == [1, -1, 3, None, None, 2]
    assert references.chunk_sizes(0, 2, 4) == [3, None]
    assert references.chunk_sizes(0, 6, 8) is None  # the second record is not loaded
    references.chunk(0, 6)  # ... and does not exist: every chunk in it is absent
    assert references.chunk_sizes(0, 6, 100) == [-1] * 6
    assert references.chunk_sizes(0, 12, 13) is None  # past the grid


def test_relative_paths_resolve_against_the_record_files_directory(tmp_path: Path) -> None:
    root = tmp_path / "rel.parq"
    chunks: dict[str, dict[int, RefValue]] = {
        "a": {0: ["data.bin", 0, 1], 1: ["bucket/k", 0, 1], 2: ["../../up.bin", 0, 1]},
        "deep/s": {0: ["../x.bin", 0, 1], 1: ["./sub/y.bin", 0, 1]},
    }
    metadata = {"a/.zarray": zarray([3], [1]), "deep/s/.zarray": zarray([2], [1])}
    write_parquet_set(root, metadata, chunks, 3)
    local = load_parquet(LocalSource(root), LoadOptions())
    assert local.chunk(0, 0) == Range(str(root / "a" / "data.bin"), 0, 1)
    assert local.chunk(0, 2) == Range(str(tmp_path / "up.bin"), 0, 1)
    assert local.chunk(1, 0) == Range(str(root / "deep" / "x.bin"), 0, 1)
    assert local.chunk(1, 1) == Range(str(root / "deep" / "s" / "sub" / "y.bin"), 0, 1)
    assert local.chunk_ranges(1, 0, 2) == {
        str(root / "deep" / "x.bin"): ChunkRanges([0], [1]),
        str(root / "deep" / "s" / "sub" / "y.bin"): ChunkRanges([0], [1]),
    }
    remote = load_parquet(LocalSource(root), LoadOptions(remote_protocol="s3"))
    assert remote.chunk(0, 1) == Range("s3://bucket/k", 0, 1)


@pytest.mark.parametrize(
    ("url", "array", "directory"),
    [
        ("/data/refs.parq", "a", "/data/refs.parq/a"),
        ("/data/refs.parq/", "deep/s", "/data/refs.parq/deep/s"),
        ("https://h/x/refs.parq", "a", "https://h/x/refs.parq/a"),
        ("simplecache::s3://b/refs.parq", "", "s3://b/refs.parq"),
    ],
)
def test_record_directory(url: str, array: str, directory: str) -> None:
    assert record_directory(url, array) == directory


def test_urls_are_interned(cat_parq: Store) -> None:
    references = cat_parq.load()
    first, second = references.chunk(0, 0), references.chunk(0, 1)
    assert isinstance(first, Range)
    assert isinstance(second, Range)
    assert first.url is second.url


def test_chunks_present_streams_a_range(cat_parq: Store) -> None:
    references = cat_parq.load()
    assert list(references.chunks_present(0, 3, 8)) == [3, 4, 6, 7]
    assert list(references.chunks_present(0, 28, 1000)) == [28, 29]
    assert list(references.chunks_present(0, 10, 10)) == []


def test_chunks_present_loads_each_record_once(p_parq: Store) -> None:
    references = p_parq.load()
    before = len(p_parq.source.reads)
    z = grid_number(references, "z")
    iterator = references.chunks_present(z)
    assert next(iterator) == 0
    assert p_parq.source.reads[before:] == ["z/refs.0.parq"]
    assert list(iterator) == [1, 2, 4]
    assert p_parq.source.reads[before:] == ["z/refs.0.parq", "z/refs.1.parq"]


class UnlistableSource(LocalSource):
    """A LocalSource that cannot list directories, like a plain HTTP server."""

    def names(self, relative: str = "") -> list[str] | None:
        return None


def test_skip_absent_jumps_over_record_files_that_do_not_exist(tmp_path: Path) -> None:
    root = tmp_path / "sparse.parq"
    huge = 10**18
    chunks: dict[str, dict[int, RefValue]] = {"a": {7: ["t.bin", 0, 1], huge - 2: "x"}}
    write_parquet_set(root, {"a/.zarray": zarray([huge], [1])}, chunks, 1000)
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions())
    source.reads.clear()
    assert references.skip_absent(0, 0, huge, load=False) == 0  # nothing known: no I/O
    assert source.reads == []
    assert references.skip_absent(0, 0, huge, load=True) == 7
    assert references.skip_absent(0, 0, huge, load=False) == 7  # now known without I/O
    assert references.skip_absent(0, 8, huge, load=True) == huge - 2
    assert references.skip_absent(0, huge - 1, huge, load=True) == huge
    assert references.skip_absent(0, 8, 10**17, load=True) == 10**17
    assert references.existing_records(0) == int_array("q", [0, (huge - 2) // 1000])
    assert source.reads == ["a/refs.0.parq", f"a/refs.{(huge - 2) // 1000}.parq"]


def test_once_listed_a_record_file_that_does_not_exist_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "listed.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {0: "x"}}
    write_parquet_set(root, {"a/.zarray": zarray([10**6], [1])}, chunks, 10)
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions())
    source.reads.clear()
    assert references.chunk(0, 55) is None
    assert source.reads == ["a/refs.5.parq"]  # not listed yet: tried
    references.existing_records(0)
    assert [references.chunk(0, index) for index in (77, 10**6 - 1)] == [None, None]
    assert source.reads == ["a/refs.5.parq"]
    assert references.chunk(0, 0) == Inline(b"x")


def test_skip_absent_reads_a_bounded_number_of_records_when_it_cannot_list(
    tmp_path: Path,
) -> None:
    root = tmp_path / "unlisted.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {10**6: "x"}}
    write_parquet_set(root, {"a/.zarray": zarray([10**9], [1])}, chunks, 10)
    references = load_parquet(UnlistableSource(root), LoadOptions())
    assert references.existing_records(0) is None
    assert references.skip_absent(0, 0, 10**9, load=True) == SKIP_LOADS * 10
    assert references.record_numbers(0) == range(10**8)


def test_existing_records_ignore_other_names(tmp_path: Path) -> None:
    root = tmp_path / "names.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {0: "x", 25: "y"}}
    write_parquet_set(root, {"a/.zarray": zarray([30], [1])}, chunks, 10)
    for name in ("refs.01.parq", "refs.9.parq", "refs.-1.parq", "refs.1.parquet", "other"):
        (root / "a" / name).write_bytes(b"")
    references = load_parquet(LocalSource(root), LoadOptions())
    assert list(references.existing_records(0) or []) == [0, 2]
