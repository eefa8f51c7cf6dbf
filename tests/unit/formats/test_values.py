"""One ``refs`` value to one reference: the rules shared by Version 0 and Version 1."""

from __future__ import annotations

import base64
import json

import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.options import LoadOptions
from refmount.formats.values import ValueParser, describe, inline_object, inline_text
from refmount.model import Inline, Range, Reference, Whole

SOURCE = "/refs/dir/refs.json"
BASE = "/refs/dir"


def parse(value: object, **options: object) -> Reference:
    parser = ValueParser(SOURCE, BASE, LoadOptions(**options))  # type: ignore[arg-type]
    return parser.parse("k", value)


def problem_of(value: object, **options: object) -> str:
    with pytest.raises(ReferenceFormatError) as caught:
        parse(value, **options)
    assert caught.value.source == SOURCE
    assert caught.value.key == "k"
    return caught.value.problem


# --- text ----------------------------------------------------------------------------------


def test_text_is_utf8() -> None:
    assert parse("hello") == Inline(b"hello")  # J01


def test_non_ascii_text_size_is_its_utf8_length() -> None:
    # J02: fsspec's size is 6 (characters); the UTF-8 bytes served are 9 (1+2+1+1+1+3).
    reference = parse("h\u00e9llo\u2603")
    assert reference == Inline(b"h\xc3\xa9llo\xe2\x98\x83")
    assert isinstance(reference, Inline)
    assert len(reference.data) == 9


def test_empty_text_is_an_empty_file() -> None:
    assert parse("") == Inline(b"")  # J20


def test_lone_surrogate_is_an_error() -> None:
    assert "not valid Unicode" in problem_of("ab\ud800cd")


# --- base64 --------------------------------------------------------------------------------


def test_base64_is_decoded_and_sized_by_decoded_length() -> None:
    reference = parse("base64:AAECYmluYXJ5")  # J03: fsspec's size is 19, the encoded length
    assert reference == Inline(b"\x00\x01\x02binary")


@pytest.mark.parametrize(
    "text",
    ["base64:aGVs bG8=", "base64:aGVs\nbG8=", "base64:aGVsbG8=\n", "base64:aGVs\r\n\tbG8="],
)
def test_base64_ignores_whitespace_and_line_breaks(text: str) -> None:
    assert parse(text) == Inline(b"hello")  # J03b: as fsspec's decoder does


@pytest.mark.parametrize(
    "text",
    ["base64:_", "base64:aGVs\u00e9bG8=", "base64:QU!JD", "base64:aGVs-bG8=", "base64:a\x00A=="],
)
def test_base64_refuses_characters_outside_the_alphabet(text: str) -> None:
    # fsspec drops them ("base64:_" would be served as an empty file)
    assert problem_of(text).startswith("bad base64")


@pytest.mark.parametrize("text", ["base64:aGVsbG8", "base64:a", "base64:aGVsb"])
def test_bad_base64_padding_is_an_error(text: str) -> None:
    assert problem_of(text).startswith("bad base64")


def test_empty_base64_is_an_empty_file() -> None:
    assert parse("base64:") == Inline(b"")


@pytest.mark.parametrize("text", ["BASE64:aGVsbG8=", " base64:aGVsbG8=", "base64 :aGVsbG8="])
def test_base64_prefix_is_exact(text: str) -> None:
    assert parse(text) == Inline(text.encode())


def test_base64_with_a_lone_surrogate_is_an_error() -> None:
    assert problem_of("base64:aGVs\ud800bG8=").startswith("bad base64")


def test_base64_round_trip_of_every_byte() -> None:
    data = bytes(range(256))
    assert parse("base64:" + base64.b64encode(data).decode()) == Inline(data)


# --- JSON objects --------------------------------------------------------------------------


def test_object_is_stdlib_json_with_default_separators() -> None:
    value = {"a": 1, "b": [1, 2.5, None, True], "c": "x/y", "d": "\u00e9"}  # J04
    expected = b'{"a": 1, "b": [1, 2.5, null, true], "c": "x/y", "d": "\\u00e9"}'
    assert parse(value) == Inline(expected)
    assert len(expected) == 62


