"""``refmount check``: validate a reference set without mounting it, and summarise it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import trio

from refmount.errors import ReferenceFormatError, RefmountError
from refmount.formats import LoadOptions, load, zarr_meta
from refmount.formats.options import Progress
from refmount.formats.parquet import COLUMN_SETS, ParquetReferenceSet
from refmount.formats.sniff import is_parquet
from refmount.fuse.stats import human_bytes
from refmount.model import Inline, Range, Reference, ReferenceSet, ReferenceSource, Whole
from refmount.namespace.tree import Tree

METADATA_NAMES = frozenset({".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"})
"""Names of zarr metadata documents: keys with these names are never chunks."""

FULL_COLUMNS = COLUMN_SETS[0]
"""The columns every reader of Parquet reference sets knows: path, offset, size, raw."""

SIZE_REQUESTS = 16
"""How many size requests ``--sizes`` keeps in flight at once."""

SizeOf = Callable[[str], Awaitable[int]]
"""Asks a target for its size in bytes (``Store.size``)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the set: the key at fault (None: the set as a whole) and why."""

    key: str | None
    problem: str

    def __str__(self) -> str:
        return self.problem if self.key is None else f"key {self.key!r}: {self.problem}"


@dataclass(frozen=True, slots=True)
class ArrayInfo:
    """One array of the set, from its ``.zarray`` or ``zarr.json``.

    ``grid`` is the number of chunks along each dimension; ``present`` how many chunk keys
    exist (None when not counted: ``--quick`` on a Parquet set).
    """

    path: str
    zarr_format: int
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    grid: tuple[int, ...]
    present: int | None

    @property
    def chunk_count(self) -> int:
        """Return how many chunk keys the array can have."""
        total = 1
        for extent in self.grid:
            total *= extent
        return total


@dataclass(slots=True)
class TargetInfo:
    """One target URL: how many references point into it and how many bytes they span.

    ``size`` is the target's own size, known only when ``--sizes`` asked for it.
    """

    url: str
    first_key: str
    ranges: int = 0
    whole: int = 0
    range_bytes: int = 0
    end: int = 0
    end_key: str = ""
    size: int | None = None

    @property
    def references(self) -> int:
        """Return how many references point into this target."""
        return self.ranges + self.whole

    @property
    def bytes(self) -> int | None:
        """Return the bytes referenced: ranges, plus whole-target references once sized."""
        if self.whole and self.size is None:
            return None
        return self.range_bytes + self.whole * (self.size or 0)


UNREADABLE = "unreadable"
"""``Summary.format`` of a set that could not be read at all (missing, no permission...)."""


@dataclass(slots=True)
class Summary:
    """What ``refmount check`` found out about one reference set."""

    source: str
    format: str
    explicit_keys: int = 0
    chunk_keys: int | None = 0
    chunk_positions: int = 0
    arrays: list[ArrayInfo] = field(default_factory=list)
    targets: dict[str, TargetInfo] = field(default_factory=dict)
    inline: int = 0
    inline_bytes: int = 0
    ranges: int = 0
    range_bytes: int = 0
    whole: int = 0
    whole_bytes: int | None = None
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    malformed: bool = False
    served_as_stored: list[tuple[str, str, str]] | None = None
    """With ``--decode``: the arrays a decoded mount serves as stored (path, codec, reason)."""

    @property
    def ok(self) -> bool:
        """Return True when the set loaded and has no problems."""
        return not self.malformed and not self.problems

    @property
    def total_bytes(self) -> int:
        """Return the bytes referenced by ranges, inline values and sized whole targets."""
        return self.range_bytes + self.inline_bytes + (self.whole_bytes or 0)

    def add(self, key: str, reference: Reference) -> None:
        """Count one reference."""
        match reference:
            case Inline(data):
                self.inline += 1
                self.inline_bytes += len(data)
            case Range(url, offset, length):
                self.ranges += 1
                self.range_bytes += length
                target = self._target(url, key)
                target.ranges += 1
                target.range_bytes += length
                if offset + length > target.end:
                    target.end, target.end_key = offset + length, key
            case Whole(url):
                self.whole += 1
                self._target(url, key).whole += 1

    def problem(self, key: str | None, text: str) -> None:
        """Record a problem once (the same key and text may be reported by two checks)."""
        found = Problem(key, text)
        if found not in self.problems:
            self.problems.append(found)

    def _target(self, url: str, key: str) -> TargetInfo:
        target = self.targets.get(url)
        if target is None:
            target = self.targets[url] = TargetInfo(url, key)
        return target

    def to_json(self) -> dict[str, Any]:
        """Return the summary as JSON-ready values (``refmount check --json``)."""
        return {
            "source": self.source,
            "format": self.format,
            "ok": self.ok,
            "malformed": self.malformed,
            "explicit_keys": self.explicit_keys,
            "chunk_keys": self.chunk_keys,
            "chunk_positions": self.chunk_positions,
            "arrays": [
                {**dataclasses.asdict(array), "chunk_count": array.chunk_count}
                for array in self.arrays
            ],
            "targets": [
                {
                    "url": target.url,
                    "references": target.references,
                    "ranges": target.ranges,
                    "whole": target.whole,
                    "bytes": target.bytes,
                    "size": target.size,
                }
                for target in self.targets.values()
            ],
            "inline": {"count": self.inline, "bytes": self.inline_bytes},
            "ranges": {"count": self.ranges, "bytes": self.range_bytes},
            "whole": {"count": self.whole, "bytes": self.whole_bytes},
            "total_bytes": self.total_bytes,
            "problems": [{"key": p.key, "problem": p.problem} for p in self.problems],
            "warnings": list(self.warnings),
            **(
                {}
                if self.served_as_stored is None
                else {
                    "served_as_stored": [
                        {"array": path, "codec": codec, "reason": reason}
                        for path, codec, reason in self.served_as_stored
                    ]
                }
            ),
        }


def check_references(
    source: ReferenceSource,
    options: LoadOptions,
    *,
    quick: bool = False,
    size_of: SizeOf | None = None,
    scan_progress: Progress | None = None,
    decode_cache: int | None = None,
) -> Summary:
    """Load ``source`` the way a mount does, collecting every problem instead of stopping.

    Values and arrays that the loader would refuse are collected (it runs with
    ``skip_invalid``), then keys the tree cannot hold. Array metadata is validated even in a
    JSON set. Every chunk row of a Parquet set is read unless ``quick``; ``scan_progress``
    is told ``(rows scanned, rows)`` after each record file. With ``size_of``, every target
    is asked for its size, whole-target references get sizes and ranges that end beyond
    their target are problems. A set that cannot be loaded at all is ``malformed``. With
    ``decode_cache`` (the cache size of a ``--decode`` mount), the arrays such a mount would
    serve as stored are listed.
    """
    parquet = is_parquet(source.url, source.is_directory())
    summary = Summary(source.url, "parquet" if parquet else "json")

    def invalid(error: ReferenceFormatError) -> None:
        summary.problem(error.key, error.problem)

    loading = dataclasses.replace(options, skip_invalid=True, on_invalid=invalid)
    try:
        references = load(source, loading)
    except ReferenceFormatError as error:
        summary.malformed = True
        summary.problem(error.key, error.problem)
        return summary
    except OSError as error:
        summary.malformed = True
        summary.format = UNREADABLE  # whatever its name suggests, nothing of it was read
        summary.problem(None, f"cannot read: {error}")
        return summary
    Tree.build(
        references.keys(),
        references.grids,
        source=source.url,
        skip_invalid=True,
        on_invalid=invalid,
    )

    arrays = _arrays(references, summary)
    summary.explicit_keys, present = _count_explicit(
        references, summary, {array.path for array in arrays}
    )
    counted: dict[str, int] | None = present
    if isinstance(references, ParquetReferenceSet):
        counted = None if quick else _scan(references, summary, scan_progress)
        summary.chunk_positions = sum(grid.count for grid in references.grids)
    else:
        summary.chunk_positions = sum(array.chunk_count for array in arrays)
    summary.chunk_keys = None if counted is None else sum(counted.values())
    summary.arrays = [
        dataclasses.replace(a, present=None if counted is None else counted.get(a.path, 0))
        for a in arrays
    ]
    if size_of is not None:
        trio.run(_ask_sizes, summary, size_of)
    if decode_cache is not None:
        from refmount.decode.view import plan  # numcodecs, only when asked

        stored = plan(references, decode_cache).stored
        summary.served_as_stored = [(a.path, a.codec, a.reason) for a in stored]
    return summary


def _arrays(references: ReferenceSet, summary: Summary) -> list[ArrayInfo]:
    """Return the arrays that the set's metadata keys describe; malformed ones are problems."""
    arrays: list[ArrayInfo] = []
    keys = references.keys()  # a ReferenceSet is not a mapping
    for key in keys:
        split = zarr_meta.array_of(key)
        reference = references.get(key)
        if split is None or reference is None:
            continue
        if not isinstance(reference, Inline):
            summary.problem(key, "array metadata is not stored inline: it cannot be checked")
            continue
        try:
            grid = zarr_meta.grid_for_key(key, reference.data, references.source)
        except ReferenceFormatError as error:
            summary.problem(key, error.problem)
            continue
        if grid is None:
            continue  # a zarr v3 group
        document = json.loads(reference.data)
        if split[1] == zarr_meta.ZARRAY:
            chunks, dtype, version = document["chunks"], document.get("dtype"), 2
        else:
            chunks = document["chunk_grid"]["configuration"]["chunk_shape"]
            dtype, version = document.get("data_type"), 3
        arrays.append(
            ArrayInfo(
                grid.array,
                version,
                tuple(document["shape"]),
                tuple(chunks),
                dtype if isinstance(dtype, str) else json.dumps(dtype),
                grid.shape,
                0,
            )
        )
    return sorted(arrays, key=lambda array: array.path)


