"""Compression and format recognition of reference files."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from collections.abc import Callable

import pytest
import zstandard

from refmount.errors import ReferenceFormatError
from refmount.formats.sniff import (
    FIRST_LOOK,
    compression_by_magic,
    compression_by_name,
    decompress,
    file_name,
    inflate,
    is_parquet,
    is_parquet_data,
)

PAYLOAD = b'{"k": "hello", "r": ["data.bin", 0, 5]}' * 50


def zstd_with_size(data: bytes) -> bytes:
    return bytes(zstandard.ZstdCompressor().compress(data))


def zstd_streamed(data: bytes) -> bytes:
    """A zstd frame written by a streaming compressor: its header has no content size."""
    buffer = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buffer, closefd=False) as writer:
        writer.write(data)
    return buffer.getvalue()


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "zstd": zstd_with_size,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
}

EXTENSIONS = {"gzip": ".gz", "zstd": ".zst", "bzip2": ".bz2", "xz": ".xz"}


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_magic_bytes_are_recognised_whatever_the_name(compression: str) -> None:
    packed = COMPRESSORS[compression](PAYLOAD)
    assert compression_by_magic(packed) == compression
    assert decompress(packed, "refs.json") == PAYLOAD
    assert decompress(packed, "refs") == PAYLOAD


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_extension_and_magic_together(compression: str) -> None:
    name = "s3://bucket/refs.json" + EXTENSIONS[compression]
    assert compression_by_name(name) == compression
    assert decompress(COMPRESSORS[compression](PAYLOAD), name) == PAYLOAD


def test_magic_wins_over_a_misleading_extension() -> None:
    assert decompress(zstd_with_size(PAYLOAD), "refs.json.gz") == PAYLOAD


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("refs.json.gz", "gzip"),
        ("REFS.JSON.GZ", "gzip"),
        ("refs.json.zst", "zstd"),
        ("refs.json.zstd", "zstd"),
        ("refs.json.bz2", "bzip2"),
        ("refs.json.xz", "xz"),
        ("https://host/refs.json.gz?token=a/b.json", "gzip"),
        ("refs.json", None),
        ("refs.gz.json", None),
        ("/dir.gz/refs.json", None),
    ],
)
def test_compression_by_name(name: str, expected: str | None) -> None:
    assert compression_by_name(name) == expected


def test_zstd_frame_without_content_size() -> None:
    packed = zstd_streamed(PAYLOAD)
    assert zstandard.frame_content_size(packed) == -1
    assert decompress(packed, "refs.json.zst") == PAYLOAD


def test_several_zstd_frames_and_a_skippable_frame() -> None:
    skippable = b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"abc"
    packed = skippable + zstd_with_size(PAYLOAD) + zstd_streamed(b"tail")
    assert decompress(packed, "refs.json") == PAYLOAD + b"tail"


def test_several_gzip_members() -> None:
    assert decompress(gzip.compress(b"ab") + gzip.compress(b"cd"), "r.json.gz") == b"abcd"


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
@pytest.mark.parametrize("cut", [1, 8])
def test_truncated_data_is_an_error_naming_the_file(compression: str, cut: int) -> None:
    packed = COMPRESSORS[compression](PAYLOAD)
    if compression == "zstd":
        packed = zstd_streamed(PAYLOAD)
    with pytest.raises(ReferenceFormatError) as caught:
        decompress(packed[:-cut], "/data/refs.json" + EXTENSIONS[compression])
    assert caught.value.source == "/data/refs.json" + EXTENSIONS[compression]
    assert caught.value.key is None
    assert f"corrupt {compression}" in caught.value.problem


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_garbage_after_the_magic_is_an_error(compression: str) -> None:
    packed = COMPRESSORS[compression](PAYLOAD)
    magic_length = {"gzip": 2, "zstd": 4, "bzip2": 4, "xz": 6}[compression]
    broken = packed[:magic_length] + b"\x00garbage that is not compressed" * 4
    with pytest.raises(ReferenceFormatError, match=f"corrupt {compression}"):
        decompress(broken, "refs.json")


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_extension_without_magic_is_an_error(compression: str) -> None:
    name = "refs.json" + EXTENSIONS[compression]
    with pytest.raises(ReferenceFormatError) as caught:
        decompress(b"\x00\x01 not compressed at all", name)
    assert caught.value.source == name
    assert f"not {compression}-compressed" in caught.value.problem


@pytest.mark.parametrize("data", [b'{"a": "b"}', b'  \n{"a": "b"}', b'\xef\xbb\xbf{"a": 1}'])
def test_extension_without_magic_but_already_json_passes_through(data: bytes) -> None:
    # An HTTP server may send refs.json.gz with Content-Encoding: gzip, and the transport
    # then hands over the decompressed text.
    assert decompress(data, "https://host/refs.json.gz") == data


@pytest.mark.parametrize("data", [b"", b"{}", b"[1]", b"not json either", b"BZh0 not bzip2"])
def test_uncompressed_data_is_returned_unchanged(data: bytes) -> None:
    assert decompress(data, "refs.json") is data


@pytest.mark.parametrize(
    ("url", "is_directory", "expected"),
    [
        ("refs.parq", False, True),
        ("refs.parquet", False, True),
        ("s3://bucket/refs.PARQ", False, True),
        ("file:///data/out.parq", False, True),
        ("refs.parq/", False, True),
        ("refs.json.parq", False, False),
        ("refs.json", False, False),
        ("refs.json.zst", False, False),
        ("parq", False, False),
        ("/some/directory", True, True),
        ("/some/refs.json.d", True, True),
    ],
)
def test_is_parquet(url: str, is_directory: bool, expected: bool) -> None:
    assert is_parquet(url, is_directory) is expected


def test_is_parquet_data() -> None:
    assert is_parquet_data(b"PAR1\x15\x04")
    assert not is_parquet_data(b'{"PAR1": 1}')


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/a/b/Refs.JSON", "refs.json"),
        ("s3://bucket/dir/", "dir"),
        ("https://h/r.json.gz?x=1#f", "r.json.gz"),
        ("/local/odd?name.gz", "odd?name.gz"),
    ],
)
def test_file_name(url: str, expected: str) -> None:
    assert file_name(url) == expected


# ----------------------------------------------------------------------------- the size cap

CAP = 64 * 1024


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_a_bomb_stops_one_byte_past_the_cap(compression: str) -> None:
    bomb = COMPRESSORS[compression](b"\x00" * (16 << 20))
    with pytest.raises(ReferenceFormatError) as caught:
        decompress(bomb, "refs.json", CAP)
    assert caught.value.source == "refs.json"
    assert f"inflates ({compression}) to more than 65,536 bytes" in caught.value.problem
    assert "--max-refs-size" in caught.value.problem


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_data_inflating_to_exactly_the_cap_is_accepted(compression: str) -> None:
    payload = PAYLOAD * (CAP // len(PAYLOAD)) + b" " * (CAP % len(PAYLOAD))
    assert len(payload) == CAP
    packed = COMPRESSORS[compression](payload)
    assert decompress(packed, "refs.json", CAP) == payload
    assert decompress(packed + COMPRESSORS[compression](b""), "refs.json", CAP) == payload


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_several_members_count_together_against_the_cap(compression: str) -> None:
    half = COMPRESSORS[compression](b" " * (CAP // 2 + 1))
    with pytest.raises(ReferenceFormatError, match="more than 65,536 bytes"):
        decompress(half + half, "refs.json", CAP)


def test_raw_data_over_the_cap_is_refused() -> None:
    with pytest.raises(ReferenceFormatError, match="is more than 65,536 bytes"):
        decompress(b" " * (CAP + 1), "refs.json", CAP)
    assert len(decompress(b" " * CAP, "refs.json", CAP)) == CAP


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_truncated_data_is_still_refused_under_a_cap(compression: str) -> None:
    packed = COMPRESSORS[compression](PAYLOAD)
    with pytest.raises(ReferenceFormatError, match="corrupt"):
        decompress(packed[:-5], "refs.json", CAP)


def test_inflating_yields_pieces_and_plain_data_as_it_is() -> None:
    big = PAYLOAD * 2000
    pieces = list(inflate(gzip.compress(big), "refs.json.gz"))
    assert len(pieces) > 1
    assert b"".join(pieces) == big
    assert next(inflate(big, "refs.json")) is big
    assert decompress(big, "refs.json") is big  # not copied


def test_the_first_look_sees_the_start_once_and_may_stop_the_rest() -> None:
    seen: list[int] = []
    big = PAYLOAD * (3 * FIRST_LOOK // len(PAYLOAD))
    assert (
        decompress(gzip.compress(big), "refs.json.gz", None, lambda b: seen.append(len(b))) == big
    )
    assert len(seen) == 1
    assert FIRST_LOOK <= seen[0] < len(big)

    def refuse(start: bytearray) -> None:
        raise ReferenceFormatError("refs.json.gz", None, "stop")

    with pytest.raises(ReferenceFormatError, match="stop"):
        decompress(gzip.compress(big), "refs.json.gz", None, refuse)
    small: list[int] = []
    decompress(gzip.compress(PAYLOAD), "refs.json.gz", None, lambda b: small.append(len(b)))
    assert small == []  # nothing more to come: the whole document is parsed as usual
