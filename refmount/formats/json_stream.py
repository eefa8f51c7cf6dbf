"""Streaming JSON reference files: references stored as they are read, no document built.

``json.loads`` of a million-key file builds a dict, a list and three objects per key before
a single reference is stored; at its peak the process holds the text, that document and the
compact references at once (more than fsspec itself needs for the file). Here the text is
decoded a chunk at a time and each ``refs`` member is parsed with the standard library's C
scanner and stored right away, so the peak is the file's bytes plus the compact references.

This is a fast path, never a second definition of the format: any document it is not sure
about (malformed JSON, duplicate keys, ``templates`` after ``refs``, a malformed value, an
unexpected shape) makes ``stream_document`` return None, and the caller loads the document
the ordinary way, which gives the established result or error message.
"""

from __future__ import annotations

import codecs
import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

from refmount.errors import ReferenceFormatError
from refmount.formats.compact import CompactReferences
from refmount.formats.json_v1 import expand_gen
from refmount.formats.options import PROGRESS_STEP, LoadOptions
from refmount.formats.templates import Templates
from refmount.formats.values import ValueParser

T = TypeVar("T")

CHUNK = 1 << 20
"""Bytes decoded at a time; the text window holds about this much."""

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = frozenset("0123456789.eE+-")
# json.loads's own C scanners (typeshed does not describe these two attributes)
_scan_value: Callable[[str, int], tuple[object, int]] = cast(Any, json.JSONDecoder()).scan_once
_scan_string: Callable[[str, int, bool], tuple[str, int]] = cast(Any, json.decoder).scanstring


class NotStreamable(Exception):
    """The document must be loaded the ordinary way (it may well be valid)."""


class _Truncated(Exception):
    """The text window ends inside the item being read: decode more and read it again."""


class _Window:
    """The decoded text of a document, a window at a time, with a read position."""

    __slots__ = ("_data", "_decoder", "_next", "position", "text")

    def __init__(self, data: bytes | bytearray, encoding: str) -> None:
        self._data = data
        self._decoder = codecs.getincrementaldecoder(encoding)("surrogatepass")
        self._next = 0
        self.text = ""
        self.position = 0

    @property
    def fraction_read(self) -> float:
        """Return about the share of the document read so far (text counted as bytes)."""
        ahead = len(self.text) - self.position
        return max(min(self._next, len(self._data)) - ahead, 1) / max(len(self._data), 1)

    def more(self) -> bool:
        """Decode at least the next ``CHUNK`` bytes (doubling for long items); False at the end."""
        if self._next >= len(self._data):
            return False
        if self.position:
            self.text = self.text[self.position :]
            self.position = 0
        size = max(CHUNK, len(self.text))
        chunk = self._data[self._next : self._next + size]
        self._next += size
        try:
            self.text += self._decoder.decode(chunk, self._next >= len(self._data))
        except UnicodeDecodeError:
            raise NotStreamable from None
        return True

    def read(self, step: Callable[[str, int], tuple[T, int]]) -> T:
        """Run ``step(text, position)`` → ``(result, new position)``, decoding more text and
        trying again while the window ends inside what it reads."""
        while True:
            try:
                result, self.position = step(self.text, self.position)
                return result
            except (_Truncated, IndexError, StopIteration, json.JSONDecodeError):
                if not self.more():
                    raise NotStreamable from None

    def at_end(self) -> bool:
        """Return True when only whitespace is left."""
        while True:
            rest = _WHITESPACE.match(self.text, self.position)
            assert rest is not None
            self.position = rest.end()
            if self.position < len(self.text):
                return False
            if not self.more():
                return True


