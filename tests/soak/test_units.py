"""Sizes and durations as refmount's options write them."""

from __future__ import annotations

import pytest

from soak.units import GIB, KIB, MIB, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512", 512),
        ("4K", 4 * KIB),
        ("64M", 64 * MIB),
        ("64MiB", 64 * MIB),
        ("64mb", 64 * MIB),
        (" 1.5G ", int(1.5 * GIB)),
        ("100B", 100),
    ],
)
def test_sizes_take_binary_units_in_any_spelling(text: str, size: int):
    assert parse_size(text) == size


def test_a_size_that_is_no_number_is_refused():
    with pytest.raises(ValueError, match="could not convert"):
        parse_size("lots")


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10.0), ("10", 10.0), ("500ms", 0.5)])
def test_durations_are_seconds_or_milliseconds(text: str, seconds: float):
    assert parse_duration(text) == seconds
