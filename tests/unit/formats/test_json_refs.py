"""Loading whole JSON reference files: reading, decompression, parsing, errors, skipping."""

from __future__ import annotations

import bz2
import gc
import gzip
import io
import json
import logging
import lzma
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import pytest
import zstandard

from refmount.errors import ReferenceFormatError
from refmount.formats.json_refs import (
    JsonReferenceSet,
    load_json,
    parse_json,
    refuse_a_malformed_start,
)
from refmount.formats.options import LoadOptions
from refmount.model import Inline, Range, ReferenceSet, Whole
from tests.fakes import LocalSource

D = b"HELLO WORLD 0123456789abcdefghijklmnopqrstuvwxyz"


def zstd_streamed(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buffer, closefd=False) as writer:
        writer.write(data)
    return buffer.getvalue()


COMPRESSIONS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": (".gz", gzip.compress),
    "zstd": (".zst", zstd_streamed),
    "bzip2": (".bz2", bz2.compress),
    "xz": (".xz", lzma.compress),
}

FSSPEC_NAMES = {"gzip": "gzip", "zstd": "zstd", "bzip2": "bz2", "xz": "xz"}


def write(tmp_path: Path, document: object, name: str = "refs.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def load(path: Path, **options: Any) -> JsonReferenceSet:
    return load_json(LocalSource(path), LoadOptions(**options))


def failure(path: Path, **options: Any) -> ReferenceFormatError:
    with pytest.raises(ReferenceFormatError) as caught:
        load(path, **options)
    assert caught.value.source == str(path)
    return caught.value


# --- the ReferenceSet ----------------------------------------------------------------------


def test_reference_set_protocol(tmp_path: Path) -> None:
    path = write(tmp_path, {"b": "x", "a/c": ["s3://b/k", 1, 2], "w": ["s3://b/k"]})
    references: ReferenceSet = load(path)
    assert references.source == str(path)
    assert list(references.keys()) == ["b", "a/c", "w"]
    assert references.get("b") == Inline(b"x")
    assert references.get("a/c") == Range("s3://b/k", 1, 2)
    assert references.get("w") == Whole("s3://b/k")
    assert references.get("missing") is None
    assert references.get("a") is None
    assert list(references.grids) == []
    with pytest.raises(IndexError):
        references.chunk_is_loaded(0, 0)
    with pytest.raises(IndexError):
        references.chunk(0, 0)


def test_len_and_empty_file(tmp_path: Path) -> None:
    assert len(load(write(tmp_path, {}))) == 0
    assert len(load(write(tmp_path, {"a": "1", "b": "2"}))) == 2


def test_reads_the_source_once(tmp_path: Path) -> None:
    source = LocalSource(write(tmp_path, {"a": "1"}))
    load_json(source, LoadOptions())
    assert source.reads == [""]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.json")


# --- compression ---------------------------------------------------------------------------


@pytest.mark.parametrize("compression", sorted(COMPRESSIONS))
@pytest.mark.parametrize("named", [True, False])
def test_compressed_files_load_and_match_fsspec(
    tmp_path: Path, compression: str, named: bool
) -> None:
    # J41: fsspec needs target_options={"compression": ...}; we look at the bytes.
    data_file = tmp_path / "data.bin"
    data_file.write_bytes(D)
    document = {"a": "hello", "b": [str(data_file), 6, 5], "c": {"x": [1]}}
    suffix, compress = COMPRESSIONS[compression]
    path = tmp_path / ("refs.json" + (suffix if named else ""))
    path.write_bytes(compress(json.dumps(document).encode()))
    references = load(path)
    assert references.get("a") == Inline(b"hello")
    assert references.get("b") == Range(str(data_file), 6, 5)
    assert references.get("c") == Inline(b'{"x": [1]}')
    fs = fsspec.filesystem(
        "reference", fo=str(path), target_options={"compression": FSSPEC_NAMES[compression]}
    )
    assert fs.cat("a") == b"hello"
    assert fs.cat("b") == b"WORLD"


@pytest.mark.parametrize("compression", sorted(COMPRESSIONS))
def test_corrupt_compressed_file_names_the_file(tmp_path: Path, compression: str) -> None:
    suffix, compress = COMPRESSIONS[compression]
    path = tmp_path / ("refs.json" + suffix)
    path.write_bytes(compress(b'{"a": "hello"}' * 100)[:-10])
    error = failure(path)
    assert error.key is None
    assert error.problem.startswith(f"corrupt {compression}")


def test_parquet_file_given_as_json(tmp_path: Path) -> None:
    path = tmp_path / "refs.0.parq.json"
    path.write_bytes(b"PAR1\x15\x04\x15\x00")
    assert "Parquet" in failure(path).problem


# --- malformed files -----------------------------------------------------------------------


def test_bad_json_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    path.write_text('{\n  "a": "x",\n  "b": [1, 2\n}\n')
    error = failure(path)
    assert error.key is None
    assert error.problem == "not valid JSON: Expecting ',' delimiter at line 4 column 1"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "not valid JSON: Expecting value at line 1 column 1"),
        (b'{"a": "x"} trailing', "not valid JSON: Extra data at line 1 column 12"),
        (b'{"a": "\xff"}', "not valid UTF-8"),
        (b"[" * 100000 + b"]" * 100000, "not valid JSON"),
        (b'{"a": ' + b"1" * 5000 + b"}", "not valid JSON"),
    ],
)
def test_unparsable_files(tmp_path: Path, data: bytes, words: str) -> None:
    path = tmp_path / "refs.json"
    path.write_bytes(data)
    assert words in failure(path).problem


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": "x"}')
    assert load(path).get("a") == Inline(b"x")


