"""Version 1 reference files: templates, refs and gen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.json_refs import load_document, load_json
from refmount.formats.json_v1 import GEN_KEY_COST, load_v1
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


# --- gen -----------------------------------------------------------------------------------


def gen_item(**fields: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"key": "k{{i}}", "url": "memory://f{{i}}", "dimensions": {"i": [0]}}
    item.update(fields)
    return {key: value for key, value in item.items() if value is not ...}


def test_gen_product_order_first_dimension_slowest() -> None:
    # J32b: lists keep their order; dict dimensions are ranges.
    item = gen_item(
        key="k/{{i}}.{{j}}",
        dimensions={"i": [3, 1], "j": {"start": 2, "stop": 7, "step": 2}},
    )
    result = expand(v1(gen=[item]))
    assert list(result) == ["k/3.2", "k/3.4", "k/3.6", "k/1.2", "k/1.4", "k/1.6"]
    assert result["k/1.4"] == Whole("memory://f1")


def test_gen_matches_fsspec_jinja_mode() -> None:
    item = gen_item(
        key="k/{{i}}.{{j}}",
        url="memory://{{u}}/{{i}}",
        offset="{{ j * 10 }}",
        length=" 5 ",
        dimensions={"i": [3, 1], "j": {"start": 1, "stop": 7, "step": 3}},
    )
    document = v1(templates={"u": "host"}, gen=[item], refs={"k/1.1": "overridden", "r": "x"})
    fs = fsspec.filesystem("reference", fo=json.loads(json.dumps(document)), simple_templates=False)
    ours = as_v0(expand(document))
    assert ours == dict(fs.references)
    assert ours["k/1.1"] == ["memory://host/1", 10, 5]


def test_gen_negative_step_and_empty_dimensions() -> None:
    item = gen_item(key="k{{i}}", dimensions={"i": {"start": 3, "stop": 0, "step": -2}})
    assert list(expand(v1(gen=[item]))) == ["k3", "k1"]
    assert expand(v1(gen=[gen_item(dimensions={"i": []})])) == {}
    only = gen_item(key="only", url="memory://x", dimensions={})
    assert expand(v1(gen=[only])) == {"only": Whole("memory://x")}


def test_gen_wins_over_refs() -> None:
    # J33
    document = v1(
        refs={"key0": "data", "other": "o"}, gen=[gen_item(key="key{{i}}", url="memory://g")]
    )
    result = expand(document)
    assert result == {"key0": Whole("memory://g"), "other": Inline(b"o")}


def test_gen_later_items_win() -> None:
    first = gen_item(key="k", url="memory://a", dimensions={})
    second = gen_item(key="k", url="memory://b", dimensions={})
    assert expand(v1(gen=[first, second])) == {"k": Whole("memory://b")}


def test_gen_integer_offset_and_length_are_accepted() -> None:
    # J34: fsspec raises TypeError for JSON numbers here; we accept them as they are.
    result = expand(v1(gen=[gen_item(offset=5, length=7)]))
    assert result == {"k0": Range("memory://f0", 5, 7)}


@pytest.mark.parametrize(("text", "value"), [(" 3 ", 3), ("1_000", 1000), ("{{ 2 + 1 }}", 3)])
def test_gen_offset_parsing_like_int(text: str, value: int) -> None:
    result = expand(v1(gen=[gen_item(offset=text, length=text)]))  # J34c
    assert result == {"k0": Range("memory://f0", value, value)}


def test_gen_values_are_rendered_with_templates() -> None:
    item = gen_item(key="{{p}}/{{i}}", url="{{u}}/{{ f(c=i) }}", dimensions={"i": ["a", "b"]})
    document = v1(templates={"u": "s3://b", "p": "pre", "f": "x{{c}}"}, gen=[item])
    assert expand(document) == {"pre/a": Whole("s3://b/xa"), "pre/b": Whole("s3://b/xb")}


def test_gen_relative_url_resolves_against_the_reference_file() -> None:
    result = expand(v1(gen=[gen_item(url="data_{{i}}.nc")]))
    assert result == {"k0": Whole("/refs/data_0.nc")}


@pytest.mark.parametrize(
    ("fields", "key", "words"),
    [
        ({"offset": "10"}, None, "gen item 0: give both 'offset' and 'length', or neither"),  # J34b
        ({"length": "10"}, None, "give both 'offset' and 'length', or neither"),
        ({"dimensions": {"i": {"start": 0}}}, None, "dimension 'i' has no 'stop'"),
        ({"dimensions": {"i": {"stop": 3, "step": 0}}}, None, "'step' must not be 0"),
        ({"dimensions": {"i": {"stop": "3"}}}, None, "'stop' must be an integer, not a string"),
        ({"dimensions": {"i": {"stop": 3.0}}}, None, "'stop' must be an integer"),
        ({"dimensions": {"i": {"stop": True}}}, None, "'stop' must be an integer"),
        ({"dimensions": {"i": 5}}, None, "dimension 'i' must be a list or an object"),
        ({"dimensions": ...}, None, "'dimensions' must be an object, not null"),
        ({"dimensions": [1]}, None, "'dimensions' must be an object"),
        ({"key": ...}, None, "'key' must be a string, not null"),
        ({"url": ...}, None, "'url' must be a string, not null"),
        ({"url": 5}, None, "'url' must be a string, not a number (5)"),
        ({"dimensions": {"u": [1]}}, None, "dimension 'u' has the name of a template"),  # J35
        ({"offset": "3.0", "length": "1"}, "k0", "offset '3.0' is not an integer"),  # J34c
        ({"offset": "x", "length": "1"}, "k0", "offset 'x' is not an integer"),
        ({"offset": "0", "length": "{{ i - 1 }}"}, "k0", "negative length -1"),
        ({"offset": "-1", "length": "1"}, "k0", "negative offset -1"),
        ({"offset": 1.5, "length": 1}, "k0", "'offset' must be a string or an integer"),
        ({"offset": True, "length": 1}, "k0", "'offset' must be a string or an integer"),
        ({"offset": None, "length": 1}, "k0", "'offset' must be a string or an integer"),
        ({"key": "k{{ missing }}"}, None, "undefined name in key"),
        ({"url": "{{ missing }}"}, "k0", "undefined name in url"),
        ({"url": "{{i"}, "k0", "template syntax error in url"),
        ({"url": "{{ '' }}"}, "k0", "renders as an empty string"),
        ({"offset": "{{ i", "length": "1"}, "k0", "template syntax error in offset"),
    ],
)
def test_broken_gen_items(fields: dict[str, Any], key: str | None, words: str) -> None:
    error = problem_of(v1(templates={"u": "x"}, gen=[gen_item(**fields)]))
    assert error.key == key
    assert words in error.problem
    assert error.problem.startswith("gen item 0")
    # A broken gen item is structural: --skip-invalid does not skip it.
    with pytest.raises(ReferenceFormatError):
        load_document(
            v1(templates={"u": "x"}, gen=[gen_item(**fields)]),
            SOURCE,
            "/",
            LoadOptions(skip_invalid=True),
        )


@pytest.mark.parametrize("item", [None, 5, "k", ["k"]])
def test_gen_item_must_be_an_object(item: object) -> None:
    error = problem_of(v1(gen=[gen_item(), item]))
    assert error.problem.startswith("gen item 1: must be an object")


@pytest.mark.parametrize(
    "dimensions",
    [
        {"i": {"stop": 10**12}},
        {"i": {"stop": 20_000}, "j": {"stop": 20_000}},
        {"i": {"start": -(2**62), "stop": 2**62}},
    ],
)
def test_gen_item_with_too_many_keys_is_refused(dimensions: dict[str, Any]) -> None:
    # regression: the dimensions were materialised first, ending in a MemoryError (or a hang)
    item = gen_item(key="k{{i}}", dimensions=dimensions)
    error = problem_of(v1(gen=[item]))
    assert "gen item 0: generates" in error.problem
    assert "more than 100,000,000" in error.problem


def test_gen_with_an_empty_dimension_and_a_huge_one_generates_nothing() -> None:
    # regression: itertools.product copied the huge dimension before finding the empty one
    item = gen_item(key="k{{i}}{{j}}", dimensions={"i": {"stop": 10**12}, "j": []})
    assert expand(v1(gen=[item])) == {}


def test_gen_keys_stored_one_by_one_over_the_cap_are_refused_before_any_is_generated() -> None:
    # every key would fail to render: the cap is found first, from the dimensions alone
    item = gen_item(key="k{{ nope }}{{i}}", dimensions={"i": {"stop": 1000}})
    error = problem_of(v1(gen=[item]), max_size=1000 * GEN_KEY_COST - 1)
    assert error.key is None
    assert error.problem.startswith("gen item 0: key 'k{{ nope }}{{i}}': its 1,000 keys")
    assert f"at least {1000 * GEN_KEY_COST:,} bytes, more" in error.problem
    assert f"more than the {1000 * GEN_KEY_COST - 1:,} bytes allowed" in error.problem
    assert "(--max-refs-size, -o max_refs_size=SIZE)" in error.problem


def test_the_cost_of_gen_items_adds_up_over_the_file() -> None:
    first = gen_item(key="a{{i}}", dimensions={"i": {"stop": 10}})
    second = gen_item(key="b{{ nope }}", dimensions={"i": {"stop": 10}})
    error = problem_of(v1(gen=[first, second]), max_size=15 * GEN_KEY_COST)
    assert error.problem.startswith("gen item 1: key 'b{{ nope }}': its 10 keys")
    assert f"at least {20 * GEN_KEY_COST:,} bytes with the gen items before it" in error.problem


def test_the_text_of_gen_keys_counts_as_they_are_generated() -> None:
    item = gen_item(key="k{{i}}", dimensions={"i": {"stop": 10}})  # 2 characters each
    cap = 10 * GEN_KEY_COST + 2 * 10
    assert len(expand(v1(gen=[item]), max_size=cap)) == 10
    error = problem_of(v1(gen=[item]), max_size=cap - 1)
    assert error.problem.startswith("gen item 0: key 'k{{i}}': its keys, stored one by one")
    assert "by key 'k9'" in error.problem
