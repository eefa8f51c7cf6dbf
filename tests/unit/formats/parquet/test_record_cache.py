"""Tests of the record cache: at most ``record_cache`` records kept, each loaded once by
concurrent first requests, a failed load shared and then retried."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from refmount.formats.options import LoadOptions
from refmount.formats.parquet import load_parquet
from refmount.model import Range, Reference
from tests.fakes import LocalSource
from tests.unit.formats.parquet.writers import RefValue, write_parquet_set, zarray


def test_lru_keeps_at_most_record_cache_records(tmp_path: Path, target: str) -> None:
    root = tmp_path / "lru.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {i: [target, i, 1] for i in range(10)}}
    write_parquet_set(root, {"a/.zarray": zarray([10], [1])}, chunks, 2)
    source = LocalSource(root)
    references = load_parquet(source, LoadOptions(record_cache=2))
    source.reads.clear()
    for index in (0, 2, 4):  # records 0, 1, 2
        assert references.chunk(0, index) == Range(target, index, 1)
    assert [references.chunk_is_loaded(0, i) for i in (0, 2, 4)] == [False, True, True]
    references.chunk(0, 3)  # record 1 becomes the most recent
    references.chunk(0, 0)  # reloads record 0, evicts record 2
    assert [references.chunk_is_loaded(0, i) for i in (0, 2, 4)] == [True, True, False]
    assert source.reads == ["a/refs.0.parq", "a/refs.1.parq", "a/refs.2.parq", "a/refs.0.parq"]


class SlowSource(LocalSource):
    """A LocalSource whose reads take a while, to let concurrent requests overlap."""

    def read(self, relative: str = "") -> bytes:
        time.sleep(0.05)
        return super().read(relative)


def test_concurrent_first_requests_load_a_record_once(tmp_path: Path, target: str) -> None:
    root = tmp_path / "conc.parq"
    chunks: dict[str, dict[int, RefValue]] = {"a": {i: [target, i, 1] for i in range(40)}}
    write_parquet_set(root, {"a/.zarray": zarray([40], [1])}, chunks, 20)
    source = SlowSource(root)
    references = load_parquet(source, LoadOptions())
    source.reads.clear()
    barrier = threading.Barrier(16)

    def work(index: int) -> Reference | None:
        barrier.wait()
        return references.chunk(0, index)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(work, [i * 5 % 40 for i in range(16)]))
    assert results == [Range(target, i * 5 % 40, 1) for i in range(16)]
    assert sorted(source.reads) == ["a/refs.0.parq", "a/refs.1.parq"]


class FailingSource(LocalSource):
    """A LocalSource whose record reads fail once with an I/O error."""

    failures = 1

    def read(self, relative: str = "") -> bytes:
        if relative.endswith(".parq") and self.failures:
            self.failures -= 1
            time.sleep(0.05)
            raise OSError("connection reset")
        return super().read(relative)


def test_failed_load_is_shared_then_retried(tmp_path: Path, target: str) -> None:
    root = tmp_path / "fail.parq"
    write_parquet_set(root, {"a/.zarray": zarray([4], [1])}, {"a": {0: [target, 0, 1]}}, 4)
    source = FailingSource(root)
    source.failures = 0
    references = load_parquet(source, LoadOptions())
    source.failures = 1
    source.reads.clear()
    barrier = threading.Barrier(4)

    def work(_: int) -> str:
        barrier.wait()
        try:
            references.chunk(0, 0)
        except OSError as exc:
            return str(exc)
        return "ok"

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(work, range(4)))
    assert set(outcomes) <= {"connection reset", "ok"}
    assert "connection reset" in outcomes
    assert not references.chunk_is_loaded(0, 0)  # errors are not cached
    assert references.chunk(0, 0) == Range(target, 0, 1)
