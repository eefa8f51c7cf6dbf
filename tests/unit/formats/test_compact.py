"""The compact references of a JSON set: what is stored comes back, lookups in any order,
known lengths for listings, keys stored twice."""

from __future__ import annotations

import random

import pytest

from refmount.formats.compact import CompactReferences
from refmount.model import Inline, Range, Reference, Whole


def compact_examples() -> dict[str, Reference]:
    return {
        "z/1": Range("s3://b/k", 5, 10),
        "a": Inline(b"hello"),
        "é/ß": Whole("https://h/x"),
        "\udc80odd": Inline(b""),  # a lone surrogate: kept by the loader, refused by the tree
        "a/b": Range("s3://b/k", 2**62, 1),
        "m": Inline(bytes(range(256))),
    }


@pytest.mark.parametrize("frozen", [False, True])
def test_compact_references_give_back_what_was_stored(frozen: bool) -> None:
    examples = compact_examples()
    compact = CompactReferences()
    for key, reference in examples.items():
        compact.put(key, reference)
    if frozen:
        assert compact.freeze() is compact
    assert list(compact) == list(examples)  # the order they were stored in
    assert len(compact) == len(examples)
    assert dict(compact) == examples
    for key, reference in examples.items():
        assert compact.get(key) == reference
        assert key in compact
    for missing in ("", "b", "z", "z/0", "z/10", "zz", "\uffff", "a/b/c", "\ud800"):
        assert compact.get(missing) is None
        assert missing not in compact
    with pytest.raises(KeyError):
        compact["nope"]


@pytest.mark.parametrize("walk", ["stored", "sorted", "reversed", "shuffled", "interleaved"])
def test_frozen_lookups_in_any_order_find_every_key(walk: str) -> None:
    stored = [f"d/{n}" for n in range(300)] + [f"d/{n}/x" for n in range(0, 300, 7)] + ["a"]
    compact = CompactReferences(unique_keys=True)
    for number, key in enumerate(stored):
        compact.put_range(key, "/t", number, 1)
    compact.freeze()
    keys = {
        "stored": stored,
        "sorted": sorted(stored),
        "reversed": sorted(stored, reverse=True),
        "shuffled": random.Random(5).sample(stored, len(stored)),
        "interleaved": [k for pair in zip(stored, sorted(stored), strict=True) for k in pair],
    }[walk]
    for key in keys:
        reference = compact.get(key)
        assert isinstance(reference, Range), key
        assert reference.offset == stored.index(key)
        assert compact.get(key + "!") is None


@pytest.mark.parametrize("frozen", [False, True])
def test_known_lengths_without_building_the_reference(frozen: bool) -> None:
    compact = CompactReferences()
    for key, reference in compact_examples().items():
        compact.put(key, reference)
    if frozen:
        compact.freeze()
    assert compact.known_lengths("", [b"a", b"m", b"nope"]) == [5, 256, None]
    assert compact.known_lengths("z/", [b"0", b"1"]) == [None, 10]
    # a whole file: its size takes the target
    assert compact.known_lengths("\u00e9/", ["\u00df".encode()]) == [None]


@pytest.mark.parametrize("stored_order", ["sorted", "shuffled"])
@pytest.mark.parametrize("frozen", [False, True])
def test_known_lengths_of_a_listing_match_each_key(stored_order: str, frozen: bool) -> None:
    # A directory's files with deeper keys and other directories' keys between them, some
    # names asked for that have no key, whole files among them: as a listing asks.
    keys = [f"d/{n}" for n in range(0, 400, 2)] + [f"d/{n}/x" for n in range(0, 400, 9)]
    keys += ["a", "d", "d0", "e/1", "d/\u00e9", "d/.zarray"]
    if stored_order == "shuffled":
        keys = random.Random(3).sample(keys, len(keys))
    else:
        keys.sort()
    compact = CompactReferences(unique_keys=True)
    for number, key in enumerate(keys):
        if number % 11 == 5:
            compact.put(key, Whole("/w"))
        else:
            compact.put_range(key, "/t", 0, number + 1)
    if frozen:
        compact.freeze()
    names = sorted({f"{n}".encode() for n in range(400)} | {b".zarray", "\u00e9".encode()})
    for asked in (names, names[::-1], random.Random(4).sample(names, 150), names[190:]):
        expected = []
        for name in asked:
            reference = compact.get("d/" + name.decode())
            expected.append(reference.length if isinstance(reference, Range) else None)
        assert compact.known_lengths("d/", asked) == expected


def test_compact_references_share_one_url_string() -> None:
    compact = CompactReferences(unique_keys=True)
    url = "s3://bucket/" + "x" * 50
    for index in range(100):
        compact.put_range(f"k{index}", url, index, 1)
    compact.freeze()
    first, last = compact.get("k0"), compact.get("k99")
    assert isinstance(first, Range)
    assert isinstance(last, Range)
    assert first.url is last.url
    assert (last.offset, last.length) == (99, 1)


def test_a_key_stored_again_keeps_its_place_and_takes_the_new_value() -> None:
    compact = CompactReferences()
    compact.put("b", Inline(b"1"))
    compact.put("a", Inline(b"2"))
    compact.put("b", Whole("/x"))
    assert list(compact.freeze()) == ["b", "a"]
    assert compact.get("b") == Whole("/x")


def test_unique_keys_need_expect_duplicates_to_replace() -> None:
    compact = CompactReferences(unique_keys=True)
    compact.put("a", Inline(b"1"))
    compact.put("é\udc80", Inline(b"2"))  # keys are kept encoded: this one comes back whole
    compact.expect_duplicates()
    compact.put("a", Inline(b"3"))
    compact.put("é\udc80", Inline(b"4"))
    assert list(compact) == ["a", "é\udc80"]
    assert dict(compact.freeze()) == {"a": Inline(b"3"), "é\udc80": Inline(b"4")}


def test_frozen_references_refuse_new_keys() -> None:
    compact = CompactReferences().freeze()
    assert len(compact) == 0
    assert compact.get("a") is None
    with pytest.raises(RuntimeError):
        compact.put("a", Inline(b""))


@pytest.mark.parametrize("sorted_keys", [True, False])
def test_binary_search_over_sorted_and_unsorted_keys(sorted_keys: bool) -> None:
    keys = [f"d/{i}" for i in range(1000)]
    keys = sorted(keys) if sorted_keys else keys[::-1]
    compact = CompactReferences(unique_keys=True)
    for index, key in enumerate(keys):
        compact.put_range(key, "/t", index, 1)
    compact.freeze()
    for index, key in enumerate(keys):
        assert compact.get(key) == Range("/t", index, 1)
    assert compact.get("d/1000") is None
    assert compact.get("d/") is None