def _count_explicit(
    references: ReferenceSet, summary: Summary, arrays: set[str]
) -> tuple[int, dict[str, int]]:
    """Count and tally every explicit reference; return the count and chunk keys per array.

    Only a JSON set stores chunks explicitly: a key below an array's path whose name is not
    a metadata document is one of its chunks. The keys of its ``gen`` items kept as chunk
    grids count as explicit keys too (they are written in the file, as templates).
    """
    count = 0
    chunks: dict[str, int] = {}
    deepest = max((path.count("/") for path in arrays), default=0)
    for key, reference in _explicit_references(references):
        count += 1
        summary.add(key, reference)
        array = _array_of_chunk(key, arrays, deepest) if arrays else None
        if array is not None:
            chunks[array] = chunks.get(array, 0) + 1
    return count, chunks


def _explicit_references(references: ReferenceSet) -> Iterator[tuple[str, Reference]]:
    """Yield every explicit key with its reference: stored keys, then (JSON only) the keys
    that ``gen`` items generate as chunk grids."""
    keys = references.keys()  # a ReferenceSet is not a mapping
    for key in keys:
        reference = references.get(key)
        if reference is not None:
            yield key, reference
    if isinstance(references, ParquetReferenceSet):
        return
    for number, grid in enumerate(references.grids):
        for index in range(grid.count):
            chunk = references.chunk(number, index)
            if chunk is not None:
                yield grid.key(index), chunk


