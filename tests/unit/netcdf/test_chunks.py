"""The chunks of the variables: their references and stored lengths, from explicit keys and
from grids."""

from __future__ import annotations

import pytest

from refmount.model import ChunkGrid, Range, Whole
from refmount.netcdf.chunks import Chunks, WholeFileChunk
from refmount.netcdf.schema import Variable, schema_of
from tests.fakes import DictReferences
from tests.unit.netcdf.conftest import URL, make_set, zarray


def variable_of(references: DictReferences, path: str) -> Variable:
    return next(v for v in schema_of(references, "root").variables if v.path == path)


def test_filtered_chunks_are_as_long_as_stored_unfiltered_as_a_whole_chunk() -> None:
    references, _ = make_set()
    chunks = Chunks(references)
    temp = variable_of(references, "temp")
    stored = [references.explicit[f"temp/{i}.0"] for i in (0, 1)]
    assert list(chunks.lengths(temp)) == [(0, stored[0].length), (1, stored[1].length)]  # type: ignore[union-attr]
    assert list(chunks.lengths(variable_of(references, "time"))) == [(0, 64)]
    assert list(chunks.lengths(variable_of(references, "height"))) == [(0, 8)]
    assert chunks.chunk(temp, 1) == stored[1]
    assert chunks.chunk_now(temp, 1) == (True, stored[1])
    assert chunks.key(temp, 1) == "temp/1.0"


def test_absent_chunks_are_skipped() -> None:
    references, _ = make_set()
    del references.explicit["temp/0.0"]
    chunks = Chunks(references)
    assert [index for index, _ in chunks.lengths(variable_of(references, "temp"))] == [1]


def test_a_filtered_whole_file_chunk_cannot_be_laid_out() -> None:
    references, _ = make_set(extra={"temp/1.0": Whole(URL)})
    with pytest.raises(WholeFileChunk, match=r"'temp/1\.0' is a whole-file reference"):
        list(Chunks(references).lengths(variable_of(references, "temp")))


def test_chunks_of_a_grid_are_asked_of_the_grid() -> None:
    grid = ChunkGrid("g", (3,), ".")
    references = DictReferences(
        {"g/.zarray": zarray([6], [2], "<i2", compressor={"id": "zlib", "level": 1})},
        grid_list=[grid],
        chunks={0: {0: Range(URL, 0, 5), 2: Range(URL, 5, 7)}},
    )
    variable = variable_of(references, "g")
    chunks = Chunks(references)
    assert list(chunks.lengths(variable)) == [(0, 5), (2, 7)]
    references.loaded = False
    assert chunks.chunk_now(variable, 2) == (False, None)
    assert chunks.chunk(variable, 2) == Range(URL, 5, 7)
