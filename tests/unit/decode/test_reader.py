"""The decoding reader: decoded chunk bytes through a real reader, one decode per chunk,
decoding ahead of in-order reads, and errors."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import trio
import trio.testing

from refmount.config import MIB, ReadConfig
from refmount.decode.reader import DecodeError, DecodingReader
from refmount.decode.view import DecodedReferences, plan
from refmount.errors import RecentFailureError
from refmount.model import Inline, Range
from refmount.read.failures import FAILED_RANGE_SECONDS
from refmount.read.reader import Reader
from tests.unit.decode.conftest import CACHE, VALUES, make_set


async def test_chunks_read_decoded_little_endian() -> None:
    references, target = make_set()
    decisions = plan(references, CACHE)
    reader = DecodingReader(Reader(target, ReadConfig(cache_size=CACHE)), decisions)
    view = DecodedReferences(references, decisions)
    chunk = view.get("x/1.0")
    assert chunk is not None
    assert await reader.size("x/1.0", chunk) == 48
    data = bytes(await reader.read("x/1.0", chunk, 0, 4096))
    np.testing.assert_array_equal(np.frombuffer(data, "<f4"), VALUES[2:].ravel())
    assert bytes(await reader.read("x/1.0", chunk, 8, 8)) == data[8:16]
    attrs = view.get("x/.zattrs")
    assert attrs is not None
    assert bytes(await reader.read("x/.zattrs", attrs, 0, 100)) == attrs.data  # type: ignore[union-attr]


async def test_concurrent_reads_share_one_decode_kept_until_all_is_served() -> None:
    references, target = make_set()
    decisions = plan(references, CACHE)
    gate = trio.Event()
    target.gate = gate
    reader = DecodingReader(Reader(target, ReadConfig(cache_size=CACHE)), decisions)
    chunk = references.get("x/0.0")
    assert chunk is not None
    results: list[bytes] = []

    async def read() -> None:
        results.append(bytes(await reader.read("x/0.0", chunk, 0, 8)))

    async with trio.open_nursery() as nursery:
        for _ in range(2):
            nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    expected = VALUES[:2].astype("<f4").tobytes()
    assert results == [expected[:8], expected[:8]]
    assert len(target.ranges) == 1
    assert bytes(await reader.read("x/0.0", chunk, 16, 32)) == expected[16:48]
    assert len(target.ranges) == 1  # from the cache: 16 of its 48 bytes had been served
    await reader.read("x/0.0", chunk, 0, 8)
    assert len(target.ranges) == 2  # every byte went out: it left the cache, as fetched data does


async def test_a_chunk_that_inflates_past_its_size_is_eio_naming_url_and_codec() -> None:
    references, target = make_set()
    bomb = numcodecs.Zlib().encode(b"\0" * (4 * MIB))
    target.objects["memory://bomb"] = bytes(bomb)
    references.explicit["x/0.0"] = Range("memory://bomb", 0, len(bomb))
    decisions = plan(references, CACHE)
    reader = DecodingReader(Reader(target, ReadConfig(cache_size=CACHE)), decisions)
    with pytest.raises(DecodeError) as failed:
        await reader.read("x/0.0", references.explicit["x/0.0"], 0, 48)
    assert failed.value.errno == 5
    assert "memory://bomb" in str(failed.value)
    assert "zlib" in str(failed.value)
    assert "inflates past" in str(failed.value)
    good = references.get("x/1.0")
    assert good is not None
    assert len(await reader.read("x/1.0", good, 0, 48)) == 48  # the rest still serves


async def test_a_failed_decode_fails_again_at_once_for_a_second_then_is_tried_again() -> None:
    references, target = make_set()
    bomb = numcodecs.Zlib().encode(b"\0" * (4 * MIB))
    target.objects["memory://bomb"] = bytes(bomb)
    chunk = Range("memory://bomb", 0, len(bomb))
    references.explicit["x/0.0"] = chunk
    now = [100.0]
    reader = DecodingReader(
        Reader(target, ReadConfig(cache_size=CACHE)), plan(references, CACHE), clock=lambda: now[0]
    )
    with pytest.raises(DecodeError):
        await reader.read("x/0.0", chunk, 0, 48)
    fetched = len(target.ranges)
    # the kernel's second ask after a failed read: the same error, nothing fetched or decoded
    with pytest.raises(RecentFailureError) as again:
        await reader.read("x/0.0", chunk, 4096, 48)
    assert again.value.errno == 5
    assert "cannot decode (zlib)" in str(again.value)
    assert len(target.ranges) == fetched
    now[0] += FAILED_RANGE_SECONDS
    with pytest.raises(DecodeError):  # a second later it is tried again
        await reader.read("x/0.0", chunk, 0, 48)


async def test_an_inline_chunk_is_decoded_too() -> None:
    references, target = make_set()
    references.explicit["x/1.0"] = Inline(bytes(numcodecs.Zlib().encode(VALUES[2:].tobytes())))
    decisions = plan(references, CACHE)
    reader = DecodingReader(Reader(target, ReadConfig(cache_size=CACHE)), decisions)
    chunk = references.explicit["x/1.0"]
    assert await reader.size("x/1.0", chunk) == 48
    data = bytes(await reader.read("x/1.0", chunk, 0, 48))
    np.testing.assert_array_equal(np.frombuffer(data, "<f4"), VALUES[2:].ravel())
    assert target.ranges == []


async def test_in_order_reads_get_the_next_chunk_decoded_ahead() -> None:
    references, target = make_set()
    decisions = plan(references, CACHE)
    view = DecodedReferences(references, decisions)
    inner = Reader(target, ReadConfig(cache_size=CACHE))
    reader = DecodingReader(inner, decisions, lookahead=view.chunk_now)
    first, second = references.get("x/0.0"), references.get("x/1.0")
    assert first is not None
    assert second is not None
    async with inner.running():
        await reader.read("x/0.0", first, 0, 24)
        await trio.testing.wait_all_tasks_blocked()  # the next chunk fetched, being decoded
        assert len(target.ranges) == 2
        data = bytes(await reader.read("x/1.0", second, 0, 48))
        assert len(target.ranges) == 2  # served by the decode started ahead
        np.testing.assert_array_equal(np.frombuffer(data, "<f4"), VALUES[2:].ravel())


async def test_out_of_order_reads_decode_nothing_ahead() -> None:
    references, target = make_set(shape=[6, 6])  # three chunks: x/2.0 as x/1.0's bytes
    references.explicit["x/2.0"] = references.explicit["x/1.0"]
    decisions = plan(references, CACHE)
    view = DecodedReferences(references, decisions)
    inner = Reader(target, ReadConfig(cache_size=CACHE))
    reader = DecodingReader(inner, decisions, lookahead=view.chunk_now)
    second = references.get("x/1.0")
    assert second is not None
    async with inner.running():
        await reader.read("x/1.0", second, 0, 24)
        await trio.testing.wait_all_tasks_blocked()
        assert len(target.ranges) == 1