def test_object_keeps_key_order_and_escapes_astral_characters() -> None:
    value = {"z": 1.10, "a": 1e300, "s": "\U0001f600", "n": {}}
    assert parse(value) == Inline(json.dumps(value).encode())
    assert parse(value) == Inline(b'{"z": 1.1, "a": 1e+300, "s": "\\ud83d\\ude00", "n": {}}')


def test_inline_helpers() -> None:
    assert inline_text("x") == Inline(b"x")
    assert inline_object({"a": [1]}) == Inline(b'{"a": [1]}')
    with pytest.raises(ValueError, match="bad base64"):
        inline_text("base64:a")


# --- lists ---------------------------------------------------------------------------------


def test_range() -> None:
    assert parse(["/abs/data.bin", 6, 5]) == Range("/abs/data.bin", 6, 5)  # J06


def test_whole() -> None:
    assert parse(["/abs/data.bin"]) == Whole("/abs/data.bin")  # J05


def test_zero_length_range_stays_an_empty_range() -> None:
    # J09 and §4: JSON [url, off, 0] is an empty file, not the whole file as in Parquet.
    assert parse(["/abs/data.bin", 5, 0]) == Range("/abs/data.bin", 5, 0)
    assert parse(["/abs/data.bin", 0, 0]) == Range("/abs/data.bin", 0, 0)


def test_null_url_means_the_target() -> None:
    target = "s3://bucket/target.nc"
    assert parse([None, 0, 5], target=target) == Range(target, 0, 5)  # J07
    assert parse([None], target=target) == Whole(target)  # J07b


def test_null_url_without_target_is_an_error() -> None:
    assert problem_of([None, 0, 5]) == "null URL and no --target given"  # J07c
    assert problem_of([None]) == "null URL and no --target given"


def test_empty_url_is_not_the_target() -> None:
    # J07d: only null means --target.
    assert "empty URL" in problem_of(["", 0, 5], target="s3://b/t")
    assert "empty URL" in problem_of([""], target="s3://b/t")


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (5, "not a number (5)"),  # J22
        (True, "not true/false"),
        (256, "not a number (256)"),
        (1.5, "not a number (1.5)"),
        (None, "not null"),  # J23
        (["/d", 1], "not 2 items"),  # J24
        ([], "not 0 items"),
        (["/d", 1, 2, 3], "not 4 items"),
        (["/d", "1", "2"], "the offset must be an integer, not a string"),  # J38
        (["/d", 1, "2"], "the length must be an integer, not a string"),
        (["/d", 1.0, 2.0], "the offset must be an integer, not a number (1.0)"),
        (["/d", 1, 2.0], "the length must be an integer, not a number (2.0)"),
        (["/d", True, 2], "the offset must be an integer, not true/false"),
        (["/d", 1, False], "the length must be an integer, not true/false"),
        (["/d", None, 2], "the offset must be an integer, not null"),
        (["/d", -5, 3], "negative offset -5"),
        (["/d", 1, -1], "negative length -1"),
        (["/d", 2**62, 2**62], "ends beyond 2**63 - 1"),
        ([5, 0, 1], "the URL must be a string or null, not a number (5)"),
        ([["/d"]], "the URL must be a string or null, not a list of 1 items"),
        ([{"u": 1}, 0, 1], "the URL must be a string or null, not an object"),
    ],
)
def test_malformed_values(value: object, words: str) -> None:
    assert words in problem_of(value)


def test_largest_range_is_accepted() -> None:
    assert parse(["/d", 2**62, 2**62 - 1]) == Range("/d", 2**62, 2**62 - 1)


# --- URLs ----------------------------------------------------------------------------------


def test_relative_urls_resolve_against_the_reference_file_directory() -> None:
    assert parse(["data.bin", 0, 4]) == Range("/refs/dir/data.bin", 0, 4)
    assert parse(["./data.bin", 0, 4]) == Range("/refs/dir/data.bin", 0, 4)
    assert parse(["../other/data.bin"]) == Whole("/refs/other/data.bin")
    assert parse(["file://data.bin", 0, 4]) == Range("/refs/dir/data.bin", 0, 4)


