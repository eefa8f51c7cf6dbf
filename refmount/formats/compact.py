"""The references of a JSON set kept compact: keys packed as UTF-8, a kind byte, a URL number
and two 64-bit integers per key; ``Reference`` objects are made on demand."""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from refmount.model import Inline, Range, Reference, Whole
from refmount.packed import PackedBuilder, PackedStrings

if TYPE_CHECKING:
    from refmount.formats.gen_grid import GenGrids

_RANGE = 1
_WHOLE = 2
_INLINE = 3


class CompactReferences(Mapping[str, Reference]):
    """References stored as a few flat arrays; ``Reference`` objects are made on demand.

    While it is being filled, a dict maps each key to its slot (so a key given again keeps
    its first position and takes the last value, as a JSON object does); with
    ``unique_keys`` (the keys of one parsed JSON object) that dict is only made if
    ``expect_duplicates`` asks for it. Keys are kept UTF-8 encoded, one after another, from
    the start (a ``str`` per key would cost a million objects while a big file is parsed);
    ``freeze`` drops the dict and finds them by a binary search over a sorted permutation.
    A slot holds a kind byte, a URL number (into a table of distinct URLs) and two 64-bit
    integers: offset and length of a range, or the position and size of an inline value in
    a second blob. A million ``[url, offset, length]`` keys cost about 50 bytes each instead
    of several hundred as Python objects.
    """

    __slots__ = (
        "_frozen",
        "_hint",
        "_inline",
        "_key_build",
        "_keys",
        "_kinds",
        "_lengths",
        "_offsets",
        "_order",
        "_repeated",
        "_slots",
        "_sorted_hint",
        "_url_ids",
        "_url_table",
        "_urls",
        "generated",
    )

    def __init__(self, unique_keys: bool = False) -> None:
        self._slots: dict[str, int] | None = None if unique_keys else {}
        self._frozen = False
        self._hint = -1
        self._sorted_hint = -1
        self._kinds = bytearray()
        self._urls = array("l")
        self._offsets = array("q")
        self._lengths = array("q")
        self._inline = bytearray()
        self._url_table: list[str] = []
        self._url_ids: dict[str, int] = {}
        self._key_build = PackedBuilder()
        """The keys stored so far, until ``freeze`` makes them ``_keys``."""
        self._keys = PackedStrings()
        self._order: array[int] | None = None
        self._repeated = False
        self.generated: GenGrids | None = None
        """The ``gen`` items kept as chunk grids, whose keys are not stored here (see
        ``gen_grid``)."""

    # ----------------------------------------------------------------- filling

    def _url_id(self, url: str) -> int:
        known = self._url_ids.get(url)
        if known is None:
            known = self._url_ids[url] = len(self._url_table)
            self._url_table.append(url)
        return known

    def _store(self, key: str, kind: int, url: int, offset: int, length: int) -> None:
        if self._frozen:
            raise RuntimeError("the references are frozen")
        slots = self._slots
        slot = None if slots is None else slots.get(key)
        if slot is None:
            if slots is not None:
                slots[key] = len(self._kinds)
            self._key_build.append(key.encode("utf-8", "surrogatepass"))
            self._kinds.append(kind)
            self._urls.append(url)
            self._offsets.append(offset)
            self._lengths.append(length)
        else:
            self._kinds[slot] = kind
            self._urls[slot] = url
            self._offsets[slot] = offset
            self._lengths[slot] = length

    def expect_duplicates(self) -> None:
        """Make the key-to-slot dict, so that keys stored from now on replace earlier ones."""
        if self._slots is None and not self._frozen:
            self._slots = {key: slot for slot, key in enumerate(self)}

    def put_range(self, key: str, url: str, offset: int, length: int) -> None:
        """Store ``Range(url, offset, length)`` under ``key`` (numbers already checked)."""
        url_id = self._url_ids.get(url)
        if url_id is None:
            url_id = self._url_id(url)
        self._store(key, _RANGE, url_id, offset, length)

    def put(self, key: str, reference: Reference) -> None:
        """Store ``reference`` under ``key``, replacing any value it had."""
        match reference:
            case Range(url, offset, length):
                self.put_range(key, url, offset, length)
            case Whole(url):
                self._store(key, _WHOLE, self._url_id(url), 0, 0)
            case Inline(data):
                start = len(self._inline)
                self._inline += data
                self._store(key, _INLINE, 0, start, len(data))

    def __setitem__(self, key: str, reference: Reference) -> None:
        """Store ``reference`` under ``key`` (``put`` as an item assignment)."""
        self.put(key, reference)

    def freeze(self, *, find_repeats: bool = False) -> CompactReferences:
        """Make the keys one immutable blob with a sorted permutation, and drop the key dict;
        no more keys can be added. Returns ``self``.

        With ``find_repeats``, ``has_repeated_keys`` says afterwards whether a key was stored
        twice (possible only when ``unique_keys`` was promised wrongly).
        """
        if self._frozen:
            return self
        table = self._keys = self._key_build.freeze()
        keys = table.utf8_run(0, len(table))
        if any(a >= b for a, b in itertools.pairwise(keys)):
            # UTF-8 bytes sort like the code points they encode, so the order holds for both.
            self._order = array("l", sorted(range(len(keys)), key=keys.__getitem__))
            if find_repeats:
                self._repeated = any(keys[a] == keys[b] for a, b in itertools.pairwise(self._order))
        del keys
        self._slots = None
        self._url_ids = {}
        self._frozen = True
        return self

    @property
    def has_repeated_keys(self) -> bool:
        """Return True when ``freeze(find_repeats=True)`` found a key stored twice."""
        return self._repeated

    # ----------------------------------------------------------------- reading

    def _slot(self, key: str) -> int | None:
        if not self._frozen:
            self.expect_duplicates()
            assert self._slots is not None
            return self._slots.get(key)
        try:
            wanted = key.encode("utf-8", "surrogatepass")
        except UnicodeEncodeError:
            return None
        keys = self._keys
        key_bytes = keys.utf8
        count = len(keys)
        # Callers often walk the keys in order: sorted (a listing) or the file's (slot after
        # slot). Both hints are checked before a binary search; a race between tasks only
        # costs a miss.
        order = self._order
        if order is not None:
            position = self._sorted_hint + 1
            if position < count and key_bytes(order[position]) == wanted:
                self._sorted_hint = position
                return order[position]
        slot = self._hint + 1
        if slot < count and key_bytes(slot) == wanted:
            self._hint = slot
            return slot
        position = keys.bisect_left(wanted, order=order)
        slot = position if order is None or position >= count else order[position]
        if position < count and key_bytes(slot) == wanted:
            self._hint = slot
            self._sorted_hint = position
            return slot
        return None

    def reference(self, slot: int) -> Reference:
        """Return the reference stored in ``slot``."""
        kind = self._kinds[slot]
        if kind == _RANGE:
            url = self._url_table[self._urls[slot]]
            return Range(url, self._offsets[slot], self._lengths[slot])
        if kind == _WHOLE:
            return Whole(self._url_table[self._urls[slot]])
        start = self._offsets[slot]
        return Inline(bytes(self._inline[start : start + self._lengths[slot]]))

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        """Return the length of each key ``prefix + name``'s range or inline data (names in
        UTF-8); None for a whole-file reference or an absent key.

        A listing's hot path: see ``PackedStrings.find_each``.
        """
        kinds, lengths = self._kinds, self._lengths
        if not self._frozen:
            found = [self._slot(prefix + name.decode("utf-8")) for name in names]
            return [None if s is None or kinds[s] == _WHOLE else lengths[s] for s in found]
        head = prefix.encode("utf-8", "surrogatepass")
        found = self._keys.find_each(names, head, self._order)
        return [None if s is None or kinds[s] == _WHOLE else lengths[s] for s in found]

    def get(self, key: str, default: object = None) -> Reference | None:  # type: ignore[override]
        """Return the reference of ``key``, or ``None``."""
        slot = self._slot(key)
        return None if slot is None else self.reference(slot)

    def __getitem__(self, key: str) -> Reference:
        slot = self._slot(key)
        if slot is None:
            raise KeyError(key)
        return self.reference(slot)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._slot(key) is not None

    def __len__(self) -> int:
        return len(self._kinds)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys if self._frozen else self._key_build)
