"""The decoded view: which arrays are decoded, rewritten documents, sizes without fetching,
decoded chunk bytes through a real reader, one decode per chunk, and errors."""

from __future__ import annotations

import json
from typing import Any

import numcodecs
import numpy as np
import pytest
import trio
import trio.testing

from refmount.config import MIB, ReadConfig
from refmount.decode.view import DecodedReferences, DecodeError, DecodingReader, Plan, plan
from refmount.errors import RecentFailureError
from refmount.model import ChunkGrid, Inline, Range
from refmount.read.failures import FAILED_RANGE_SECONDS
from refmount.read.reader import Reader
from tests.fakes import DictReferences, MemoryTarget

URL = "memory://data.bin"
CACHE = 64 * MIB


def zarray(**changes: Any) -> Inline:
    meta = {
        "zarr_format": 2,
        "shape": [4, 6],
        "chunks": [2, 6],
        "dtype": ">f4",
        "compressor": {"id": "zlib", "level": 1},
        "filters": None,
        "order": "C",
        "fill_value": float("nan"),
    }
    meta.update(changes)
    return Inline(json.dumps(meta).encode())


VALUES = np.arange(24, dtype=">f4").reshape(4, 6)


def make_set(**changes: Any) -> tuple[DictReferences, MemoryTarget]:
    """An array ``x`` of two zlib chunks in one target object, plus a group and attributes."""
    first = numcodecs.Zlib().encode(VALUES[:2].tobytes())
    second = numcodecs.Zlib().encode(VALUES[2:].tobytes())
    target = MemoryTarget({URL: first + second})
    references = DictReferences(
        {
            ".zgroup": Inline(b'{"zarr_format": 2}'),
            ".zattrs": Inline(b'{"title": "t\\u00e9", "v": NaN}'),
            "x/.zarray": zarray(**changes),
            "x/.zattrs": Inline(b'{"_ARRAY_DIMENSIONS": ["a", "b"]}'),
            "x/0.0": Range(URL, 0, len(first)),
            "x/1.0": Range(URL, len(first), len(second)),
        }
    )
    return references, target


def test_plan_decodes_an_allowed_array_and_rewrites_its_metadata() -> None:
    references, _ = make_set()
    decisions = plan(references, CACHE)
    assert list(decisions.arrays) == ["x"]
    assert decisions.stored == []
    meta = json.loads(decisions.documents["x/.zarray"])
    assert (meta["dtype"], meta["compressor"], meta["fill_value"]) == ("<f4", None, "NaN")
    assert decisions.documents[".zattrs"].decode() == '{"title": "té", "v": "NaN"}'


@pytest.mark.parametrize(
    ("changes", "codec"),
    [
        ({"compressor": {"id": "pickle"}}, "pickle"),
        ({"filters": [{"id": "vlen-utf8"}], "dtype": "|O"}, "dtype"),
        ({"compressor": {"id": "imagecodecs_jpeg"}}, "imagecodecs_jpeg"),
    ],
)
def test_an_undecodable_array_is_served_as_stored_with_a_warning(
    changes: dict[str, Any], codec: str, caplog: pytest.LogCaptureFixture
) -> None:
    references, _ = make_set(**changes)
    decisions = plan(references, CACHE)
    assert decisions.arrays == {}
    assert [(s.path, s.codec) for s in decisions.stored] == [("x", codec)]
    decisions.warn()
    assert "array 'x' is served as stored" in caplog.text
    assert codec in caplog.text
    view = DecodedReferences(references, decisions)
    assert view.get("x/0.0") == references.get("x/0.0")
    served = json.loads(view.get("x/.zarray").data)  # type: ignore[union-attr]
    assert served["compressor"] == json.loads(references.explicit["x/.zarray"].data)["compressor"]  # type: ignore[union-attr]


def test_huge_declared_chunks_are_served_as_stored() -> None:
    references, _ = make_set(chunks=[2**40, 6], shape=[2**40, 6])
    decisions = plan(references, CACHE)
    assert decisions.arrays == {}
    assert "over a quarter of the cache" in decisions.stored[0].reason