@pytest.mark.parametrize(
    ("document", "shown"),
    [([], "a list of 0 items"), ("x", "a string"), (5, "a number (5)"), (None, "null")],
)
def test_top_level_must_be_an_object(tmp_path: Path, document: object, shown: str) -> None:
    error = failure(write(tmp_path, document))
    assert error.problem == f"the top level must be a JSON object, not {shown}"


def test_parse_json_helper() -> None:
    assert parse_json(b'{"a": [1]}', "f") == {"a": [1]}
    with pytest.raises(ReferenceFormatError, match=r"^f: not valid JSON"):
        parse_json(b"{", "f")


# The bad-input list: each names the file, the key when there is one, and the problem.
BAD_INPUTS: list[tuple[str, object, str | None, str]] = [
    ("unknown version", {"version": 2, "refs": {}}, None, "unknown version 2"),
    ("bad base64", {"k": "base64:aGVsbG8"}, "k", "bad base64"),
    (
        "template syntax error",
        {"version": 1, "templates": {"u": "h"}, "refs": {"k": ["{{u", 0, 1]}},
        "k",
        "template syntax error in URL '{{u'",
    ),
    (
        "undefined template name",
        {"version": 1, "templates": {"u": "h"}, "refs": {"k": ["{{v}}/x", 0, 1]}},
        "k",
        "undefined name in URL '{{v}}/x': 'v' is undefined",
    ),
    ("non-integer offset", {"k": ["s3://b/k", "10", 5]}, "k", "the offset must be an integer"),
    ("float offset", {"k": ["s3://b/k", 10.0, 5]}, "k", "the offset must be an integer"),
    ("negative length", {"k": ["s3://b/k", 10, -5]}, "k", "negative length -5"),
    (
        "gen with missing stop",
        {"version": 1, "gen": [{"key": "k{{i}}", "url": "u", "dimensions": {"i": {}}}]},
        None,
        "gen item 0: dimension 'i' has no 'stop'",
    ),
    (
        "gen with offset but no length",
        {
            "version": 1,
            "gen": [{"key": "k{{i}}", "url": "u", "offset": "1", "dimensions": {"i": [1]}}],
        },
        None,
        "gen item 0: give both 'offset' and 'length', or neither",
    ),
]