def test_urls_keep_their_own_protocol() -> None:
    # J39: each URL is resolved on its own, never through a protocol inferred once.
    for url in ["memory://x", "s3://bucket/key", "https://host/a", "file:///abs/data.bin"]:
        assert parse([url, 0, 1]) == Range(url, 0, 1)
    assert parse(["data:text/plain;base64,aGVsbG8="]) == Whole("data:text/plain;base64,aGVsbG8=")


def test_remote_protocol_applies_to_bare_paths_only() -> None:
    assert parse(["bucket/key", 0, 1], remote_protocol="s3") == Range("s3://bucket/key", 0, 1)
    assert parse(["gs://b/k", 0, 1], remote_protocol="s3") == Range("gs://b/k", 0, 1)


def test_urls_are_shared_and_interned() -> None:
    parser = ValueParser(SOURCE, BASE, LoadOptions())
    # Build equal strings that are distinct objects, as a JSON parser does.
    first = parser.parse("a", ["".join(["s3://bucket/", "file.nc"]), 0, 1])
    second = parser.parse("b", ["".join(["s3://bucket/f", "ile.nc"]), 1, 1])
    third = parser.parse("c", ["".join(["s3://bucket/fi", "le.nc"])])
    assert isinstance(first, Range)
    assert isinstance(second, Range)
    assert isinstance(third, Whole)
    assert first.url is second.url is third.url


def test_url_renderer_is_used_only_for_urls_with_braces() -> None:
    seen: list[tuple[str, str]] = []

    def render(key: str, text: str) -> str:
        seen.append((key, text))
        return text.replace("{{u}}", "s3://bucket")

    parser = ValueParser(SOURCE, BASE, LoadOptions(), render=render)
    assert parser.parse("a", ["{{u}}/x", 0, 1]) == Range("s3://bucket/x", 0, 1)
    assert parser.parse("b", ["{{u}}/x", 1, 1]) == Range("s3://bucket/x", 1, 1)
    assert parser.parse("c", ["{u}/x"]) == Whole("/refs/dir/{u}/x")
    assert parser.parse("d", "{{u}} is text") == Inline(b"{{u}} is text")
    assert seen == [("a", "{{u}}/x")]  # rendered once, then remembered


def test_url_rendering_to_nothing_is_an_error() -> None:
    parser = ValueParser(SOURCE, BASE, LoadOptions(), render=lambda key, text: "")
    with pytest.raises(ReferenceFormatError, match="renders as an empty string"):
        parser.parse("k", ["{{u}}", 0, 1])


def test_describe() -> None:
    assert describe(None) == "null"
    assert describe(False) == "true/false"
    assert describe(3) == "a number (3)"
    assert describe("x") == "a string"
    assert describe([1, 2]) == "a list of 2 items"
    assert describe({}) == "an object"
    assert describe(b"x") == "bytes"


def test_a_set_with_no_directory_refuses_relative_targets_only() -> None:
    parser = ValueParser("<stdin>", "", LoadOptions())
    for relative in ("data.bin", "./sub/data.bin", "file://data.bin"):
        with pytest.raises(ReferenceFormatError, match="relative target path") as caught:
            parser.parse("k", [relative, 0, 1])
        assert str(caught.value).startswith("<stdin>: key 'k': ")
        assert "--base" in str(caught.value)
    assert parser.parse("a", ["/abs/data.bin", 0, 1]) == Range("/abs/data.bin", 0, 1)
    assert parser.parse("s", ["s3://b/k"]) == Whole("s3://b/k")
    remote = ValueParser("<stdin>", "", LoadOptions(remote_protocol="s3"))
    assert remote.parse("r", ["b/k", 0, 1]) == Range("s3://b/k", 0, 1)
    based = ValueParser("<stdin>", "https://host/dir", LoadOptions())
    assert based.parse("b", ["data.bin"]) == Whole("https://host/dir/data.bin")
