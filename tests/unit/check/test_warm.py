"""Tests of warming: which references a set's key prefixes select, and reading each once,
in steps, a failure named by its key."""

from __future__ import annotations

from collections.abc import Iterator

from refmount.check.warm import STEP, references_under, warm
from refmount.errors import TargetReadError
from refmount.model import ChunkGrid, Inline, Range, Reference, Whole
from tests.fakes import DictReferences


def test_the_prefixes_select_explicit_keys_and_present_chunks() -> None:
    references = DictReferences(
        {"a/.zarray": Inline(b"{}"), "a/x": Range("u", 0, 1), "b/y": Whole("w")},
        [ChunkGrid("g", (4,), ".")],
        {0: {1: Range("v", 10, 5), 3: Inline(b"i")}},
    )
    everything = dict(references_under(references, []))
    assert everything == {"a/x": Range("u", 0, 1), "b/y": Whole("w"), "g/1": Range("v", 10, 5)}
    assert dict(references_under(references, ["g/"])) == {"g/1": Range("v", 10, 5)}
    assert dict(references_under(references, ["a/", "b"])).keys() == {"a/x", "b/y"}


async def test_every_reference_is_read_once_in_steps_and_failures_are_named() -> None:
    asked: list[tuple[str, int, int]] = []

    async def read_range(url: str, start: int, end: int) -> bytes:
        if url == "bad":
            raise TargetReadError(url, "404")
        asked.append((url, start, end))
        return b""

    async def size_of(url: str) -> int:
        return STEP + 3

    found: Iterator[tuple[str, Reference]] = iter(
        [("x", Range("u", 5, 10)), ("y", Whole("w")), ("z", Range("bad", 0, 1))]
    )
    done = await warm(found, read_range, size_of, reads=2)
    assert sorted(asked) == [("u", 5, 15), ("w", 0, STEP), ("w", STEP, STEP + 3)]
    assert (done.references, done.bytes) == (3, 10 + STEP + 3)  # the failed one not counted
    assert done.failures == [("z", "bad: 404")]
