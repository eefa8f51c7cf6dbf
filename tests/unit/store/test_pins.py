"""Tests of target versions: how pins are read, compared, described and sent."""

from __future__ import annotations

import os
from pathlib import Path

from refmount.store.pins import Pin


def test_pins_describe_and_compare_versions() -> None:
    http = Pin.from_info({"ETag": '"a"', "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT"}, 0)
    assert http.http_condition() == {"If-Match": '"a"'}
    weak = Pin.from_info({"ETag": 'W/"a"', "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT"}, 0)
    assert weak.http_condition() == {"If-Unmodified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"}
    bare = Pin.from_info({"size": 3}, 0)
    assert not bare.known
    assert bare.http_condition() == {}
    assert Pin.from_info({"ETag": '"a"', "size": 1}, 0).same(Pin.from_info({"ETag": '"a"'}, 9))
    assert not http.same(Pin.from_info({"ETag": '"b"'}, 0))
    assert Pin.from_info({"mtime": 5.0, "size": 3}, 0).describe() == "mtime 5.0 size 3"


def test_a_local_file_is_pinned_by_its_mtime_in_nanoseconds_and_size(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    path.write_bytes(b"0123456789")
    os.utime(path, ns=(1_500_000_000_123, 1_500_000_000_123))
    pin = Pin.from_stat(os.stat(path), now=7.0)
    assert (pin.etag, pin.modified, pin.size, pin.checked) == (None, "1500000000123ns", 10, 7.0)
    assert pin.known
    assert pin.describe() == "mtime 1500000000123ns size 10"
    assert pin.http_condition() == {}


def test_etags_compare_by_their_opaque_value_whatever_quoting_an_engine_keeps() -> None:
    assert Pin('"a"', None, 1, 0).same(Pin("a", None, 1, 0))
    assert Pin('W/"a"', None, 1, 0).same(Pin('"a"', None, 1, 0))
    assert not Pin('"a"', None, 1, 0).same(Pin('"ab"', None, 1, 0))
