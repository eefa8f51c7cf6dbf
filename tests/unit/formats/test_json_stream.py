"""The streaming JSON loader gives exactly what the ordinary load gives, or steps aside."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refmount.errors import ReferenceFormatError
from refmount.formats import json_stream
from refmount.formats.json_refs import load_document
from refmount.formats.json_stream import stream_document
from refmount.formats.options import LoadOptions
from refmount.model import Inline, Range, Reference

SOURCE = "/data/refs.json"
BASE = "/data"


def ordinary(text: str | bytes) -> dict[str, Reference] | str:
    """What the ordinary load gives: the references, or the error message."""
    try:
        return dict(load_document(json.loads(text), SOURCE, BASE, LoadOptions()).freeze())
    except ReferenceFormatError as error:
        return str(error)
    except (ValueError, RecursionError) as error:
        return f"not JSON: {type(error).__name__}"


def streamed(data: bytes) -> dict[str, Reference] | None:
    refs = stream_document(data, SOURCE, BASE, LoadOptions())
    if refs is None or refs.freeze(find_repeats=True).has_repeated_keys:
        return None
    return dict(refs)


@pytest.fixture(params=[1 << 20, 7], ids=["1MiB-chunks", "7-byte-chunks"])
def chunk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run with the real chunk size and with one that cuts every token somewhere."""
    monkeypatch.setattr(json_stream, "CHUNK", request.param)
    return int(request.param)


@pytest.mark.usefixtures("chunk")
@pytest.mark.parametrize(
    "document",
    [
        {"a": "text", "b/c": ["x.bin", 10, 20], "d": ["s3://b/k"], "e": {"zarr_format": 2}},
        {
            "version": 1,
            "templates": {"u": "/x"},
            "refs": {"a": "base64:aGk=", "b": ["{{u}}", 1, 2]},
        },
        {"version": 1, "templates": {"u": "s3://b/x"}, "refs": {"k": ["{{u}}", 0, 5]}},
        {
            "version": 1.0,
            "templates": {"u": "/t"},
            "gen": [
                {"key": "g/{{i}}", "url": "{{u}}", "dimensions": {"i": {"stop": 3}}},
            ],
            "refs": {"g/1": "replaced", "z": "kept"},
            "other": [1, 2, {"ignored": True}],
        },
        {"version": 1},
        {"version": 1, "refs": {}},
        {"k" * 300: "long key", "n": ["/f", 0, 1000], "m": ["/f", 0, 10**18]},
        {"snowman ☃ 𝄞": "é", 'esc"ape\\d\n': "\u0000"},
    ],
)
def test_valid_documents_stream_to_what_the_ordinary_load_gives(document: dict[str, Any]) -> None:
    assert isinstance(ordinary(json.dumps(document)), dict)  # (the examples must be valid)
    for indent in (None, 2):
        text = json.dumps(document, indent=indent, ensure_ascii=False)
        assert streamed(text.encode()) == ordinary(text)


@pytest.mark.usefixtures("chunk")
@pytest.mark.parametrize(
    "text",
    [
        '{"a": "1", "a": "2"}',  # a repeated key: json.loads keeps the last
        '{"version": 1, "refs": {"a": "1", "a": "2"}}',
        '{"version": 1, "refs": {"a": ["{{u}}", 0, 1]}, "templates": {"u": "/x"}}',
        '{"version": 1, "refs": {}, "refs": {"a": "1"}}',
        '{"a": "1", "version": 1}',
        '{"a": [1, 2]}',  # malformed value: the ordinary load names it
        '{"a": "1"} trailing',
        '{"a": "1",}',
        '{"a" "1"}',
        '["a"]',
        "",
        '{"version": "1", "refs": {}}',
        '{"version": 1, "refs": []}',
        '{"version": 1, "gen": {}}',
        "{}",
    ],
)
def test_doubtful_documents_are_left_to_the_ordinary_load(text: str) -> None:
    assert streamed(text.encode()) is None


def test_invalid_utf8_is_left_to_the_ordinary_load() -> None:
    assert stream_document(b'{"a": "\xff"}', SOURCE, BASE, LoadOptions()) is None


def test_a_big_set_streams_through_many_windows(chunk: int) -> None:
    refs: dict[str, object] = {f"x/{i}": ["big.bin", i * 4096, 4096] for i in range(2000)}
    refs["x/.zarray"] = "{}"
    data = json.dumps({"version": 1, "refs": refs}).encode()
    got = streamed(data)
    assert got is not None
    assert len(got) == 2001
    assert got["x/1999"] == Range("/data/big.bin", 1999 * 4096, 4096)
    assert got["x/.zarray"] == Inline(b"{}")


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=8),
)
values = st.one_of(
    st.text(max_size=20),
    st.builds(lambda u, o, n: [u, o, n], st.sampled_from(["a.bin", "s3://b/k"]), scalars, scalars),
    st.lists(scalars, max_size=4),
    st.dictionaries(st.text(max_size=4), scalars, max_size=3),
    scalars,
)


@settings(max_examples=200, deadline=None)
@given(
    refs=st.lists(st.tuples(st.text(min_size=1, max_size=6), values), max_size=12),
    version=st.sampled_from([None, 1]),
    indent=st.sampled_from([None, 0, 3]),
    small_chunks=st.booleans(),
)
def test_streaming_never_disagrees_with_the_ordinary_load(
    refs: list[tuple[str, Any]], version: int | None, indent: int | None, small_chunks: bool
) -> None:
    members = ",".join(f"{json.dumps(k)}: {json.dumps(v, indent=indent)}" for k, v in refs)
    inner = "{" + members + "}"
    text = inner if version is None else '{"version": 1, "refs": ' + inner + "}"
    original = json_stream.CHUNK
    json_stream.CHUNK = 5 if small_chunks else original
    try:
        got = streamed(text.encode())
    finally:
        json_stream.CHUNK = original
    expected = ordinary(text)
    if got is not None:
        assert got == expected
    else:  # it may step aside only for repeated keys, a malformed value or nothing to read
        keys = [key for key, _ in refs]
        assert (
            len(set(keys)) < len(keys)
            or not isinstance(expected, dict)
            or not keys
            or (version is None and "version" in keys)
        )