def _array_of_chunk(key: str, arrays: set[str], deepest: int) -> str | None:
    """Return the array that ``key`` is a chunk of, or None (metadata, or outside arrays).

    ``deepest`` is the most ``/`` in an array path: only that many leading directories of
    the key are tried, so that a key thousands of directories deep costs no more than a short
    one (each shorter parent as a string would cost the square of the depth).
    """
    parent, _, name = key.rpartition("/")
    if name in METADATA_NAMES:
        return None
    cuts: list[int] = []
    position = -1
    for _ in range(deepest + 1):
        position = parent.find("/", position + 1)
        if position < 0:
            cuts.append(len(parent))
            break
        cuts.append(position)
    for cut in reversed(cuts):
        if parent[:cut] in arrays:
            return parent[:cut]
    return "" if "" in arrays else None


def _scan(
    references: ParquetReferenceSet, summary: Summary, progress: Progress | None
) -> dict[str, int]:
    """Read every record file; count and tally each present chunk, collecting row problems."""
    present: dict[str, int] = {}
    total = sum(grid.count for grid in references.grids)
    done = 0
    size = references.record_size
    for number, grid in enumerate(references.grids):
        found = 0
        for record in references.record_numbers(number):  # those that exist, when listable
            start = record * size
            stop = min(start + size, grid.count)
            try:
                for index in references.chunks_present(number, start, stop):
                    try:
                        reference = references.chunk(number, index)
                    except ReferenceFormatError as error:
                        summary.problem(error.key or grid.key(index), error.problem)
                        continue
                    if reference is not None:
                        found += 1
                        summary.add(grid.key(index), reference)
            except ReferenceFormatError as error:
                summary.problem(error.key, f"{error.source}: {error.problem}")
            except OSError as error:
                summary.problem(None, f"cannot read record {record} of {grid.array!r}: {error}")
            _warn_columns(references, summary, number, record)
            if progress is not None:
                progress(done + stop, total)
        done += grid.count
        present[grid.array] = found
    return present


