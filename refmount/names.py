"""Key paths and node names: which keys FUSE can show, and names stored compactly as UTF-8."""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable

NAME_MAX = 255
"""Longest name, in bytes, that Linux filesystems accept."""


def key_problem(key: str) -> str | None:
    """Return why ``key`` cannot be a path in a FUSE tree, or None when it can."""
    if key == "":
        return "empty key"
    if key.startswith("/"):
        return "key starts with '/'"
    if key.endswith("/"):
        return "key ends with '/'"
    if "\x00" in key:
        return "key contains a NUL character"
    for part in key.split("/"):
        if part == "":
            return "key contains an empty path component ('//')"
        if part in (".", ".."):
            return f"key contains a {part!r} path component"
        try:
            encoded = part.encode("utf-8")
        except UnicodeEncodeError:
            return "key is not valid UTF-8"
        if len(encoded) > NAME_MAX:
            return f"path component is {len(encoded)} bytes long (the limit is {NAME_MAX})"
    return None


class NameTable:
    """Node names as UTF-8 in one blob plus an array of end positions.

    A million short names cost about 15 bytes each this way, instead of about 60 as ``str``
    objects in a list; ``table[i]`` decodes name ``i``. Names are valid UTF-8 (``key_problem``
    refuses the rest).
    """

    __slots__ = ("_blob", "_ends")

    def __init__(self, names: Iterable[str]) -> None:
        blob = bytearray()
        ends = array("q")
        for name in names:
            blob += name.encode("utf-8")
            ends.append(len(blob))
        self._blob: bytes | bytearray = bytes(blob)
        self._ends = ends

    @classmethod
    def from_utf8(cls, blob: bytes | bytearray, ends: array[int]) -> NameTable:
        """Return the table of names already encoded: name ``i`` is ``blob[ends[i-1]:ends[i]]``.

        A ``bytearray`` is kept as it is, and must not change: ``freeze`` makes it ``bytes``
        later, when the copy costs less memory.
        """
        table = cls.__new__(cls)
        table._blob = blob
        table._ends = ends
        return table

    def freeze(self) -> None:
        """Hold the names as ``bytes``, which slice a little faster than a ``bytearray``."""
        if isinstance(self._blob, bytearray):
            self._blob = bytes(self._blob)

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, index: int) -> str:
        ends = self._ends
        start = ends[index - 1] if index > 0 else 0
        return self._blob[start : ends[index]].decode("utf-8")

    def utf8_run(self, start: int, stop: int) -> list[bytes]:
        """Return names ``[start, stop)`` as they are stored: UTF-8, nothing decoded."""
        blob, ends = self._blob, self._ends
        bounds = ends[start - 1 : stop] if start > 0 else array("q", [0]) + ends[:stop]
        if isinstance(blob, bytes):
            return [blob[low:high] for low, high in itertools.pairwise(bounds)]
        return [bytes(blob[low:high]) for low, high in itertools.pairwise(bounds)]

    def find(self, name: str, low: int, high: int) -> int | None:
        """Return the index of ``name`` among the sorted names ``[low, high)``, or None.

        Compares UTF-8 bytes, whose order is the names' code point order, so nothing is
        decoded on the way.
        """
        wanted = name.encode("utf-8", "surrogateescape")
        blob, ends = self._blob, self._ends
        end = high
        while low < high:
            middle = (low + high) // 2
            start = ends[middle - 1] if middle > 0 else 0
            if blob[start : ends[middle]] < wanted:
                low = middle + 1
            else:
                high = middle
        if low < end:
            start = ends[low - 1] if low > 0 else 0
            if blob[start : ends[low]] == wanted:
                return low
        return None
