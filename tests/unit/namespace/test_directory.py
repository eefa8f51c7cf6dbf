"""Tests of one directory while the namespace is built: names in runs, sorted, repeats
reported, files that are also directories hidden."""

from __future__ import annotations

import pytest

from refmount.namespace import directory
from refmount.namespace.directory import BuildDir, Problem


def settled(names: list[str]) -> tuple[BuildDir, list[Problem]]:
    built = BuildDir(None)
    for arrival, name in enumerate(names):
        built.add_file(name.encode(), arrival)
    problems: list[Problem] = []
    built.settle(["d"], problems)
    return built, problems


@pytest.mark.parametrize("small", [False, True])
def test_names_in_any_order_come_out_sorted_once_each(
    small: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if small:
        monkeypatch.setattr(directory, "_BATCH", 3)
        monkeypatch.setattr(directory, "_MERGE_WAYS", 2)
    names = [str(n * 7919 % 101) for n in range(101)] + ["5", "50"]
    built, problems = settled(names)
    assert list(built.file_names()) == sorted(set(names))
    assert sorted(problems) == [(101, "d/5", "duplicate key"), (102, "d/50", "duplicate key")]
    assert built.find(b"50") == sorted(set(names)).index("50")
    assert built.find(b"x") is None


def test_a_lone_file_costs_no_table() -> None:
    built, problems = settled(["only"])
    assert (built.file_count(), built.name(0), problems) == (1, b"only", [])
    assert built.position(b"a") == 0
    assert built.position(b"z") == 1


def test_a_file_that_becomes_a_directory_is_hidden() -> None:
    built = BuildDir(None)
    built.add_file(b"a", 0)
    built.add_file(b"b", 1)
    built.subdirectory("a", 2)
    problems: list[Problem] = []
    built.settle([], problems)
    assert problems == [(2, "a", directory.BOTH)]
    assert list(built.file_names()) == ["b"]
    assert built.listed_ranges() == [(1, 2)]
    assert not built.has_file("a")
