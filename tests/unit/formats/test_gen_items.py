"""Tests of Version 1 ``gen`` items: product order, rendering, parsing of their numbers,
broken items, and their cost against the cap on the reference file."""

from __future__ import annotations

import json
from typing import Any

import fsspec
import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.gen_items import GEN_KEY_COST
from refmount.formats.json_refs import load_document
from refmount.formats.options import LoadOptions
from refmount.model import Inline, Range, Whole
from tests.unit.formats.test_json_v1 import SOURCE, as_v0, expand, problem_of, v1


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