def _warn_columns(
    references: ParquetReferenceSet, summary: Summary, grid: int, record: int
) -> None:
    """Warn about a record file whose columns are a subset fsspec accepts but others may not."""
    columns = references.record_columns(grid, record)
    if columns is None or frozenset(columns) == FULL_COLUMNS:
        return
    summary.warnings.append(
        f"{references.record_name(grid, record)}: columns are {', '.join(columns)}, not "
        "path, offset, size, raw (fsspec and refmount read it; other readers may not)"
    )


async def _ask_sizes(summary: Summary, size_of: SizeOf) -> None:
    limiter = trio.CapacityLimiter(SIZE_REQUESTS)

    async def ask(target: TargetInfo) -> None:
        async with limiter:
            try:
                target.size = await size_of(target.url)
            except (RefmountError, OSError) as error:
                summary.problem(target.first_key, f"cannot get the size of {target.url}: {error}")

    async with trio.open_nursery() as nursery:
        for target in summary.targets.values():
            nursery.start_soon(ask, target)
    whole_bytes: int | None = 0
    for target in summary.targets.values():
        if target.size is None:
            if target.whole:
                whole_bytes = None
            continue
        if whole_bytes is not None:
            whole_bytes += target.whole * target.size
        if target.end > target.size:
            summary.problem(
                target.end_key,
                f"the range ends at byte {target.end:,} but {target.url} has only "
                f"{target.size:,} bytes",
            )
    summary.whole_bytes = whole_bytes


def format_summary(summary: Summary) -> str:
    """Return a summary as the readable report that ``refmount check`` prints."""
    if summary.format == UNREADABLE:
        lines = [f"{summary.source}: cannot be read, so it cannot be mounted"]
    else:
        kind = "Parquet" if summary.format == "parquet" else "JSON"
        lines = [f"{summary.source}: {kind} reference set"]
    if summary.malformed:
        if summary.format != UNREADABLE:
            lines.append("malformed: it cannot be mounted")
    else:
        keys = f"{summary.explicit_keys:,} explicit"
        if summary.format == "parquet":
            if summary.chunk_keys is None:
                chunks = f"chunks not counted (--quick), {summary.chunk_positions:,} positions"
            else:
                chunks = f"{summary.chunk_keys:,} chunks of {summary.chunk_positions:,} positions"
            keys = f"{keys} (metadata) + {chunks}"
        else:
            keys = f"{keys}, of which {summary.chunk_keys or 0:,} are array chunks"
        lines.append(f"{'keys':<12}{keys}")
        lines.append(f"{'arrays':<12}{len(summary.arrays):,}")
        for array in summary.arrays:
            present = "?" if array.present is None else f"{array.present:,}"
            lines.append(
                f"  {array.path or '(root)'}  v{array.zarr_format}  shape {list(array.shape)}  "
                f"chunks {list(array.chunks)}  dtype {array.dtype}  "
                f"{present} of {array.chunk_count:,} chunks"
            )
        lines.append(f"{'targets':<12}{len(summary.targets):,}")
        for target in sorted(summary.targets.values(), key=lambda t: -t.references):
            amount = "size unknown" if target.bytes is None else human_bytes(target.bytes)
            lines.append(f"  {target.references:>10,} refs  {amount:>12}  {target.url}")
        if summary.whole_bytes is None:
            whole = "size unknown; --sizes asks the targets"
        else:
            whole = human_bytes(summary.whole_bytes)
        lines.append(
            f"{'references':<12}{summary.ranges:,} ranges ({human_bytes(summary.range_bytes)}), "
            f"{summary.inline:,} inline ({human_bytes(summary.inline_bytes)}), "
            f"{summary.whole:,} whole-target" + (f" ({whole})" if summary.whole else "")
        )
        total = human_bytes(summary.total_bytes)
        unknown = (
            " + whole targets of unknown size"
            if summary.whole and (summary.whole_bytes is None)
            else ""
        )
        lines.append(f"{'total':<12}{summary.total_bytes:,} bytes ({total}){unknown}")
    if summary.warnings:
        lines.append(f"{'warnings':<12}{len(summary.warnings):,}")
        lines.extend(f"  {warning}" for warning in summary.warnings)
    if summary.served_as_stored is not None:
        lines.append(f"{'--decode':<12}{len(summary.served_as_stored):,} arrays served as stored")
        lines.extend(
            f"  {path or '(root)'}  {codec}: {reason}"
            for path, codec, reason in summary.served_as_stored
        )
    if summary.problems:
        lines.append(f"{'problems':<12}{len(summary.problems):,}")
        lines.extend(f"  {problem}" for problem in summary.problems)
    else:
        lines.append(f"{'problems':<12}none")
    return "\n".join(lines)