@pytest.mark.parametrize(
    ("document", "key", "words"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_inputs(tmp_path: Path, document: object, key: str | None, words: str) -> None:
    path = write(tmp_path, document)
    error = failure(path)
    assert error.key == key
    assert words in error.problem
    assert str(error).startswith(str(path))


def test_garbage_collection_is_restored(tmp_path: Path) -> None:
    assert gc.isenabled()
    load(write(tmp_path, {"a": "x"}))
    assert gc.isenabled()
    with pytest.raises(ReferenceFormatError):
        load(write(tmp_path, {"a": 5}))
    assert gc.isenabled()
    gc.disable()
    try:
        load(write(tmp_path, {"a": "x"}))
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- --skip-invalid ------------------------------------------------------------------------


def test_skip_invalid_skips_bad_values_with_one_warning_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    document = {
        "good": "x",
        "bad-number": 5,
        "bad-base64": "base64:aGVsbG8",
        "bad-null": [None, 0, 1],
        "also-good": ["s3://b/k", 0, 1],
        "bad-length": ["s3://b/k", 0, -1],
    }
    path = write(tmp_path, document)
    with caplog.at_level(logging.WARNING):
        references = load(path, skip_invalid=True)
    assert list(references.keys()) == ["good", "also-good"]
    warnings = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 4
    assert all(record.name == "refmount.formats.json_refs" for record in warnings)
    messages = [record.getMessage() for record in warnings]
    for message, key in zip(
        messages, ["bad-number", "bad-base64", "bad-null", "bad-length"], strict=True
    ):
        assert str(path) in message
        assert repr(key) in message
        assert "\n" not in message
    assert "bad base64" in messages[1]
    assert "null URL and no --target given" in messages[2]


def test_skip_invalid_in_version_1_refs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    document = {
        "version": 1,
        "templates": {"u": "s3://b"},
        "refs": {"ok": ["{{u}}/k", 0, 1], "bad": ["{{v}}/k", 0, 1], "bad2": ["{{u", 0, 1]},
    }
    with caplog.at_level(logging.WARNING):
        references = load(write(tmp_path, document), skip_invalid=True)
    assert list(references.keys()) == ["ok"]
    assert references.get("ok") == Range("s3://b/k", 0, 1)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2
    assert "'v' is undefined" in messages[0]
    assert "template syntax error" in messages[1]


@pytest.mark.parametrize(
    "document",
    [
        {"version": "1", "refs": {}},
        {"version": 1, "templates": ["u"]},
        {"version": 1, "templates": {"u": 5}},
        {"version": 1, "refs": []},
        {"version": 1, "gen": [{"key": "k", "url": "u", "dimensions": {"i": {"step": 1}}}]},
        {"version": 1, "gen": [5]},
        ["not", "an", "object"],
    ],
)
def test_skip_invalid_does_not_skip_structural_errors(tmp_path: Path, document: object) -> None:
    failure(write(tmp_path, document), skip_invalid=True)


def test_skip_invalid_does_not_forgive_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    path.write_text('{"a": ')
    failure(path, skip_invalid=True)


@pytest.mark.parametrize(
    "document",
    [
        b"\0" * 4096,
        b'{"refs": {"a": tru, "b": "' + b"x" * 4096,
        b'{"refs": {"a": "\\q' + b"x" * 4096,
        b"[" * 100_000,
    ],
)
def test_a_start_that_is_already_malformed_gives_the_whole_documents_error(
    document: bytes,
) -> None:
    whole = document + (b"\0" * 10_000 if document[0] == 0 else b"y" * 10_000 + b'"}}')
    text = whole.decode(json.detect_encoding(whole), "surrogatepass")
    with pytest.raises(ReferenceFormatError) as from_whole:
        parse_json(text, "refs.json.gz")
    with pytest.raises(ReferenceFormatError) as from_start:
        refuse_a_malformed_start(document, "refs.json.gz")
    assert str(from_start.value) == str(from_whole.value)


@pytest.mark.parametrize(
    "start",
    [
        b'{"refs": {"a": "' + b"x" * 4096,  # an unterminated string: may end later
        b'{"refs": {"a": ["f", 1, 2], "b": 12',  # cut in a number
        b'{"refs": {"a": "b"}, "x": tr',  # cut in a literal
        '{"k": "\u00e9'.encode()[:-1],  # cut in a character
    ],
)
def test_a_start_cut_short_is_left_to_the_whole_document(start: bytes) -> None:
    refuse_a_malformed_start(start, "refs.json.gz")
