"""Tests of counting the virtual chunks of a snapshot by the container that holds them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from refmount.formats.icechunk.containers import container_of, count_virtual_chunks
from tests.support.icechunk_repos import build_repository, open_store, requires_icechunk


def test_a_location_belongs_to_the_longest_prefix_it_starts_with() -> None:
    prefixes = ["s3://bucket/", "s3://bucket/deep/", "file:///data/"]
    assert container_of("s3://bucket/deep/x.nc", prefixes) == "s3://bucket/deep/"
    assert container_of("s3://bucket/x.nc", prefixes) == "s3://bucket/"
    assert container_of("https://host/x.nc", prefixes) is None


class TableStore:
    """A store whose chunk tables are given batches (kinds and paths), or that fails."""

    def __init__(self, tables: dict[str, list[tuple[list[int], list[str]]]]) -> None:
        self.tables = tables

    def array_chunk_iterator(self, path: str, batch_size: int) -> AsyncIterator[Any]:
        async def batches() -> AsyncIterator[Any]:
            if path not in self.tables:
                raise RuntimeError(f"no array {path}\nand a trace")
            for kinds, paths in self.tables[path]:
                n = len(kinds)
                yield (
                    np.zeros((n, 1), np.uint32),
                    np.asarray(kinds, np.uint8),
                    paths,
                    np.zeros(n, np.uint64),
                    np.ones(n, np.uint64),
                    {},
                )

        return batches()


async def test_virtual_chunks_are_counted_by_container_and_others_by_array() -> None:
    store = TableStore(
        {
            "/a": [([2, 1, 2], ["s3://b/x", "chunkid", "s3://b/y"]), ([3, 2], ["", "http://h/z"])],
            "/g/b": [([2], ["s3://b/x"])],
        }
    )
    counts, homeless = await count_virtual_chunks(store, ["a", "g/b"], ["s3://b/", "file:///d/"])
    assert counts == {"s3://b/": 3, "file:///d/": 0}
    assert homeless == {"a": 1}


async def test_a_table_that_cannot_be_read_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="no array /gone"):
        await count_virtual_chunks(TableStore({}), ["gone"], [])


@requires_icechunk
def test_the_chunks_of_a_built_repository(tmp_path: Path) -> None:
    built = build_repository(tmp_path)
    store = open_store(built, built.second)
    arrays = ["obs/temp", "small", "sparse", "virtual/v", "virtual/w"]
    prefixes = [built.container, built.other_container]
    counts, homeless = asyncio.run(count_virtual_chunks(store, arrays, prefixes))  # Icechunk's loop
    assert counts == {built.container: 4, built.other_container: 4}
    assert homeless == {}
