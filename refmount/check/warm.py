"""Warming the disk cache for a set (``refmount cache warm``): every reference under the key
prefixes asked for read once through a store with the disk cache, a few at a time, so later
mounts of the set on this host fetch nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

import trio

from refmount.errors import ReferenceFormatError, RefmountError
from refmount.formats.options import Progress
from refmount.model import Inline, Range, Reference, ReferenceSet, Whole

READS = 16
"""How many references are read at once."""

STEP = 8 * 1024 * 1024
"""The most one read asks for: a large reference is read in steps of this many bytes."""

ReadRange = Callable[[str, int, int], Awaitable[object]]
"""Reads bytes ``[start, end)`` of a target (``Store.read_range``)."""

SizeOf = Callable[[str], Awaitable[int]]
"""Asks a target for its size (``Store.size``)."""


@dataclass(slots=True)
class Warmed:
    """What warming did: references read, their bytes, and those that failed (key, why)."""

    references: int = 0
    bytes: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)


def references_under(
    references: ReferenceSet, prefixes: Sequence[str]
) -> Iterator[tuple[str, Reference]]:
    """Yield ``(key, reference)`` of every key under one of ``prefixes`` (every key if none)
    that names a target: explicit keys, then each chunk grid's chunks present."""

    def wanted(key: str) -> bool:
        return not prefixes or any(key.startswith(prefix) for prefix in prefixes)

    keys = references.keys()  # a ReferenceSet is not itself iterable
    for key in keys:
        reference = references.get(key)
        if reference is not None and not isinstance(reference, Inline) and wanted(key):
            yield key, reference
    for number, grid in enumerate(references.grids):
        head = f"{grid.array}/" if grid.array else ""
        if prefixes and not any(
            prefix.startswith(head) or head.startswith(prefix) for prefix in prefixes
        ):
            continue
        index = 0
        while index < grid.count:
            index = references.skip_absent(number, index, grid.count, load=True)
            if index >= grid.count:
                break
            key = grid.key(index)
            if wanted(key):
                reference = references.chunk(number, index)
                if reference is not None and not isinstance(reference, Inline):
                    yield key, reference
            index += 1


async def warm(
    found: Iterator[tuple[str, Reference]],
    read_range: ReadRange,
    size_of: SizeOf,
    progress: Progress | None = None,
    reads: int = READS,
) -> Warmed:
    """Read every reference of ``found`` once (``reads`` at a time); ``progress`` is told
    ``(references read, references found so far)``."""
    result = Warmed()
    sender, receiver = trio.open_memory_channel[tuple[str, Reference]](reads)
    seen = 0

    async def worker(receive: trio.MemoryReceiveChannel[tuple[str, Reference]]) -> None:
        async with receive:
            async for key, reference in receive:
                await one(key, reference)

    async def one(key: str, reference: Reference) -> None:
        try:
            match reference:
                case Range(url, offset, length):
                    start, end = offset, offset + length
                case Whole(url):
                    start, end = 0, await size_of(url)
                case _:
                    return
            for at in range(start, end, STEP):  # memory: one step per read at a time
                await read_range(url, at, min(at + STEP, end))
            result.bytes += end - start
        except (RefmountError, OSError) as error:
            result.failures.append((key, str(error)))
        result.references += 1
        if progress is not None:
            progress(result.references, seen)

    async with trio.open_nursery() as nursery:
        async with receiver:
            for _ in range(reads):
                nursery.start_soon(worker, receiver.clone())
        async with sender:
            while True:
                try:  # the next reference may need a Parquet record file read: a thread
                    item = await trio.to_thread.run_sync(next, found, None)
                except ReferenceFormatError as error:  # a malformed record file
                    result.failures.append((error.key or "", str(error)))
                    break
                if item is None:
                    break
                seen += 1
                await sender.send(item)
    return result
