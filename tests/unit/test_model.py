"""Tests of the vocabulary: a view over a reference set serves it unchanged unless it says
otherwise."""

from __future__ import annotations

from refmount.model import ChunkGrid, Inline, Range, ReferenceView
from tests.fakes import DictReferences


def test_a_view_that_overrides_nothing_serves_the_set_unchanged() -> None:
    inner = DictReferences(
        {"a/.zarray": Inline(b"{}"), "a/x": Range("u", 0, 3)},
        [ChunkGrid("g", (4,), ".")],
        {0: {1: Range("v", 10, 5), 3: Inline(b"i")}},
    )
    view = ReferenceView(inner)
    assert view.source == inner.source
    assert list(view.keys()) == list(inner.keys())
    assert view.get("a/x") == Range("u", 0, 3)
    assert view.known_lengths("a/", [b"x", b"y"]) == [3, None]
    assert view.grids == inner.grids
    assert view.chunk_is_loaded(0, 1)
    assert view.chunk_sizes(0, 0, 4) == [-1, 5, -1, 1]
    assert view.chunk_ranges(0, 0, 4)["v"].offsets == [10]
    assert view.skip_absent(0, 0, 4, load=False) == 1
    assert view.chunk(0, 3) == Inline(b"i")
    assert inner.chunk_calls == [(0, 3)]
