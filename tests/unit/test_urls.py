"""Target URL resolution: a protocol per URL, relative paths against the reference file."""

from __future__ import annotations

import pytest

from refmount.urls import (
    directory_of,
    icechunk_chunk_key,
    icechunk_chunk_url,
    protocol_of,
    resolve,
)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://bucket/key", "s3"),
        ("https://host/a", "https"),
        ("file:///abs", "file"),
        ("memory://x", "memory"),
        ("gcs+extra.v2://b", "gcs+extra.v2"),
        ("data:text/plain;base64,aGVsbG8=", "data"),
        ("/abs/path", None),
        ("relative/path", None),
        ("C://windows", None),  # one letter: a drive, not a protocol
        ("c:/windows", None),
        ("3s://x", None),
        ("", None),
    ],
)
def test_protocol_of(url: str, expected: str | None) -> None:
    assert protocol_of(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/data/refs.json", "/data"),
        ("/refs.json", "/"),
        ("refs.json", "."),
        ("sub/refs.json", "sub"),
        ("s3://bucket/dir/refs.json", "s3://bucket/dir"),
        ("s3://bucket/refs.json", "s3://bucket"),
        ("s3://bucket", "s3://bucket"),
        ("s3://bucket/dir/", "s3://bucket"),
        ("https://host/a/b/refs.json", "https://host/a/b"),
    ],
)
def test_directory_of(url: str, expected: str) -> None:
    assert directory_of(url) == expected


@pytest.mark.parametrize(
    ("url", "base", "remote_protocol", "expected"),
    [
        # URLs with a protocol are kept as they are, whatever the base or remote protocol.
        ("s3://bucket/key", "/base", None, "s3://bucket/key"),
        ("https://host/a", "/base", "s3", "https://host/a"),
        ("memory://x", "s3://b/dir", None, "memory://x"),
        ("file:///abs/data.bin", "/base", "s3", "file:///abs/data.bin"),
        ("data:text/plain;base64,aGVsbG8=", "/base", None, "data:text/plain;base64,aGVsbG8="),
        # Bare paths are local: absolute kept, relative joined to the reference file's dir.
        ("/abs/data.bin", "/base", None, "/abs/data.bin"),
        ("data.bin", "/base/dir", None, "/base/dir/data.bin"),
        ("./data.bin", "/base/dir", None, "/base/dir/data.bin"),
        ("../data.bin", "/base/dir", None, "/base/data.bin"),
        ("a/./b/../c", "/base", None, "/base/a/c"),
        ("data.bin", ".", None, "data.bin"),
        # file://relative is relative too.
        ("file://data.bin", "/base/dir", None, "/base/dir/data.bin"),
        ("file://../data.bin", "/base/dir", None, "/base/data.bin"),
        # Relative to a remote reference file: joined under its directory.
        ("data.nc", "s3://bucket/dir", None, "s3://bucket/dir/data.nc"),
        ("sub/data.nc", "https://host/a/", None, "https://host/a/sub/data.nc"),
        # remote_protocol turns bare paths into remote URLs; "file"/"local" mean local.
        ("bucket/key", "/base", "s3", "s3://bucket/key"),
        ("bucket/key", "/base", "file", "/base/bucket/key"),
        ("bucket/key", "/base", "local", "/base/bucket/key"),
    ],
)
def test_resolve(url: str, base: str, remote_protocol: str | None, expected: str) -> None:
    assert resolve(url, base, remote_protocol) == expected


def test_resolve_is_independent_of_the_working_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    assert resolve("data.bin", "/refs/dir") == "/refs/dir/data.bin"


def test_chained_url_is_kept() -> None:
    url = "simplecache::s3://bucket/key"
    assert protocol_of(url) == "simplecache"
    assert resolve(url, "/base") == url


def test_parent_directory_against_a_remote_base() -> None:
    assert resolve("../data.nc", "s3://bucket/dir") == "s3://bucket/data.nc"
    assert resolve("./a/../b.nc", "https://host/x/y") == "https://host/x/y/b.nc"


def test_absolute_path_with_a_remote_protocol() -> None:
    assert resolve("/bucket/key", "/base", "s3") == "s3://bucket/key"


def test_file_url_against_a_remote_base_stays_local() -> None:
    assert resolve("file://data.bin", "s3://bucket/dir") == "file://data.bin"


def test_query_strings_are_not_directories() -> None:
    assert directory_of("https://host/a/refs.json?sig=x/y") == "https://host/a"


def test_icechunk_chunk_urls() -> None:
    url = icechunk_chunk_url("M7RFRYZF9M265X5YVQKG", "obs/temp/c/0/1")
    assert url == "icechunk://M7RFRYZF9M265X5YVQKG/obs/temp/c/0/1"
    assert icechunk_chunk_key(url) == "obs/temp/c/0/1"
    assert icechunk_chunk_key("icechunk://SNAPSHOT") is None
    assert icechunk_chunk_key("s3://bucket/obs/temp/c/0/1") is None
