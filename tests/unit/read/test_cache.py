"""Tests of the byte-budgeted LRU cache."""

from __future__ import annotations

from refmount.read.cache import ByteCache


def test_keeps_values_within_the_budget_evicting_least_recently_used() -> None:
    cache = ByteCache(10)
    cache.put("a", b"1234")
    cache.put("b", b"1234")
    assert cache.get("a") == b"1234"  # now b is the least recently used
    cache.put("c", b"1234")
    assert cache.get("b") is None
    assert cache.get("a") == b"1234"
    assert cache.get("c") == b"1234"
    assert cache.size == 8
    stats = cache.statistics()
    assert (stats.entries, stats.evictions, stats.hits, stats.misses) == (2, 1, 3, 1)


def test_value_larger_than_the_budget_is_not_kept() -> None:
    cache = ByteCache(4)
    cache.put("small", b"12")
    cache.put("big", b"12345")
    assert cache.get("big") is None
    assert cache.get("small") == b"12"


def test_reserve_makes_room_for_data_in_flight() -> None:
    cache = ByteCache(10)
    cache.put("a", b"12345")
    cache.put("b", b"12345")
    cache.shrink(reserve=3)
    assert cache.get("a") is None
    assert cache.get("b") == b"12345"
    cache.put("c", b"1", reserve=5)
    assert cache.size <= 5


def test_replacing_a_key_does_not_double_count() -> None:
    cache = ByteCache(10)
    cache.put("a", b"123")
    cache.put("a", b"12345")
    assert cache.size == 5
    cache.discard("a")
    cache.discard("a")
    assert cache.size == 0


def test_membership_does_not_count_as_a_hit_or_a_miss() -> None:
    cache = ByteCache(100)
    cache.put("a", b"xyz")
    assert "a" in cache
    assert "b" not in cache
    stats = cache.statistics()
    assert (stats.hits, stats.misses) == (0, 0)


def test_views_of_one_buffer_count_it_once_until_the_last_leaves() -> None:
    cache = ByteCache(100)
    answer = memoryview(bytes(40))
    cache.put("a", answer[:10])
    cache.put("b", answer[10:20])
    assert cache.size == 40  # the whole buffer stays alive, not just the bytes handed out
    cache.discard("a")
    assert cache.size == 40
    cache.put("b", answer[10:20])  # replacing a view by the same does not count it twice
    assert cache.size == 40
    cache.discard("b")
    assert cache.size == 0
    assert cache.statistics().entries == 0


def test_eviction_goes_on_until_memory_is_freed() -> None:
    cache = ByteCache(50)
    answer = memoryview(bytes(30))
    cache.put("a", answer[:10])
    cache.put("b", answer[10:20])
    cache.put("own", b"x" * 10)
    assert cache.size == 40
    # 20 more bytes need 10 freed: evicting "a" frees nothing while "b" keeps the buffer
    cache.put("c", b"y" * 20)
    assert ("a" in cache, "b" in cache, "own" in cache, "c" in cache) == (False, False, True, True)
    assert cache.size == 30
    assert cache.statistics().evictions == 2


def test_a_view_of_a_buffer_larger_than_the_budget_is_not_kept() -> None:
    cache = ByteCache(10)
    cache.put("a", memoryview(bytes(20))[:5])
    assert "a" not in cache
    assert cache.size == 0
