"""Tests of routes: how a target URL is read, worked out once from the URL and the options."""

from __future__ import annotations

import pytest

from refmount.store.options import StorageOptions
from refmount.store.routes import Kind, route_of


@pytest.mark.parametrize(
    ("url", "kind", "host"),
    [
        ("/data/a.nc", Kind.LOCAL, "local"),
        ("file:///data/a.nc", Kind.LOCAL, "file"),
        ("local:///data/a.nc", Kind.LOCAL, "local"),
        ("https://data.example.org/a.nc", Kind.HTTP, "data.example.org"),
        ("http://127.0.0.1:8080/a.nc", Kind.HTTP, "127.0.0.1:8080"),
        ("s3://bucket/a.nc", Kind.S3, "bucket"),
        ("s3a://bucket/a.nc", Kind.S3, "bucket"),
        ("gs://bucket/a.nc", Kind.OTHER, "bucket"),
        ("simplecache::s3://bucket/a.nc", Kind.OTHER, "bucket"),
        ("simplecache::/data/a.nc", Kind.OTHER, "simplecache"),
    ],
)
def test_the_kind_of_read_and_the_host_limit(url: str, kind: Kind, host: str) -> None:
    route = route_of(url, StorageOptions())
    assert route.kind is kind
    assert route.host == host


def test_the_filesystem_instance_is_the_protocol_or_chain_and_the_options_prefix() -> None:
    options = StorageOptions({"https": {}, "https://data.example.org": {"headers": {"a": "b"}}})
    assert route_of("https://data.example.org/x", options).filesystem_key == (
        "https",
        "https://data.example.org",
    )
    assert route_of("https://data.example.org.evil/x", options).filesystem_key == ("https", None)
    assert route_of("/data/a.nc", options).filesystem_key == ("file", None)
    assert route_of("simplecache::s3://b/k", options).filesystem_key == ("simplecache", None)
    assert route_of("simplecache::s3://b/k", options).protocol == "simplecache"