def _skip(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    assert match is not None
    return match.end()


def _open_object(text: str, position: int) -> tuple[bool, int]:
    """Read ``{``; return whether the object is already closed (``{}``)."""
    position = _skip(text, position)
    if text[position] != "{":
        raise NotStreamable
    position = _skip(text, position + 1)
    if text[position] == "}":
        return True, position + 1
    return False, position


def _key(text: str, position: int) -> tuple[str, int]:
    """Read ``"key" :``."""
    position = _skip(text, position)
    if text[position] != '"':
        raise NotStreamable
    key, position = _scan_string(text, position + 1, True)
    position = _skip(text, position)
    if text[position] != ":":
        raise _Truncated if position >= len(text) else NotStreamable
    return key, position + 1


def _separator(text: str, position: int) -> tuple[bool, int]:
    """Read ``,`` or ``}`` after a member; return whether the object closed."""
    position = _skip(text, position)
    mark = text[position]  # IndexError: truncated (a number may go on in the next chunk)
    if mark == ",":
        return False, position + 1
    if mark == "}":
        return True, position + 1
    if mark in _NUMBER_TAIL:
        raise _Truncated  # a number the window cut short ("1." of "1.5"): read it again
    raise NotStreamable


def _value(text: str, position: int) -> tuple[tuple[object, bool], int]:
    """Read a value and the separator after it; return ``(value, object closed)``."""
    value, position = _scan_value(text, _skip(text, position))
    closed, position = _separator(text, position)
    return (value, closed), position


class _Refs:
    """Reads the members of a ``refs`` object (or a Version 0 document) into references."""

    def __init__(self, window: _Window, parser: ValueParser, options: LoadOptions) -> None:
        self._window = window
        self._parser = parser
        self._progress = options.progress
        self.out = CompactReferences(unique_keys=True)

    def member(self, key: str, value: object) -> None:
        """Store one reference and tell the progress every ``PROGRESS_STEP`` keys (the total
        is estimated from the share of the file read)."""
        try:
            self._parser.parse_into(key, value, self.out)
        except ReferenceFormatError:
            raise NotStreamable from None
        count = len(self.out)
        if self._progress is not None and count % PROGRESS_STEP == 0:
            estimate = int(count / max(self._window.fraction_read, 1e-9))
            self._progress(count, max(estimate, count + 1))

    def read_object(self, forbidden: str | None = None) -> None:
        """Read the members up to the object's ``}``; a key ``forbidden`` ends streaming."""
        window = self._window
        closed = window.read(_open_object)
        while not closed:
            key = window.read(_key)
            if key == forbidden:
                raise NotStreamable
            value, closed = window.read(_value)
            self.member(key, value)

    def finish(self) -> CompactReferences:
        """Tell the last progress and return the references (frozen later by the caller)."""
        if self._progress is not None:
            self._progress(len(self.out), len(self.out))
        return self.out


def stream_document(
    data: bytes | bytearray, source: str, base_url: str, options: LoadOptions
) -> CompactReferences | None:
    """Return the references of a JSON reference file read as a stream, or None when the
    document must be loaded the ordinary way (see the module's docstring).

    The references are not frozen yet: freeze them once ``data`` is released (freezing
    takes memory of its own) with ``find_repeats``, then check ``has_repeated_keys``: a key
    repeated in the
    document (json.loads keeps its last value) is only found then, and means the document
    must be loaded the ordinary way after all.
    """
    try:
        encoding = json.detect_encoding(data)
        window = _Window(data, encoding)
        window.more()
        if window.text.startswith("\ufeff"):
            return None  # json.loads refuses a BOM with its own message
        if window.read(_open_object):
            return None  # {}: nothing to stream
        first = window.read(_key)
        if first == "version":
            return _stream_v1(window, source, base_url, options)
        return _stream_v0(window, first, source, base_url, options)
    except (NotStreamable, ReferenceFormatError, RecursionError, ValueError):
        return None


def _stream_v0(
    window: _Window, first: str, source: str, base_url: str, options: LoadOptions
) -> CompactReferences | None:
    refs = _Refs(window, ValueParser(source, base_url, options), options)
    value, closed = window.read(_value)
    refs.member(first, value)
    while not closed:
        key = window.read(_key)
        if key == "version":
            raise NotStreamable  # a Version 1 document after all
        value, closed = window.read(_value)
        refs.member(key, value)
    if not window.at_end():
        return None
    return refs.finish()


def _stream_v1(
    window: _Window, source: str, base_url: str, options: LoadOptions
) -> CompactReferences | None:
    version, closed = window.read(_value)
    if type(version) not in (int, float) or version != 1:
        return None
    templates = Templates(source, {})
    parser = ValueParser(source, base_url, options, render=templates.render)
    refs = _Refs(window, parser, options)
    seen = {"version"}
    gen: object = []
    while not closed:
        key = window.read(_key)
        if key in seen:
            return None  # json.loads keeps the last of repeated members
        seen.add(key)
        if key == "refs":
            refs.read_object()
            closed = window.read(_separator)
            continue
        value, closed = window.read(_value)
        if key == "templates":
            if "refs" in seen or not isinstance(value, dict):
                return None
            templates = Templates(source, value)
            parser = ValueParser(source, base_url, options, render=templates.render)
            refs = _Refs(window, parser, options)
        elif key == "gen":
            gen = value
    if not window.at_end() or not isinstance(gen, list):
        return None
    out = refs.finish()
    if gen:
        if len(set(out.keys())) != len(out):
            return None  # a repeated refs key: json.loads keeps its last value
        expand_gen(gen, templates, parser, out, options.size_cap())
    return out
