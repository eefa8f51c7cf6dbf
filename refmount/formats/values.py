"""Turn one value of a JSON ``refs`` mapping into a reference (shared by v0 and v1): inline
text and objects, base64, ranges checked, URLs resolved and interned."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import sys
from collections.abc import Callable

from refmount.errors import ReferenceFormatError
from refmount.formats.compact import CompactReferences
from refmount.formats.options import LoadOptions
from refmount.model import Inline, Range, Reference, Whole
from refmount.urls import protocol_of, resolve

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
