"""The one packed table of UTF-8 strings: one blob of bytes and the end offset of each string.

A million short names cost about 15 bytes each this way (the bytes plus an 8-byte end),
instead of about 60 as ``str`` objects in a list or a hundred or so as keys of a dict. The
namespace's names (while built and once numbered) and the keys of a JSON set are kept so.

``PackedBuilder`` appends strings already encoded; ``PackedStrings`` is the table once
complete: its length, string ``i`` (``utf8(i)`` encoded, ``table[i]`` decoded), iteration,
runs of strings, and binary searches over a sorted range; the builder reads its strings
the same way, through one base (``_Packed``: length, ``utf8``, iteration, runs and
``bisect_left``). UTF-8 bytes sort like the code points they encode, so a table sorted as
bytes is sorted as text too, and searches compare bytes, decoding nothing. Strings decode
with ``surrogatepass``, so that a key holding a lone surrogate (valid JSON, not valid UTF-8)
comes back as it went in.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar

_ERRORS = "surrogatepass"

Order = Sequence[int] | None
"""A permutation that sorts a table (position ``p`` is string ``order[p]``), or None when the
table is sorted as stored."""

_Blob = TypeVar("_Blob", bound=bytes | bytearray)


def _slices(blob: bytes, ends: array[int], start: int, stop: int) -> list[bytes]:
    """Return strings ``[start, stop)`` of ``blob`` (``bytes``: slices are copies already)."""
    if stop <= start:
        return []
    firsts = ends[start - 1 : stop - 1] if start else itertools.chain((0,), ends[: stop - 1])
    return list(map(blob.__getitem__, map(slice, firsts, ends[start:stop])))


def _run(blob: bytes | bytearray, ends: array[int], start: int, stop: int) -> list[bytes]:
    """Return strings ``[start, stop)`` as ``bytes``, whatever holds them."""
    if isinstance(blob, bytes):
        return _slices(blob, ends, start, stop)
    if stop <= start:
        return []
    base = ends[start - 1] if start else 0
    data = bytes(blob[base : ends[stop - 1]])  # one copy of the run, then slices of it
    shifted = array("q", map(operator.sub, ends[start:stop], itertools.repeat(base)))
    return _slices(data, shifted, 0, stop - start)


class _Packed(Generic[_Blob]):
    """Strings in a blob and their ends, read: what a table and a builder share.

    String ``i`` is ``blob[ends[i - 1]:ends[i]]`` (from 0 for ``i == 0``).
    """

    __slots__ = ("_blob", "_ends")

    def __init__(self, blob: _Blob, ends: array[int]) -> None:
        self._blob = blob
        self._ends = ends

    def __len__(self) -> int:
        return len(self._ends)

    def utf8(self, index: int) -> bytes:
        """Return string ``index`` as it is stored (``bytes``, even from a ``bytearray``)."""
        ends = self._ends
        found = self._blob[ends[index - 1] if index > 0 else 0 : ends[index]]
        return found if type(found) is bytes else bytes(found)

    def __iter__(self) -> Iterator[str]:
        blob = self._blob
        start = 0
        for end in self._ends:
            yield blob[start:end].decode("utf-8", _ERRORS)
            start = end

    def utf8_run(self, start: int, stop: int) -> list[bytes]:
        """Return strings ``[start, stop)`` as they are stored: UTF-8, nothing decoded."""
        return _run(self._blob, self._ends, start, stop)

    def bisect_left(
        self, wanted: bytes, low: int = 0, high: int | None = None, order: Order = None
    ) -> int:
        """Return how many strings of the sorted range ``[low, high)`` sort before ``wanted``.

        With ``order`` the strings are sorted in that order: position ``p`` is string
        ``order[p]``.
        """
        blob, ends = self._blob, self._ends
        top = len(ends) if high is None else high
        while low < top:
            middle = (low + top) // 2
            index = middle if order is None else order[middle]
            if blob[ends[index - 1] if index > 0 else 0 : ends[index]] < wanted:
                low = middle + 1
            else:
                top = middle
        return low


class PackedStrings(_Packed[bytes | bytearray]):
    """A complete table.

    A table made from a ``bytearray`` keeps it as it is (no copy while the bytes it came from
    may still be alive), and it must not change; ``compact`` makes it ``bytes`` later, when
    the copy costs less memory.
    """

    __slots__ = ()

    def __init__(self, blob: bytes | bytearray = b"", ends: array[int] | None = None) -> None:
        super().__init__(blob, array("q") if ends is None else ends)

    @classmethod
    def of(cls, strings: Iterable[str]) -> PackedStrings:
        """Return the table of ``strings``, encoded."""
        builder = PackedBuilder()
        for string in strings:
            builder.append(string.encode("utf-8", _ERRORS))
        return builder.freeze()

    def compact(self) -> None:
        """Hold the strings as ``bytes``, which slice a little faster than a ``bytearray``."""
        if isinstance(self._blob, bytearray):
            self._blob = bytes(self._blob)

    def __getitem__(self, index: int) -> str:
        ends = self._ends
        start = ends[index - 1] if index > 0 else 0
        return self._blob[start : ends[index]].decode("utf-8", _ERRORS)

    def bisect_right(self, wanted: bytes, low: int = 0, high: int | None = None) -> int:
        """Return where the strings after ``wanted`` start in the sorted range ``[low, high)``."""
        end = len(self._ends) if high is None else high
        return bisect.bisect_right(range(end), wanted, low, end, key=self.utf8)

    def find_each(
        self, wanted: Iterable[bytes], prefix: bytes = b"", order: Order = None
    ) -> list[int | None]:
        """Return the index of each string ``prefix + w`` for ``w`` in ``wanted`` (None where
        absent) in the table, sorted as stored or in ``order`` (see ``bisect_left``).

        A listing's hot path. Strings that follow each other in that order (a directory's
        names, as listed) are found by stepping through it, one comparison each; any other
        by a binary search.
        """
        blob, ends = self._blob, self._ends
        count = len(ends)
        out: list[int | None] = []
        position = -1  # where the last string was found, in sorted order
        for name in wanted:
            string = prefix + name
            position += 1
            index = position if order is None or position >= count else order[position]
            if position >= count or blob[ends[index - 1] if index else 0 : ends[index]] != string:
                position = self.bisect_left(string, order=order)
                index = position if order is None or position >= count else order[position]
                if position >= count or self.utf8(index) != string:
                    position -= 1  # the next string may still be the next one stored
                    out.append(None)
                    continue
            out.append(index)
        return out

    def find(self, wanted: bytes, low: int = 0, high: int | None = None) -> int | None:
        """Return the index of ``wanted`` in the sorted range ``[low, high)``, or None."""
        stop = len(self._ends) if high is None else high
        position = self.bisect_left(wanted, low, stop)
        return position if position < stop and self.utf8(position) == wanted else None


class PackedBuilder(_Packed[bytearray]):
    """A table being filled: encoded strings appended to a ``bytearray``, their ends to an array.

    ``freeze`` hands the strings over as a ``PackedStrings`` (copied to ``bytes``) and leaves
    the builder empty; ``table`` shares them without a copy.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(bytearray(), array("q"))

    def append(self, string: bytes) -> None:
        """Append one encoded string."""
        blob = self._blob
        blob += string
        self._ends.append(len(blob))

    def append_ascending(self, string: bytes) -> bool:
        """Append one encoded string; return True when it sorts after the one before it (or
        is the first), False when it starts a new ascending run."""
        blob, ends = self._blob, self._ends
        count = len(ends)
        ascending = not count or string > blob[ends[count - 2] if count > 1 else 0 :]
        blob += string
        ends.append(len(blob))
        return ascending

    def extend(self, strings: Sequence[bytes]) -> None:
        """Append encoded strings, in bulk."""
        blob = self._blob
        base = len(blob)
        blob += b"".join(strings)
        lengths = itertools.accumulate(map(len, strings))
        self._ends.extend(map(operator.add, lengths, itertools.repeat(base)))

    def extend_from(self, source: PackedBuilder, start: int, stop: int) -> None:
        """Append strings ``[start, stop)`` of ``source`` with no temporary copy of them (a
        copy would add to the peak, however many strings)."""
        if stop <= start:
            return
        ends = source._ends
        first = ends[start - 1] if start else 0
        shift = len(self._blob) - first
        with memoryview(source._blob) as data, memoryview(ends) as positions:
            self._blob += data[first : ends[stop - 1]]
            self._ends.extend(map(operator.add, positions[start:stop], itertools.repeat(shift)))

    def replace_run(self, start: int, stop: int, strings: Sequence[bytes]) -> None:
        """Replace strings ``[start, stop)`` by ``strings``, as many and as long in all (the
        same strings in another order, say): nothing around them moves."""
        ends = self._ends
        base = ends[start - 1] if start else 0
        self._blob[base : ends[stop - 1]] = b"".join(strings)
        lengths = itertools.accumulate(map(len, strings))
        ends[start:stop] = array("q", map(operator.add, lengths, itertools.repeat(base)))

    def table(self) -> PackedStrings:
        """Return the strings as a table sharing this builder's memory: append nothing more."""
        return PackedStrings(self._blob, self._ends)

    def freeze(self) -> PackedStrings:
        """Return the strings as a table of ``bytes``, and empty the builder."""
        table = PackedStrings(bytes(self._blob), self._ends)
        self._blob = bytearray()
        self._ends = array("q")
        return table
