"""Turn one value of a JSON ``refs`` mapping into a reference (shared by v0 and v1)."""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import json
import sys
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from refmount.errors import ReferenceFormatError
from refmount.formats.options import LoadOptions
from refmount.model import Inline, Range, Reference, Whole
from refmount.packed import PackedBuilder, PackedStrings
from refmount.urls import protocol_of, resolve

if TYPE_CHECKING:
    from refmount.formats.gen_grid import GenGrids

BASE64_PREFIX = "base64:"

MAX_OFFSET = 2**63 - 1
"""The largest byte position a range may reach (a file size must fit in a signed 64-bit int)."""

Renderer = Callable[[str, str], str]
"""``render(key, text)``: the rendered text of a template found in ``key``'s URL."""


def describe(value: object) -> str:
    """Return a short description of a JSON value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_WHITESPACE = b" \t\n\r\v\f"


def decode_base64(encoded: bytes) -> bytes:
    """Return the bytes ``encoded`` (standard base64) spells.

    Whitespace and line breaks are ignored, as fsspec's decoder ignores them; any other
    character outside the base64 alphabet, or wrong padding, raises ``binascii.Error``
    (fsspec drops such characters silently: ``base64:_`` would be served as empty).
    """
    return base64.b64decode(encoded.translate(None, _WHITESPACE), validate=True)


def inline_text(text: str) -> Inline:
    """Return the bytes of a text value: ``base64:`` decoded, anything else UTF-8.

    Raises ``ValueError`` with the problem (bad base64, a lone surrogate) otherwise.
    """
    if text.startswith(BASE64_PREFIX):
        try:
            encoded = text[len(BASE64_PREFIX) :].encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"bad base64: not valid Unicode ({exc.reason})") from exc
        try:
            return Inline(decode_base64(encoded))
        except binascii.Error as exc:
            raise ValueError(f"bad base64: {exc}") from exc
    try:
        return Inline(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"text is not valid Unicode: {exc.reason} at character {exc.start}"
        ) from exc


def inline_object(value: object) -> Inline:
    """Return the bytes of a JSON-object value: stdlib ``json.dumps`` with default separators."""
    return Inline(json.dumps(value).encode("utf-8"))


def check_range(offset: int, length: int) -> str | None:
    """Return what is wrong with a byte range, or None when it is acceptable."""
    if offset < 0:
        return f"negative offset {offset}"
    if length < 0:
        return f"negative length {length}"
    if offset + length > MAX_OFFSET:
        return f"range {offset}+{length} ends beyond 2**63 - 1"
    return None


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


class ValueParser:
    """Turns the ``refs`` values of one reference file into references.

    URLs are resolved with ``urls.resolve`` against the reference file's directory, and the
    results are interned and remembered, because many keys usually share one URL. When a
    ``render`` function is given (Version 1), list URLs containing ``{{`` are rendered first.
    """

    __slots__ = (
        "_base_url",
        "_remote_protocol",
        "_render",
        "_rendered",
        "_source",
        "_target",
        "_urls",
    )

    def __init__(
        self,
        source: str,
        base_url: str,
        options: LoadOptions,
        render: Renderer | None = None,
    ) -> None:
        self._source = source
        self._base_url = base_url
        self._remote_protocol = options.remote_protocol
        self._target = None if options.target is None else sys.intern(options.target)
        self._render = render
        self._urls: dict[str, str] = {}
        self._rendered: dict[str, str] = {}

    def error(self, key: str | None, problem: str) -> ReferenceFormatError:
        """Return the error to raise for ``key`` of this file."""
        return ReferenceFormatError(self._source, key, problem)

    def parse(self, key: str, value: object) -> Reference:
        """Return the reference that ``value`` describes, or raise ``ReferenceFormatError``."""
        plain = self._plain_range(key, value)
        if plain is not None:
            return Range(*plain)
        return self._parse(key, value)

    def parse_into(self, key: str, value: object, out: CompactReferences) -> None:
        """Store the reference that ``value`` describes in ``out``, or raise as ``parse`` does."""
        plain = self._plain_range(key, value)
        if plain is not None:
            out.put_range(key, *plain)
        else:
            out.put(key, self._parse(key, value))

    def _plain_range(self, key: str, value: object) -> tuple[str, int, int] | None:
        """Return ``(url, offset, length)`` for a valid ``[url, offset, length]``, else None.

        The common case, checked inline: a million-key file spends most of its time here.
        Anything else (and every error) is left to ``_parse``.
        """
        if type(value) is not list or len(value) != 3:
            return None
        url, offset, length = value
        if (
            type(url) is str
            and type(offset) is int
            and type(length) is int
            and offset >= 0
            and length >= 0
            and offset + length <= MAX_OFFSET
        ):
            resolved = self._urls.get(url)
            if resolved is None:
                resolved = self._new_url(key, url)
            return resolved, offset, length
        return None

    def _parse(self, key: str, value: object) -> Reference:
        if isinstance(value, list):
            return self._parse_list(key, value)
        if isinstance(value, str):
            try:
                return inline_text(value)
            except ValueError as exc:
                raise self.error(key, str(exc)) from exc
        if isinstance(value, dict):
            return inline_object(value)
        raise self.error(
            key,
            "a reference must be a string, an object, [url] or [url, offset, length], "
            f"not {describe(value)}",
        )

    def url(self, key: str, raw: object) -> str:
        """Return the absolute, interned URL for a reference's ``raw`` URL.

        JSON ``null`` means ``--target``; an empty string is not a URL.
        """
        if isinstance(raw, str):
            known = self._urls.get(raw)
            if known is not None:
                return known
            return self._new_url(key, raw)
        if raw is None:
            if self._target is None:
                raise self.error(key, "null URL and no --target given")
            return self._target
        raise self.error(key, f"the URL must be a string or null, not {describe(raw)}")

    def rendered_url(self, key: str, text: str) -> str:
        """Return the absolute, interned URL for ``text``, which is already rendered."""
        known = self._rendered.get(text)
        if known is not None:
            return known
        if not text:
            raise self.error(key, "empty URL")
        resolved = sys.intern(self._resolve(key, text))
        self._rendered[text] = resolved
        return resolved

    def resolver(self) -> Callable[[str], str]:
        """Return what makes a rendered URL absolute, as ``rendered_url`` does, remembering
        nothing (and holding on to nothing of this parser)."""
        return functools.partial(
            resolve, base=self._base_url, remote_protocol=self._remote_protocol
        )

    def range(self, key: str, url: str, offset: int, length: int) -> Range:
        """Return ``Range(url, offset, length)`` after checking the numbers."""
        problem = check_range(offset, length)
        if problem is not None:
            raise self.error(key, problem)
        return Range(url, offset, length)

    def _parse_list(self, key: str, value: list[object]) -> Reference:
        size = len(value)
        if size == 3:
            url, offset, length = value
            if type(offset) is not int:
                raise self.error(key, f"the offset must be an integer, not {describe(offset)}")
            if type(length) is not int:
                raise self.error(key, f"the length must be an integer, not {describe(length)}")
            return self.range(key, self.url(key, url), offset, length)
        if size == 1:
            return Whole(self.url(key, value[0]))
        raise self.error(
            key, f"a list reference must be [url] or [url, offset, length], not {size} items"
        )

    def _new_url(self, key: str, raw: str) -> str:
        text = raw
        if self._render is not None and "{{" in raw:
            text = self._render(key, raw)
            if not text:
                raise self.error(key, f"the URL {raw!r} renders as an empty string")
        elif not text:
            raise self.error(key, "empty URL (only null means --target)")
        resolved = sys.intern(self._resolve(key, text))
        self._urls[raw] = resolved
        return resolved

    def _resolve(self, key: str, text: str) -> str:
        """Resolve ``text`` against the base; a set with no directory (an empty base, as for
        a document read from standard input without ``--base``) refuses relative paths."""
        resolved = resolve(text, self._base_url, self._remote_protocol)
        if not self._base_url and protocol_of(resolved) is None and not resolved.startswith("/"):
            raise self.error(
                key,
                f"relative target path {text!r}, and the set has no directory to resolve it "
                "against (give --base, or base= from Python)",
            )
        return resolved
