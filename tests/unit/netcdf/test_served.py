"""The file as served: laid out once in a thread, metadata from memory, chunks through the
read path, and every failure an error naming the chunk, never wrong or missing bytes."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numcodecs
import numpy as np
import pytest
import trio
import trio.testing

from refmount.config import ReadConfig, RetryConfig
from refmount.errors import ShortReadError, TargetError
from refmount.model import Range, Reference
from refmount.netcdf.chunks import Chunks
from refmount.netcdf.layout import Layout, lay_out
from refmount.netcdf.schema import schema_of
from refmount.netcdf.served import Decoding, LayoutError, NetcdfFile, open_netcdf
from refmount.read.reader import Reader
from tests.fakes import DictReferences, MemoryTarget
from tests.unit.netcdf.conftest import CACHE, TEMP, TIME, URL, document, make_set, zarray
from tests.unit.netcdf.test_layout import image


def served(
    references: DictReferences, target: MemoryTarget, **options: object
) -> tuple[NetcdfFile, bytes]:
    """The served file over ``target``, and the file it must read as."""
    schema = schema_of(references, "root")
    expected = image(lay_out(schema, Chunks(references).lengths), schema, references, target)
    reader = Reader(target, ReadConfig(cache_size=CACHE), RetryConfig(retries=0))
    file = open_netcdf("set.nc", references, reader, budget=CACHE, eager=False)
    return file, expected


async def test_reads_of_any_size_and_offset_equal_the_file() -> None:
    file, expected = served(*make_set())
    assert file.size_now() is None  # nothing laid out before the first question
    assert await file.size() == len(expected)
    assert file.size_now() == len(expected)
    for step in (1, 7, 4096, 131072):
        got = bytearray()
        while len(got) < len(expected):
            got += await file.read(len(got), step)
        assert bytes(got) == expected, step
    assert await file.read(len(expected), 10) == b""
    assert bytes(await file.read(len(expected) - 3, 10)) == expected[-3:]


async def test_concurrent_first_questions_share_one_build() -> None:
    references, target = make_set()
    schema = schema_of(references, "root")
    built: list[Layout] = []
    gate = trio.Event()

    def build() -> Layout:
        trio.from_thread.run_sync(lambda: None)  # in a worker thread
        layout = lay_out(schema, Chunks(references).lengths)
        built.append(layout)
        return layout

    reader = Reader(target, ReadConfig(cache_size=CACHE))
    file = NetcdfFile("x.nc", schema, Chunks(references), reader, source="s", build=build)
    sizes: list[int] = []

    async def ask() -> None:
        await gate.wait()
        sizes.append(await file.size())

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert len(built) == 1
    assert len(set(sizes)) == 1


async def test_a_failing_chunk_is_an_error_naming_its_key_and_url() -> None:
    references, target = make_set()
    file, expected = served(references, target)
    target.failing.add(URL)
    temp = references.explicit["temp/1.0"]
    start = expected.index(target.objects[URL][temp.offset : temp.offset + temp.length])  # type: ignore[union-attr]
    with pytest.raises(TargetError) as raised:
        await file.read(start, 10)
    assert raised.value.key == "temp/1.0"
    assert URL in str(raised.value)
    assert bytes(await file.read(0, 8)) == expected[:8]  # the metadata is still served


async def test_a_chunk_shorter_than_its_place_is_an_error() -> None:
    references, target = make_set()
    file, expected = served(references, target)
    target.truncate[URL] = 100  # inside the time chunk
    time = references.explicit["time/0"]
    start = expected.index(target.objects[URL][time.offset : time.offset + 64])  # type: ignore[union-attr]
    with pytest.raises(ShortReadError) as raised:
        await file.read(start, 64)
    assert raised.value.key == "time/0"


async def test_a_failed_layout_is_an_error_and_tried_again() -> None:
    references, target = make_set()
    schema = schema_of(references, "root")
    attempts: list[int] = []

    def build() -> Layout:
        attempts.append(1)
        if len(attempts) == 1:
            raise LayoutError("refs.test", "cannot lay out the netCDF file: injected")
        return lay_out(schema, Chunks(references).lengths)

    reader = Reader(target, ReadConfig(cache_size=CACHE))
    file = NetcdfFile("x.nc", schema, Chunks(references), reader, source="s", build=build)
    with pytest.raises(LayoutError, match="injected"):
        await file.size()
    assert await file.size() > 0
    assert len(attempts) == 2


async def test_a_set_whose_layout_could_exceed_the_budget_is_refused() -> None:
    references, target = make_set()
    reader = Reader(target, ReadConfig(cache_size=CACHE))
    file = open_netcdf("x.nc", references, reader, budget=100, eager=False)
    with pytest.raises(LayoutError, match="over the cache budget"):
        await file.size()


def test_eager_lays_out_at_once() -> None:
    references, target = make_set()
    reader = Reader(target, ReadConfig(cache_size=CACHE))
    file = open_netcdf("x.nc", references, reader, budget=CACHE, eager=True)
    assert file.size_now()


async def test_arrays_only_the_decoded_view_decodes_are_read_decoded(tmp_path: Path) -> None:
    from refmount.decode.reader import DecodingReader
    from refmount.decode.view import DecodedReferences, plan

    references, target = make_set(temp={"filters": None, "compressor": {"id": "zstd"}})
    pieces = [numcodecs.Zstd().encode(TEMP[i : i + 2].tobytes()) for i in (0, 2)]
    target.objects["memory://zstd"] = pieces[0] + pieces[1]
    references.explicit["temp/0.0"] = Range("memory://zstd", 0, len(pieces[0]))
    references.explicit["temp/1.0"] = Range("memory://zstd", len(pieces[0]), len(pieces[1]))
    reader = Reader(target, ReadConfig(cache_size=CACHE), RetryConfig(retries=0))
    decisions = plan(references, CACHE)
    decoding = Decoding(DecodedReferences(references, decisions), DecodingReader(reader, decisions))
    file = open_netcdf("x.nc", references, reader, budget=CACHE, eager=False, decoding=decoding)
    size = await file.size()
    path = tmp_path / "x.nc"
    path.write_bytes(bytes(await file.read(0, size)))
    with netCDF4.Dataset(path) as ds:
        np.testing.assert_array_equal(ds["temp"][...], TEMP)
        np.testing.assert_array_equal(ds["time"][...], TIME)
        assert ds["temp"].filters()["zlib"] is False


async def test_reading_in_order_fetches_the_following_chunks_together() -> None:
    values = np.arange(32 * 1024, dtype="<f4")
    url = "memory://many.bin"
    keys: dict[str, Reference] = {
        ".zgroup": document({"zarr_format": 2}),
        "v/.zarray": zarray([32 * 1024], [1024], "<f4"),
        "v/.zattrs": document({"_ARRAY_DIMENSIONS": ["n"]}),
    }
    for index in range(32):
        keys[f"v/{index}"] = Range(url, index * 4096, 4096)
    target = MemoryTarget({url: values.tobytes()})
    references = DictReferences(keys)
    reader = Reader(target, ReadConfig(cache_size=CACHE), RetryConfig(retries=0))
    file = open_netcdf("many.nc", references, reader, budget=CACHE, eager=True)
    size = await file.size()
    got = bytearray()
    async with reader.running():
        while len(got) < size:
            got += await file.read(len(got), 8192)
            await trio.testing.wait_all_tasks_blocked()
    schema = schema_of(references, "root")
    assert bytes(got) == image(
        lay_out(schema, Chunks(references).lengths), schema, references, target
    )
    assert len(target.ranges) < 8  # not one request per chunk: runs of them
    assert sum(end - start for _, start, end in target.ranges) == values.nbytes  # each once
