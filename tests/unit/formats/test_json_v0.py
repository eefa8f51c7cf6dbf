"""Version 0 reference files, checked against fsspec's ReferenceFileSystem where it is right."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.json_refs import JsonReferenceSet, load_json
from refmount.formats.json_v0 import load_v0, parse_refs
from refmount.formats.options import LoadOptions
from refmount.formats.values import ValueParser
from refmount.model import Inline, Range, Reference, Whole
from tests.fakes import LocalSource

D = b"HELLO WORLD 0123456789abcdefghijklmnopqrstuvwxyz"


def content(reference: Reference) -> bytes:
    """Return the bytes a reference to a local file stands for."""
    match reference:
        case Inline(data):
            return data
        case Range(url, offset, length):
            with open(url.removeprefix("file://"), "rb") as file:
                file.seek(offset)
                return file.read(length)
        case Whole(url):
            return Path(url.removeprefix("file://")).read_bytes()


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(D)
    return path


def write_refs(tmp_path: Path, refs: object, name: str = "refs.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(refs))
    return path


def load(path: Path, **options: object) -> JsonReferenceSet:
    return load_json(LocalSource(path), LoadOptions(**options))  # type: ignore[arg-type]


def get(references: JsonReferenceSet, key: str) -> Reference:
    reference = references.get(key)
    assert reference is not None, key
    return reference


def test_bytes_match_fsspec(tmp_path: Path, data_file: Path) -> None:
    d = str(data_file)
    refs = {
        "text": "hello",  # J01
        "unicode": "h\u00e9llo\u2603",  # J02
        "b64": "base64:AAECYmluYXJ5",  # J03
        "b64-space": "base64:aGVs bG8=",  # J03b
        "b64-newline": "base64:aGVs\nbG8=",
        "b64-trailing": "base64:aGVsbG8=\n",
        "b64-empty": "base64:",
        "b64-case": "BASE64:aGVsbG8=",
        "whole": [d],  # J05
        "range": [d, 6, 5],  # J06
        "target-range": [None, 0, 5],  # J07
        "target-whole": [None],  # J07b
        "short": [d, 40, 100],  # J08: the reader, not the loader, detects the short target
        "empty-range": [d, 5, 0],  # J09
        "empty": "",  # J20
        "deep/dir/key": [d, 12, 10],
    }
    path = write_refs(tmp_path, refs)
    ours = load(path, target=d)
    fs = fsspec.filesystem("reference", fo=str(path), target=d, simple_templates=False)
    assert list(ours.keys()) == list(refs)
    for key in refs:
        assert content(get(ours, key)) == fs.cat(key), key


def test_sizes_are_the_bytes_served(tmp_path: Path, data_file: Path) -> None:
    # fsspec's info() gives 6 and 19 here (characters, encoded length); we give what cat gives.
    path = write_refs(tmp_path, {"unicode": "h\u00e9llo\u2603", "b64": "base64:AAECYmluYXJ5"})
    ours = load(path)
    fs = fsspec.filesystem("reference", fo=str(path))
    for key in ("unicode", "b64"):
        reference = get(ours, key)
        assert isinstance(reference, Inline)
        assert len(reference.data) == len(fs.cat(key))
    assert fs.info("b64")["size"] == 19  # the fsspec bug we do not copy


def test_references_are_typed(tmp_path: Path, data_file: Path) -> None:
    d = str(data_file)
    path = write_refs(tmp_path, {"w": [d], "r": [d, 6, 5], "z": [d, 0, 0], "t": "x"})
    ours = load(path)
    assert get(ours, "w") == Whole(d)
    assert get(ours, "r") == Range(d, 6, 5)
    assert get(ours, "z") == Range(d, 0, 0)  # JSON [url, 0, 0] is an empty file
    assert get(ours, "t") == Inline(b"x")


def test_json_object_values_use_stdlib_json(tmp_path: Path) -> None:
    # J04: fsspec serialises with ujson when installed ('{"a":1,...}', '\/'); we use the
    # stdlib's json.dumps with its default separators, whatever is installed.
    value = {"a": 1, "b": [1, 2.5, None, True], "c": "x/y", "d": "\u00e9"}
    path = write_refs(tmp_path, {".zattrs": value})
    reference = get(load(path), ".zattrs")
    assert reference == Inline(json.dumps(value).encode())
    assert reference == Inline(b'{"a": 1, "b": [1, 2.5, null, true], "c": "x/y", "d": "\\u00e9"}')


def test_version_0_has_no_special_keys(tmp_path: Path) -> None:
    # J27: without "version", "refs" and "templates" are ordinary keys holding JSON objects.
    doc = {"refs": {"a": "b"}, "templates": {"u": "x"}}
    references = load(write_refs(tmp_path, doc))
    assert get(references, "refs") == Inline(b'{"a": "b"}')
    assert get(references, "templates") == Inline(b'{"u": "x"}')


def test_template_braces_are_literal_in_version_0(tmp_path: Path) -> None:
    references = load(write_refs(tmp_path, {"k": ["s3://b/{{u}}", 0, 1]}))
    assert get(references, "k") == Range("s3://b/{{u}}", 0, 1)


def test_relative_paths_follow_the_reference_file_not_the_cwd(
    tmp_path: Path, data_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data.bin").write_bytes(b"WRONG FILE")
    monkeypatch.chdir(elsewhere)
    refs = {
        "plain": ["data.bin", 0, 4],
        "dot": ["./data.bin", 6, 5],
        "file": ["file://data.bin", 0, 4],
        "up": ["sub/../data.bin"],
    }
    sub = tmp_path / "sub"
    sub.mkdir()
    references = load(write_refs(sub, refs))
    assert get(references, "plain") == Range(str(tmp_path / "sub" / "data.bin"), 0, 4)
    references = load(write_refs(tmp_path, refs))
    assert content(get(references, "plain")) == b"HELL"
    assert content(get(references, "dot")) == b"WORLD"
    assert content(get(references, "file")) == b"HELL"
    assert get(references, "up") == Whole(str(data_file))
    # fsspec reads relative paths from the process's working directory instead.
    fs = fsspec.filesystem("reference", fo=str(tmp_path / "refs.json"))
    assert fs.cat("plain") == b"WRON"


def test_each_url_keeps_its_own_protocol(tmp_path: Path, data_file: Path) -> None:
    d = str(data_file)
    # J39b: fsspec infers one protocol from the first URL and then cannot read "p".
    refs = {"m": ["memory://x", 0, 1], "p": [d, 0, 2], "f": ["file://" + d, 0, 3]}
    references = load(write_refs(tmp_path, refs))
    assert get(references, "m") == Range("memory://x", 0, 1)
    assert content(get(references, "p")) == b"HE"
    assert content(get(references, "f")) == b"HEL"  # J39c


def test_data_uri_is_kept(tmp_path: Path) -> None:
    uri = "data:text/plain;base64,aGVsbG8="  # J40
    assert get(load(write_refs(tmp_path, {"k": [uri]})), "k") == Whole(uri)


def test_remote_protocol(tmp_path: Path) -> None:
    references = load(write_refs(tmp_path, {"k": ["bucket/key.nc", 0, 8]}), remote_protocol="s3")
    assert get(references, "k") == Range("s3://bucket/key.nc", 0, 8)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ([None, 0, 5], "null URL and no --target given"),  # J07c
        (["", 0, 5], "empty URL"),  # J07d
        (5, "not a number (5)"),  # J22
        (True, "not true/false"),
        (None, "not null"),  # J23
        (["/d", 1], "not 2 items"),  # J24
        (["/d", "1", "2"], "the offset must be an integer"),
        (["/d", 1.0, 2], "the offset must be an integer"),
        (["/d", 0, -1], "negative length -1"),
        ("base64:aGVsbG8", "bad base64"),
    ],
)
def test_malformed_value_names_file_key_and_problem(
    tmp_path: Path, value: object, words: str
) -> None:
    path = write_refs(tmp_path, {"good": "x", "bad/key": value})
    with pytest.raises(ReferenceFormatError) as caught:
        load(path)
    assert caught.value.source == str(path)
    assert caught.value.key == "bad/key"
    assert words in caught.value.problem
    assert str(caught.value).startswith(f"{path}: key 'bad/key': ")


def test_key_names_are_not_judged_here(tmp_path: Path) -> None:
    # J15-J19: names FUSE cannot show are the tree's business; the loader keeps them all.
    keys = ["/lead", "trail/", "a//b", "a", "a/b", "", ".", "..", "a/./b", "x\ny"]
    references = load(write_refs(tmp_path, dict.fromkeys(keys, "v")))
    assert list(references.keys()) == keys


def test_duplicate_keys_last_wins_and_order_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    path.write_text('{"b": "1", "a": "2", "b": "3"}')
    references = load(path)
    assert list(references.keys()) == ["b", "a"]
    assert get(references, "b") == Inline(b"3")


def test_load_v0_directly() -> None:
    refs = load_v0({"a": ["x.nc", 1, 2], "b": "t"}, "/r/refs.json", "/r", LoadOptions())
    assert refs == {"a": Range("/r/x.nc", 1, 2), "b": Inline(b"t")}


def test_parse_refs_skips_with_a_callback() -> None:
    skipped: list[ReferenceFormatError] = []
    parser = ValueParser("f.json", "/", LoadOptions())
    refs = parse_refs({"a": "ok", "b": 5, "c": [None]}, parser, skipped.append)
    assert refs == {"a": Inline(b"ok")}
    assert [(error.key, error.problem[:20]) for error in skipped] == [
        ("b", "a reference must be "),
        ("c", "null URL and no --ta"),
    ]


def test_parse_refs_consume_empties_the_document() -> None:
    document: dict[str, object] = {"a": ["x", 0, 1], "b": "t"}
    parser = ValueParser("f.json", "/", LoadOptions())
    refs = parse_refs(document, parser, None, consume=True)
    assert refs == {"a": Range("/x", 0, 1), "b": Inline(b"t")}
    assert document == {"a": None, "b": None}


def test_progress_is_told_every_step_and_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    path.write_text(json.dumps({f"k{i}": "x" for i in range(250_000)}))
    calls: list[tuple[int, int]] = []
    options = LoadOptions(progress=lambda done, total: calls.append((done, total)))
    references = load_json(LocalSource(path), options)
    assert len(references) == 250_000
    # read as a stream: the total is estimated from the share of the file read
    assert [done for done, _ in calls] == [100_000, 200_000, 250_000]
    assert all(abs(total - 250_000) < 25_000 for _, total in calls), calls
    assert calls[-1] == (250_000, 250_000)
