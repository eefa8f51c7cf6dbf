"""Tests of key paths and node names: what FUSE accepts."""

from __future__ import annotations

import pytest

from refmount.names import key_problem


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("", "empty key"),
        ("/lead", "starts with '/'"),
        ("trail/", "ends with '/'"),
        ("a//b", "empty path component"),
        (".", "'.' path component"),
        ("a/../b", "'..' path component"),
        ("nul\x00byte", "NUL"),
        ("x" * 256, "256 bytes long"),
        ("\ud800", "not valid UTF-8"),
    ],
)
def test_keys_fuse_cannot_represent(key: str, fragment: str) -> None:
    problem = key_problem(key)
    assert problem is not None
    assert fragment in problem


def test_longest_name_is_accepted() -> None:
    assert key_problem("é" * 127) is None  # 254 bytes
    assert key_problem("x" * 255) is None
