"""Tests of the pins file: written deterministically, read back, and refused when malformed."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from refmount.errors import ReferenceFormatError
from refmount.store.pin_file import dumps_pins, parse_pins, read_pins
from refmount.store.pins import Pin


def test_a_pins_file_round_trips_sorted_and_unchecked(tmp_path: Path) -> None:
    pins = {
        "s3://b/z.nc": Pin('"e2"', "Mon, 01 Jan 2024 00:00:00 GMT", 20, 5.0),
        "/data/a.nc": Pin(None, "1500000000123ns", 10, 7.0),
    }
    text = dumps_pins("/data/refs.json", pins)
    assert list(json.loads(text)["targets"]) == ["/data/a.nc", "s3://b/z.nc"]
    assert dumps_pins("/data/refs.json", dict(reversed(pins.items()))) == text
    path = tmp_path / "pins.json"
    path.write_text(text)
    read = read_pins(str(path))
    assert set(read) == set(pins)
    for url, pin in pins.items():
        again = read[url]
        assert (again.etag, again.modified, again.size) == (pin.etag, pin.modified, pin.size)
        assert again.checked == -math.inf  # compared with the target at its first use
        assert again.origin == f"{path} was recorded"


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([], "not a pins file"),
        ({"refmount_pins": 2, "targets": {}}, "not a pins file"),
        ({"refmount_pins": 1}, '"targets" must be an object'),
        ({"refmount_pins": 1, "targets": {"u": 3}}, "target u: its version must be an object"),
        ({"refmount_pins": 1, "targets": {"u": {"etag": 3}}}, "etag must be a string or null"),
        ({"refmount_pins": 1, "targets": {"u": {"size": -1}}}, "size must be a non-negative"),
        ({"refmount_pins": 1, "targets": {"u": {"size": True}}}, "size must be a non-negative"),
    ],
)
def test_a_malformed_pins_file_is_refused_naming_the_file(document: object, problem: str) -> None:
    with pytest.raises(ReferenceFormatError, match=problem) as raised:
        parse_pins("pins.json", document)
    assert str(raised.value).startswith("pins.json: ")


def test_a_pins_file_that_is_not_json_too_large_or_not_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    path.write_text("{not json")
    with pytest.raises(ReferenceFormatError, match="not valid JSON"):
        read_pins(str(path))
    path.write_text(dumps_pins("r", {}))
    with pytest.raises(ReferenceFormatError, match="at most 8 bytes"):
        read_pins(str(path), cap=8)
    with pytest.raises(ReferenceFormatError, match="cannot read"):
        read_pins(str(tmp_path / "missing.json"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # never written: opening must not wait for a writer, nor reading
    with pytest.raises(ReferenceFormatError, match="must be a regular file"):
        read_pins(str(fifo))
    with pytest.raises(ReferenceFormatError, match="Is a directory"):
        read_pins(str(tmp_path))
