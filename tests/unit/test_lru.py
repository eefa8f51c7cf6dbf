"""Tests of the one count-bounded LRU."""

from __future__ import annotations

import pytest

from refmount.lru import LRU


def test_the_least_recently_used_entry_goes_first() -> None:
    lru: LRU[str, int] = LRU(2)
    assert lru.put("a", 1) == []
    assert lru.put("b", 2) == []
    assert lru.get("a") == 1  # a is now the most recently used
    assert lru.put("c", 3) == [2]  # so b goes
    assert list(lru) == ["a", "c"]
    assert len(lru) == 2


def test_peek_and_in_leave_the_order_alone_touch_and_get_do_not() -> None:
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert "a" in lru
    assert lru.peek("a") == 1
    assert lru.put("c", 3) == [1]  # a was not made recent by peek or in
    assert lru.touch("b")
    assert not lru.touch("a")
    assert lru.put("d", 4) == [3]


def test_putting_a_kept_key_replaces_its_value_and_makes_it_recent() -> None:
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.put("a", 10) == []
    assert lru.items() == [("b", 2), ("a", 10)]
    assert lru.put("c", 3) == [2]


def test_absent_keys_and_values_that_are_none() -> None:
    lru: LRU[str, int | None] = LRU(3)
    assert lru.get("x") is None
    assert lru.pop("x") is None
    lru.put("none", None)
    assert "none" in lru  # a kept None is told apart from absence by `in`
    assert lru.pop("none") is None
    assert "none" not in lru


def test_items_is_a_copy_to_change_the_lru_while_going_through() -> None:
    lru: LRU[int, int] = LRU(4)
    for number in range(4):
        lru.put(number, number * number)
    for key, value in lru.items():
        if value % 2:
            lru.pop(key)
    assert list(lru) == [0, 2]


def test_capacity_is_at_least_one() -> None:
    assert LRU[str, int](1).capacity == 1
    with pytest.raises(ValueError, match="at least one"):
        LRU[str, int](0)
