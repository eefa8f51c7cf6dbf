"""A file object that HDF5 writes a file into while only its metadata is kept.

h5py's ``fileobj`` driver calls ``write``, ``read``, ``seek``, ``tell``, ``truncate`` and
``flush``. Bytes are kept in fixed pages; a write made while a chunk's payload is expected
(``expect_payload``) is not kept but recorded as that chunk's place in the file. HDF5 writes a
chunk given to ``write_direct_chunk`` in one write of exactly its length at the address it
allocated, and never reads it back; ``take_payload`` checks that it did.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

PAGE = 4096
"""The granularity the metadata is kept in."""


@dataclass(frozen=True, slots=True)
class Pages:
    """The kept bytes of a file: sorted page numbers and their bytes, ``PAGE`` each, in one
    blob (bytes never written read as zeros)."""

    numbers: list[int]
    blob: bytes

    def read(self, start: int, end: int) -> bytearray:
        """Return bytes ``[start, end)`` of the kept image (zeros where nothing was kept)."""
        out = bytearray(end - start)
        first = bisect.bisect_left(self.numbers, start // PAGE)
        for slot in range(first, len(self.numbers)):
            number = self.numbers[slot]
            page_start = number * PAGE
            if page_start >= end:
                break
            lo = max(start, page_start)
            hi = min(end, page_start + PAGE)
            base = slot * PAGE - page_start
            out[lo - start : hi - start] = self.blob[base + lo : base + hi]
        return out

    @property
    def nbytes(self) -> int:
        """Return how many bytes the kept pages take."""
        return len(self.blob) + 8 * len(self.numbers)


class Recorder:
    """The file object HDF5 writes into: metadata pages kept, chunk payloads placed."""

    def __init__(self) -> None:
        self._pages: dict[int, bytearray] = {}
        self._position = 0
        self._size = 0
        self._expected = -1
        self._placed: int | None = None

    # -- what HDF5's fileobj driver calls

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move to ``offset`` (from the start, the position or the end)."""
        if whence == 0:  # HDF5 seeks from the start before every write
            self._position = offset
        else:
            self._position = offset + (self._position if whence == 1 else self._size)
        return self._position

    def tell(self) -> int:
        """Return the position."""
        return self._position

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Keep ``data`` at the position, unless it is the payload expected."""
        start = self._position
        length = data.nbytes if isinstance(data, memoryview) else len(data)
        end = self._position = start + length
        if end > self._size:
            self._size = end
        if length == self._expected and self._placed is None:
            self._placed = start  # the hot path: one call per chunk
            return length
        view = memoryview(data).cast("B")
        position = start
        while position < end:
            number, within = divmod(position, PAGE)
            page = self._pages.get(number)
            if page is None:
                page = self._pages[number] = bytearray(PAGE)
            count = min(PAGE - within, end - position)
            page[within : within + count] = view[position - start : position - start + count]
            position += count
        return length

    def read(self, size: int = -1) -> bytes:
        """Return up to ``size`` bytes from the position (HDF5 rereads its metadata)."""
        end = self._size if size < 0 else min(self._size, self._position + size)
        start = self._position
        self._position = max(end, start)
        return bytes(self._image(start, end)) if end > start else b""

    def readinto(self, buffer: bytearray | memoryview) -> int:
        """Fill ``buffer`` from the position."""
        data = self.read(len(buffer))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)

    def truncate(self, size: int | None = None) -> int:
        """Set the file's size (HDF5 sets it to its end of allocation when closing)."""
        self._size = self._position if size is None else size
        for number in [n for n in self._pages if n * PAGE >= self._size]:
            del self._pages[number]
        return self._size

    def flush(self) -> None:
        """Nothing to flush."""

    # -- what the layout calls

    def expect_payload(self, length: int) -> None:
        """Say that the next write of ``length`` bytes is a chunk's payload, not metadata."""
        self._expected = length
        self._placed = None

    def place(
        self,
        write: Callable[[tuple[int, ...], memoryview], object],
        offsets: tuple[int, ...],
        payload: memoryview,
    ) -> int:
        """Return where ``write(offsets, payload)`` (a chunk written directly) put the
        payload: ``expect_payload``, the write and ``take_payload`` in one call."""
        self._expected = len(payload)
        self._placed = None
        write(offsets, payload)
        return self.take_payload()

    def take_payload(self) -> int:
        """Return where the payload expected landed; raise ``RuntimeError`` if it did not."""
        placed, self._expected, self._placed = self._placed, -1, None
        if placed is None:
            raise RuntimeError("HDF5 did not write a chunk in one piece")
        return placed

    @property
    def size(self) -> int:
        """Return the file's size."""
        return self._size

    def pages(self) -> Pages:
        """Return the kept bytes, compacted (the pages held here are dropped)."""
        numbers = sorted(self._pages)
        blob = b"".join(self._pages.pop(number) for number in numbers)
        return Pages(numbers, blob)

    def _image(self, start: int, end: int) -> bytearray:
        out = bytearray(end - start)
        position = start
        while position < end:
            number, within = divmod(position, PAGE)
            count = min(PAGE - within, end - position)
            page = self._pages.get(number)
            if page is not None:
                out[position - start : position - start + count] = page[within : within + count]
            position += count
        return out
