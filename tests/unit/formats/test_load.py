"""``load`` picks the format: Parquet for directories and ``.parq`` names, else JSON."""

from __future__ import annotations

import gzip
import json
import sys
import types
from pathlib import Path

import pytest

import refmount.formats
from refmount.errors import ReferenceFormatError
from refmount.formats import LoadOptions, load
from refmount.formats.json_refs import JsonReferenceSet
from refmount.model import Inline, ReferenceSet, ReferenceSource
from tests.fakes import LocalSource


class FakeParquetSet:
    """Stands for whatever the Parquet loader returns."""

    def __init__(self, source: ReferenceSource, options: LoadOptions) -> None:
        self.url = source.url
        self.options = options


@pytest.fixture
def parquet_calls(monkeypatch: pytest.MonkeyPatch) -> list[FakeParquetSet]:
    """Replace the Parquet loader, so these tests do not depend on it, and record its calls."""
    calls: list[FakeParquetSet] = []

    def load_parquet(source: ReferenceSource, options: LoadOptions) -> FakeParquetSet:
        calls.append(FakeParquetSet(source, options))
        return calls[-1]

    module = types.ModuleType("refmount.formats.parquet")
    module.load_parquet = load_parquet  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "refmount.formats.parquet", module)
    return calls


def test_json_file(tmp_path: Path, parquet_calls: list[FakeParquetSet]) -> None:
    path = tmp_path / "refs.json"
    path.write_text('{"a": "x"}')
    references: ReferenceSet = load(LocalSource(path), LoadOptions())
    assert isinstance(references, JsonReferenceSet)
    assert references.get("a") == Inline(b"x")
    assert parquet_calls == []


@pytest.mark.parametrize("name", ["refs.json.gz", "refs", "refs.json.parq", "refs.txt"])
def test_other_names_are_json(
    tmp_path: Path, parquet_calls: list[FakeParquetSet], name: str
) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(json.dumps({"a": "x"}).encode()))
    references = load(LocalSource(path), LoadOptions())
    assert references.get("a") == Inline(b"x")
    assert parquet_calls == []


def test_directory_is_parquet(tmp_path: Path, parquet_calls: list[FakeParquetSet]) -> None:
    directory = tmp_path / "refs"
    directory.mkdir()
    options = LoadOptions(remote_protocol="s3", record_cache=3)
    result: object = load(LocalSource(directory), options)
    assert [call.url for call in parquet_calls] == [str(directory)]
    assert result is parquet_calls[0]
    assert parquet_calls[0].options is options


@pytest.mark.parametrize("name", ["refs.parq", "refs.parquet", "REFS.PARQ"])
def test_parquet_names(tmp_path: Path, parquet_calls: list[FakeParquetSet], name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"")  # a name alone decides; the Parquet loader judges the content
    load(LocalSource(path), LoadOptions())
    assert [call.url for call in parquet_calls] == [str(path)]


def test_parquet_file_named_as_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    path.write_bytes(b"PAR1" + bytes(20))
    with pytest.raises(ReferenceFormatError, match="Parquet"):
        load(LocalSource(path), LoadOptions())


def test_package_exports() -> None:
    assert refmount.formats.load is load
    assert refmount.formats.LoadOptions is LoadOptions
    assert sorted(refmount.formats.__all__) == ["LoadOptions", "load"]