def test_sizes_are_known_without_fetching() -> None:
    references, target = make_set()
    decisions = plan(references, CACHE)
    view = DecodedReferences(references, decisions)
    lengths = view.known_lengths("x/", [b".zarray", b"0.0", b"1.0", b"2.0"])
    assert lengths[1:] == [48, 48, None]
    assert lengths[0] == len(decisions.documents["x/.zarray"])
    assert target.ranges == []
    assert target.sizes == []


def test_grid_chunk_sizes_are_decoded_sizes() -> None:
    references, _ = make_set()
    references.grid_list = [ChunkGrid("x", (2, 1), ".")]
    references.chunks = {0: {0: Range(URL, 0, 10)}}
    view = DecodedReferences(references, plan(references, CACHE))
    assert view.chunk_sizes(0, 0, 2) == [48, -1]


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


def test_chunk_keys_are_matched_to_their_array_only() -> None:
    references, _ = make_set(dimension_separator="/")
    decisions: Plan = plan(references, CACHE)
    assert decisions.chunk_array("x/1/0") is decisions.arrays["x"]
    assert decisions.chunk_array("x/2/0") is None
    assert decisions.chunk_array("x/.zattrs") is None
    assert decisions.chunk_array("x/1.0") is None
    assert decisions.chunk_array("y/1/0") is None


def test_consolidated_metadata_is_rewritten_like_the_documents() -> None:
    references, _ = make_set()
    zarray_text = references.explicit["x/.zarray"].data.decode()  # type: ignore[union-attr]
    consolidated = {
        "zarr_consolidated_format": 1,
        "metadata": {
            ".zgroup": {"zarr_format": 2},
            "x/.zarray": json.loads(zarray_text),
            "x/.zattrs": {"scale": float("inf")},
        },
    }
    references.explicit[".zmetadata"] = Inline(json.dumps(consolidated).encode())
    decisions = plan(references, CACHE)
    served = json.loads(decisions.documents[".zmetadata"])["metadata"]
    assert served["x/.zarray"] == json.loads(decisions.documents["x/.zarray"])
    assert served["x/.zattrs"] == {"scale": "Infinity"}


def test_an_array_known_only_from_consolidated_metadata_is_decoded() -> None:
    references, _ = make_set()
    zarray_doc = json.loads(references.explicit.pop("x/.zarray").data)  # type: ignore[union-attr]
    references.explicit[".zmetadata"] = Inline(
        json.dumps({"metadata": {"x/.zarray": json.dumps(zarray_doc)}}).encode()
    )
    decisions = plan(references, CACHE)
    assert list(decisions.arrays) == ["x"]
    served = json.loads(json.loads(decisions.documents[".zmetadata"])["metadata"]["x/.zarray"])
    assert served["compressor"] is None


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


def test_metadata_in_a_target_is_served_as_stored_with_a_warning() -> None:
    references, _ = make_set()
    references.explicit["x/.zarray"] = Range(URL, 0, 10)
    decisions = plan(references, CACHE)
    assert decisions.arrays == {}
    assert [(s.path, s.codec) for s in decisions.stored] == [("x", "metadata")]
    assert DecodedReferences(references, decisions).get("x/.zarray") == Range(URL, 0, 10)


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


def test_chunk_now_finds_explicit_and_loaded_grid_chunks() -> None:
    references, _ = make_set()
    decisions = plan(references, CACHE)
    array = decisions.arrays["x"]
    view = DecodedReferences(references, decisions)
    assert view.chunk_now(array, 1) == ("x/1.0", references.get("x/1.0"))
    del references.explicit["x/1.0"]
    assert view.chunk_now(array, 1) is None
    references.grid_list = [ChunkGrid("x", (2, 1), ".")]
    references.chunks = {0: {1: Range(URL, 5, 7)}}
    view = DecodedReferences(references, decisions)
    assert view.chunk_now(array, 1) == ("x/1.0", Range(URL, 5, 7))
    references.loaded = False
    assert view.chunk_now(array, 1) is None
