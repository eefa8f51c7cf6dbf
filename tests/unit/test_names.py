"""Tests of key paths and node names: what FUSE accepts, and the compact name table."""

from __future__ import annotations

from array import array

import pytest

from refmount.names import NameTable, key_problem


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


def test_name_table_gives_back_every_name() -> None:
    names = ["", "", "a", "é", "ß", "☃" * 40, "z" * 255]
    table = NameTable(names)
    assert len(table) == len(names)
    assert [table[i] for i in range(len(names))] == names
    with pytest.raises(IndexError):
        table[len(names)]


def test_utf8_runs_are_the_names_encoded() -> None:
    names = ["", "a", "é", "ß", "☃" * 40, "z" * 255, "b"]
    for table in (NameTable(names), NameTable.from_utf8(*utf8_parts(names))):
        for start in range(len(names) + 1):
            for stop in range(start, len(names) + 1):
                run = table.utf8_run(start, stop)
                assert run == [name.encode() for name in names[start:stop]]
                assert all(type(name) is bytes for name in run)


def utf8_parts(names: list[str]) -> tuple[bytearray, array[int]]:
    """The blob (still a ``bytearray``) and the ends that ``from_utf8`` takes."""
    blob = bytearray()
    ends = array("q")
    for name in names:
        blob += name.encode()
        ends.append(len(blob))
    return blob, ends


def test_find_searches_only_the_range_it_is_given() -> None:
    # two directories' children, each sorted by code point: [1, 4) and [4, 7)
    table = NameTable(["", "a", "é", "☃", "a", "b", "z"])
    assert [table.find(name, 1, 4) for name in ("a", "é", "☃")] == [1, 2, 3]
    assert table.find("b", 1, 4) is None  # one of the next directory's names
    assert table.find("a", 4, 7) == 4
    assert table.find("z", 4, 6) is None  # just past the range
    assert table.find("", 1, 4) is None
    assert table.find("\udcff", 1, 7) is None  # a name that is not UTF-8 matches nothing


@pytest.mark.parametrize("count", [0, 1, 2, 3, 17, 100])
def test_find_agrees_with_a_scan(count: int) -> None:
    names = sorted({f"{n * 7919 % 1000}{'é' if n % 3 else ''}" for n in range(count)})
    table = NameTable(["", *names])
    for probe in [*names, "", "0", "zz", "é", "5é0"]:
        expected = names.index(probe) + 1 if probe in names else None
        assert table.find(probe, 1, len(names) + 1) == expected
