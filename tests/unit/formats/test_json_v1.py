"""Version 1 reference files: templates, refs and gen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.json_refs import load_document, load_json
from refmount.formats.json_v1 import load_v1
from refmount.formats.options import LoadOptions
from refmount.model import Inline, Range, Reference, Whole
from tests.fakes import LocalSource

SOURCE = "/refs/refs.json"

SPEC_EXAMPLE: dict[str, Any] = {
    "version": 1,
    "templates": {"u": "server.domain/path", "f": "{{c}}"},
    "gen": [
        {
            "key": "gen_key{{i}}",
            "url": "http://{{u}}_{{i}}",
            "offset": "{{(i + 1) * 1000}}",
            "length": "1000",
            "dimensions": {"i": {"stop": 5}},
        }
    ],
    "refs": {
        "key0": "data",
        "key1": ["http://target_url", 10000, 100],
        "key2": ["http://{{u}}", 10000, 100],
        "key3": ["http://{{f(c='text')}}", 10000, 100],
    },
}


def expand(document: dict[str, Any], **options: Any) -> dict[str, Reference]:
    return dict(load_v1(document, SOURCE, "/refs", LoadOptions(**options)))


def v1(**members: Any) -> dict[str, Any]:
    return {"version": 1, **members}


def problem_of(document: dict[str, Any], **options: Any) -> ReferenceFormatError:
    with pytest.raises(ReferenceFormatError) as caught:
        load_document(document, SOURCE, "/refs", LoadOptions(**options))
    assert caught.value.source == SOURCE
    return caught.value


def as_v0(references: dict[str, Reference]) -> dict[str, object]:
    """Return references written the way a Version 0 file would hold them."""
    out: dict[str, object] = {}
    for key, reference in references.items():
        match reference:
            case Inline(data):
                out[key] = data.decode()
            case Range(url, offset, length):
                out[key] = [url, offset, length]
            case Whole(url):
                out[key] = [url]
    return out


# --- the specification's example ----------------------------------------------------------


def test_spec_example_expands_exactly() -> None:
    expected: dict[str, object] = {
        "key0": "data",
        "key1": ["http://target_url", 10000, 100],
        "key2": ["http://server.domain/path", 10000, 100],
        "key3": ["http://text", 10000, 100],
    }
    for i in range(5):
        expected[f"gen_key{i}"] = [f"http://server.domain/path_{i}", (i + 1) * 1000, 1000]
    result = as_v0(expand(SPEC_EXAMPLE))
    assert result == expected
    assert list(result) == list(expected)


def test_spec_example_matches_fsspec_jinja_mode(tmp_path: Path) -> None:
    # J28b: fsspec agrees when simple_templates=False; its default mode fails (J28a).
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC_EXAMPLE))
    fs = fsspec.filesystem("reference", fo=str(path), simple_templates=False)
    ours = load_json(LocalSource(path), LoadOptions())
    theirs = {key: fs.references[key] for key in fs.references}
    keys = ours.keys()
    assert as_v0({key: reference for key in keys if (reference := ours.get(key))}) == theirs


def test_spec_url_only_gen_variant() -> None:
    # fsspec's test_spec1_expand: a gen item without offset/length gives whole-file refs.
    document = v1(
        templates={"u": "server.domain/path"},
        gen=[
            {
                "key": "gen_key{{i}}",
                "url": "http://{{u}}_{{i}}",
                "dimensions": {"i": {"start": 5, "stop": 7}},
            }
        ],
    )
    assert expand(document) == {
        "gen_key5": Whole("http://server.domain/path_5"),
        "gen_key6": Whole("http://server.domain/path_6"),
    }


# --- version dispatch ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 1.0])
def test_version_one(version: object) -> None:
    document = {"version": version, "refs": {"a": "x"}}  # J25b
    assert load_document(document, SOURCE, "/refs", LoadOptions()) == {"a": Inline(b"x")}


@pytest.mark.parametrize(
    ("version", "shown"),
    [(0, "0"), ("1", '"1"'), (2, "2"), (None, "null"), (True, "true"), (1.5, "1.5"), ([1], "[1]")],
)
def test_unknown_version(version: object, shown: str) -> None:
    # J25, J25c; fsspec also accepts true as 1 and treats null as Version 0 — we refuse both.
    error = problem_of({"version": version, "refs": {"a": "x"}})
    assert error.key is None
    assert error.problem.startswith(f"unknown version {shown}")


def test_extra_top_level_keys_are_ignored() -> None:
    assert expand(v1(other="z", refs={"a": "b"})) == {"a": Inline(b"b")}  # J26
    assert expand(v1()) == {}


# --- refs ----------------------------------------------------------------------------------


def test_refs_values_are_read_like_version_0() -> None:
    document = v1(
        refs={
            "b64": "base64:/wBhYg==",  # J37: decoded, size 4 (fsspec says 15)
            "obj": {"zarr_format": 2},
            "text": "{{u}} stays text",
            "range": ["data.nc", 1, 2],
            "whole": ["s3://b/k"],
        },
        templates={"u": "x"},
    )
    assert expand(document) == {
        "b64": Inline(b"\xff\x00ab"),
        "obj": Inline(b'{"zarr_format": 2}'),
        "text": Inline(b"{{u}} stays text"),
        "range": Range("/refs/data.nc", 1, 2),
        "whole": Whole("s3://b/k"),
    }


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://{{u}}/x", "http://host/x"),  # J29
        ("http://{{ u }}/x", "http://host/x"),  # J29b
        ("http://{{u}}/{x}", "http://host/{x}"),  # J29c
        ("{{u|upper}}/x", "/refs/HOST/x"),  # rendered, then resolved like any URL
    ],
)
def test_list_urls_are_rendered(url: str, expected: str) -> None:
    document = v1(templates={"u": "host"}, refs={"k": [url, 0, 1], "w": [url]})
    assert expand(document) == {"k": Range(expected, 0, 1), "w": Whole(expected)}


def test_undefined_template_name_is_an_error() -> None:
    error = problem_of(v1(templates={"u": "host"}, refs={"k": ["http://{{missing}}/a", 0, 1]}))
    assert error.key == "k"
    assert "undefined name" in error.problem  # J29d: fsspec renders "http:///a"


def test_braces_without_templates_are_still_rendered() -> None:
    error = problem_of(v1(refs={"k": ["http://{{u}}", 0, 1]}))  # J30: fsspec keeps it literal
    assert error.key == "k"
    assert "'u' is undefined" in error.problem


def test_template_syntax_error_names_the_key() -> None:
    error = problem_of(v1(templates={"u": "host"}, refs={"k": ["http://{{u", 0, 1]}))
    assert error.key == "k"
    assert error.problem.startswith("template syntax error in URL 'http://{{u'")


def test_null_url_with_templates_uses_the_target() -> None:
    document = v1(templates={"u": "host"}, refs={"k": [None, 0, 1], "w": [None]})  # J31
    assert expand(document, target="s3://b/t") == {
        "k": Range("s3://b/t", 0, 1),
        "w": Whole("s3://b/t"),
    }


def test_invalid_refs_value() -> None:
    error = problem_of(v1(refs={"t": ["/d", "1", "2"]}))  # J38
    assert error.key == "t"
    assert "the offset must be an integer" in error.problem


@pytest.mark.parametrize(
    ("member", "value", "words"),
    [
        ("templates", [], "'templates' must be an object, not a list of 0 items"),
        ("templates", None, "'templates' must be an object, not null"),
        ("refs", ["a"], "'refs' must be an object, not a list of 1 items"),
        ("gen", {}, "'gen' must be a list, not an object"),
    ],
)
def test_members_of_the_wrong_type(member: str, value: object, words: str) -> None:
    error = problem_of(v1(**{member: value}))
    assert error.key is None
    assert error.problem == words


def test_template_value_of_the_wrong_type() -> None:
    assert "template 'n' must be a string" in problem_of(v1(templates={"n": 1})).problem
