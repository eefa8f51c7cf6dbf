"""Tests of size and duration parsing."""

from __future__ import annotations

import pytest

from refmount.config import GIB, KIB, MIB, RepositoryVersion, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("64k", 64 * KIB),
        ("512M", 512 * MIB),
        ("1G", GIB),
        ("1.5GiB", GIB * 3 // 2),
        ("2gb", 2 * GIB),
        (" 8 MiB ", 8 * MIB),
    ],
)
def test_sizes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text", ["", "M", "-1", "1X", "1.2.3", "nan", "inf", "1e9", "9" * 400, "8388608T"]
)
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("30", 30.0), ("2.5s", 2.5), ("500ms", 0.5), ("5m", 300.0), ("1h", 3600.0)],
)
def test_durations(text: str, expected: float) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["soon", "", "-1", "nan", "inf", "1e3", "9" * 400, "876001h"])
def test_bad_duration(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_the_largest_values_are_accepted() -> None:
    assert parse_size("8388607T") == 8388607 * 1024**4
    assert parse_duration("876000h") == 876000 * 3600.0


def test_a_repository_version_is_at_most_one_of_branch_tag_and_snapshot() -> None:
    assert RepositoryVersion().describe() == "branch main"
    assert not RepositoryVersion().given
    assert RepositoryVersion(branch="dev").describe() == "branch dev"
    assert RepositoryVersion(tag="v1").describe() == "tag v1"
    assert RepositoryVersion(snapshot="ABC").given
    with pytest.raises(ValueError, match="not --branch and --snapshot"):
        RepositoryVersion(branch="dev", snapshot="ABC")
