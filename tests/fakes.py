"""Test doubles that stand in for refmount's I/O seams in unit tests."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from refmount.model import ChunkGrid, ChunkRanges, Range, Reference, Whole, reference_length


@dataclass
class LocalSource:
    """A ``ReferenceSource`` over a local file or directory that counts what it reads."""

    path: Path
    reads: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return str(self.path)

    @property
    def base_url(self) -> str:
        return str(self.path.parent)

    def is_directory(self) -> bool:
        return self.path.is_dir()

    def names(self, relative: str = "") -> list[str] | None:
        directory = self.path / relative if relative else self.path
        return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []

    def read(self, relative: str = "") -> bytes:
        self.reads.append(relative)
        target = self.path / relative if relative else self.path
        if not target.is_file():
            raise FileNotFoundError(posixpath.join(str(self.path), relative))
        return target.read_bytes()


@dataclass
class MemoryTarget:
    """A reader ``Storage`` over in-memory target objects that counts requests and can fail them.

    ``truncate`` serves an object shorter than it is; ``failing`` URLs raise a permanent
    ``TargetError``; ``flaky[url] = n`` fails the next ``n`` requests with a retryable one;
    ``ignore_range`` URLs answer every range with the whole object, like an HTTP server that
    ignores Range; ``gate`` (a ``trio.Event``) holds every request until it is set;
    ``at_hand`` URLs are answered by ``read_now`` (logged in ``immediate``) without a request.
    """

    objects: dict[str, bytes] = field(default_factory=dict)
    ranges: list[tuple[str, int, int]] = field(default_factory=list)
    sizes: list[str] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)
    flaky: dict[str, int] = field(default_factory=dict)
    ignore_range: set[str] = field(default_factory=set)
    truncate: dict[str, int] = field(default_factory=dict)
    gate: object | None = None
    at_hand: set[str] = field(default_factory=set)
    immediate: list[tuple[str, int, int]] = field(default_factory=list)

    def _fail(self, url: str) -> None:
        from refmount.errors import TargetReadError

        if self.flaky.get(url, 0) > 0:
            self.flaky[url] -= 1
            raise TargetReadError(url, "injected 503", retryable=True)
        if url in self.failing or url not in self.objects:
            raise TargetReadError(url, "injected failure")

    async def read_range(self, url: str, start: int, end: int) -> bytes:
        self.ranges.append((url, start, end))
        if self.gate is not None:
            await self.gate.wait()  # type: ignore[attr-defined]
        self._fail(url)
        data = self.objects[url][: self.truncate.get(url)]
        return data if url in self.ignore_range else data[start:end]

    async def size(self, url: str) -> int:
        self.sizes.append(url)
        self._fail(url)
        return len(self.objects[url])

    def read_now(self, url: str, start: int, end: int) -> bytes | None:
        """Answer at once for URLs in ``at_hand`` (as local files in the page cache are)."""
        if url not in self.at_hand:
            return None
        self.immediate.append((url, start, end))
        return self.objects[url][: self.truncate.get(url)][start:end]


@dataclass
class DictReferences:
    """A ``ReferenceSet`` from dicts; ``chunks[g][i]`` serve the grids, ``loaded`` marks which
    chunks answer without I/O, and ``chunk_calls`` records every ``chunk`` call."""

    explicit: dict[str, Reference] = field(default_factory=dict)
    grid_list: list[ChunkGrid] = field(default_factory=list)
    chunks: dict[int, dict[int, Reference]] = field(default_factory=dict)
    loaded: bool = True
    chunk_calls: list[tuple[int, int]] = field(default_factory=list)
    broken: set[tuple[int, int]] = field(default_factory=set)

    @property
    def source(self) -> str:
        return "refs.test"

    def keys(self) -> Iterable[str]:
        return self.explicit.keys()

    def get(self, key: str) -> Reference | None:
        return self.explicit.get(key)

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        return [reference_length(self.explicit.get(prefix + name.decode())) for name in names]

    @property
    def grids(self) -> Sequence[ChunkGrid]:
        return self.grid_list

    def chunk_is_loaded(self, grid: int, index: int) -> bool:
        return self.loaded

    def chunk_sizes(self, grid: int, start: int, stop: int) -> list[int | None] | None:
        if not self.loaded:
            return None
        sizes: list[int | None] = []
        for index in range(start, stop):
            reference = self.chunks.get(grid, {}).get(index)
            if (grid, index) in self.broken or isinstance(reference, Whole):
                sizes.append(None)
            elif reference is None:
                sizes.append(-1)
            else:
                sizes.append(
                    reference.length if isinstance(reference, Range) else len(reference.data)
                )
        return sizes

    def skip_absent(self, grid: int, start: int, stop: int, *, load: bool) -> int:
        if not self.loaded and not load:
            return start
        present = [i for i in self.chunks.get(grid, {}) if start <= i < stop]
        present += [i for g, i in self.broken if g == grid and start <= i < stop]
        return min(present, default=stop)

    def chunk_ranges(self, grid: int, start: int, stop: int) -> dict[str, ChunkRanges]:
        found: dict[str, ChunkRanges] = {}
        if not self.loaded:
            return found
        for index in range(start, stop):
            reference = self.chunks.get(grid, {}).get(index)
            if (
                (grid, index) not in self.broken
                and isinstance(reference, Range)
                and reference.length > 0
            ):
                ranges = found.setdefault(reference.url, ChunkRanges())
                ranges.offsets.append(reference.offset)
                ranges.lengths.append(reference.length)
        return found

    def chunk(self, grid: int, index: int) -> Reference | None:
        from refmount.errors import ReferenceFormatError

        self.chunk_calls.append((grid, index))
        if (grid, index) in self.broken:
            raise ReferenceFormatError("refs.test/x/refs.0.parq", "x/0", "injected corruption")
        return self.chunks.get(grid, {}).get(index)


@dataclass
class RaisingTarget(MemoryTarget):
    """A ``MemoryTarget`` whose ``raises[url]`` error (a ``TargetError``) answers every request
    for that URL; counts them in ``ranges`` and ``sizes`` like its parent."""

    raises: dict[str, Exception] = field(default_factory=dict)

    async def read_range(self, url: str, start: int, end: int) -> bytes:
        if url in self.raises:
            self.ranges.append((url, start, end))
            raise self.raises[url]
        return await super().read_range(url, start, end)

    async def size(self, url: str) -> int:
        if url in self.raises:
            self.sizes.append(url)
            raise self.raises[url]
        return await super().size(url)
