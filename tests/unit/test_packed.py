"""Tests of the packed UTF-8 string table: building, reading back, runs and searches."""

from __future__ import annotations

from array import array

import pytest

from refmount.packed import PackedBuilder, PackedStrings


def find(table: PackedStrings, name: str, low: int, high: int) -> int | None:
    """Search for ``name`` as the tree does: encoded, undecodable bytes kept."""
    return table.find(name.encode("utf-8", "surrogateescape"), low, high)


def test_name_table_gives_back_every_name() -> None:
    names = ["", "", "a", "é", "ß", "☃" * 40, "z" * 255]
    table = PackedStrings.of(names)
    assert len(table) == len(names)
    assert [table[i] for i in range(len(names))] == names
    with pytest.raises(IndexError):
        table[len(names)]


def test_utf8_runs_are_the_names_encoded() -> None:
    names = ["", "a", "é", "ß", "☃" * 40, "z" * 255, "b"]
    for table in (PackedStrings.of(names), PackedStrings(*utf8_parts(names))):
        for start in range(len(names) + 1):
            for stop in range(start, len(names) + 1):
                run = table.utf8_run(start, stop)
                assert run == [name.encode() for name in names[start:stop]]
                assert all(type(name) is bytes for name in run)


def utf8_parts(names: list[str]) -> tuple[bytearray, array[int]]:
    """The blob (still a ``bytearray``) and the ends that a table can be made of."""
    blob = bytearray()
    ends = array("q")
    for name in names:
        blob += name.encode()
        ends.append(len(blob))
    return blob, ends


def test_find_searches_only_the_range_it_is_given() -> None:
    # two directories' children, each sorted by code point: [1, 4) and [4, 7)
    table = PackedStrings.of(["", "a", "é", "☃", "a", "b", "z"])
    assert [find(table, name, 1, 4) for name in ("a", "é", "☃")] == [1, 2, 3]
    assert find(table, "b", 1, 4) is None  # one of the next directory's names
    assert find(table, "a", 4, 7) == 4
    assert find(table, "z", 4, 6) is None  # just past the range
    assert find(table, "", 1, 4) is None
    assert find(table, "\udcff", 1, 7) is None  # a name that is not UTF-8 matches nothing


@pytest.mark.parametrize("count", [0, 1, 2, 3, 17, 100])
def test_find_agrees_with_a_scan(count: int) -> None:
    names = sorted({f"{n * 7919 % 1000}{'é' if n % 3 else ''}" for n in range(count)})
    table = PackedStrings.of(["", *names])
    for probe in [*names, "", "0", "zz", "é", "5é0"]:
        expected = names.index(probe) + 1 if probe in names else None
        assert find(table, probe, 1, len(names) + 1) == expected


def test_a_builder_appends_one_by_one_or_in_bulk_and_freezes() -> None:
    builder = PackedBuilder()
    builder.append(b"a")
    builder.extend([b"", "é".encode(), b"zz"])
    assert len(builder) == 4
    assert [builder.utf8(i) for i in range(4)] == [b"a", b"", "é".encode(), b"zz"]
    assert list(builder) == ["a", "", "é", "zz"]
    assert builder.utf8_run(1, 3) == [b"", "é".encode()]
    table = builder.freeze()
    assert list(table) == ["a", "", "é", "zz"]
    assert len(builder) == 0
    assert list(builder) == []


def test_a_table_shares_the_builders_memory_until_compacted() -> None:
    builder = PackedBuilder()
    builder.extend([b"a", b"b"])
    table = builder.table()
    assert [table[0], table[1]] == ["a", "b"]
    assert all(type(name) is bytes for name in table.utf8_run(0, 2))
    assert type(table.utf8(1)) is bytes
    table.compact()
    assert list(table) == ["a", "b"]


def test_extend_from_copies_a_run_of_another_builder() -> None:
    source = PackedBuilder()
    source.extend([b"x", b"yy", b"zzz", b"w"])
    target = PackedBuilder()
    target.append(b"head")
    target.extend_from(source, 1, 3)
    target.extend_from(source, 2, 2)  # nothing
    target.extend_from(source, 0, 1)
    assert list(target) == ["head", "yy", "zzz", "x"]


def test_replace_run_reorders_strings_in_place() -> None:
    builder = PackedBuilder()
    builder.extend([b"a", b"dd", b"c", b"bbb", b"e"])
    block = builder.utf8_run(1, 4)
    builder.replace_run(1, 4, sorted(block))
    assert list(builder) == ["a", "bbb", "c", "dd", "e"]


def test_bisections_over_a_sorted_range() -> None:
    table = PackedStrings.of(["b", "d", "d", "f"])
    assert [table.bisect_left(probe.encode()) for probe in "abdeg"] == [0, 0, 1, 3, 4]
    assert [table.bisect_right(probe.encode()) for probe in "abdeg"] == [0, 1, 3, 3, 4]
    assert table.bisect_right(b"d", 0, 2) == 2
    builder = PackedBuilder()
    builder.extend([b"b", b"d"])
    assert builder.bisect_left(b"c") == 1


def test_a_lone_surrogate_comes_back_as_it_went_in() -> None:
    table = PackedStrings.of(["a\ud800b"])
    assert table[0] == "a\ud800b"
    assert list(table) == ["a\ud800b"]
