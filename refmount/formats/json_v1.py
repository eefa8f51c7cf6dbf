"""Version 1 reference files: ``templates``, ``gen`` and ``refs``."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TypeVar

from refmount.errors import ReferenceFormatError
from refmount.formats.json_v0 import parse_refs
from refmount.formats.options import LoadOptions
from refmount.formats.templates import Templates
from refmount.formats.values import (
    CompactReferences,
    OnInvalid,
    ValueParser,
    check_range,
    describe,
)
from refmount.model import Whole

_T = TypeVar("_T")

MAX_GEN_KEYS = 100_000_000
"""The most keys one ``gen`` item may generate (more could never fit in memory anyway)."""


def load_v1(
    document: Mapping[str, object],
    source: str,
    base_url: str,
    options: LoadOptions,
    on_invalid: OnInvalid | None = None,
    consume: bool = False,
) -> CompactReferences:
    """Return the references of a Version 1 document.

    ``refs`` values are read as in Version 0, except that list URLs containing ``{{`` are
    rendered with the templates. Then every ``gen`` item is expanded; generated keys replace
    ``refs`` keys of the same name. Top-level items other than ``version``, ``templates``,
    ``gen`` and ``refs`` are ignored. ``on_invalid`` skips malformed ``refs`` values only:
    broken ``templates`` or ``gen`` items always raise ``ReferenceFormatError``.
    ``consume`` empties the values of ``refs`` as they are read (see ``parse_refs``).
    """
    raw_templates = _member(document, "templates", dict, {}, "an object", source)
    templates = Templates(source, raw_templates)
    parser = ValueParser(source, base_url, options, render=templates.render)
    raw_refs = _member(document, "refs", dict, {}, "an object", source)
    refs = parse_refs(raw_refs, parser, on_invalid, consume, options.progress)
    gen = _member(document, "gen", list, [], "a list", source)
    expand_gen(gen, templates, parser, refs)
    return refs


def expand_gen(
    gen: Sequence[object], templates: Templates, parser: ValueParser, refs: CompactReferences
) -> None:
    """Add the references of every ``gen`` item to ``refs``; generated keys replace ``refs``
    keys of the same name."""
    if gen:
        refs.expect_duplicates()
    for index, item in enumerate(gen):
        GenItem(index, templates, parser).expand(item, refs)


class GenItem:
    """Expands one ``gen`` item into references."""

    __slots__ = ("_parser", "_templates", "_where")

    def __init__(self, index: int, templates: Templates, parser: ValueParser) -> None:
        self._where = f"gen item {index}"
        self._templates = templates
        self._parser = parser

    def error(self, problem: str, key: str | None = None) -> ReferenceFormatError:
        """Return the error to raise for this item (and the generated ``key``, if known)."""
        return self._parser.error(key, f"{self._where}: {problem}")

    def expand(self, item: object, out: CompactReferences) -> None:
        """Add the references that ``item`` generates to ``out``, replacing keys already there.

        Dimensions are combined as a Cartesian product in their order, the first varying
        slowest; ``key``, ``url``, ``offset`` and ``length`` are rendered with the dimension
        values and the templates; ``offset`` and ``length`` (both or neither) are then read
        as integers, and JSON integers are accepted as they are.
        """
        if not isinstance(item, dict):
            raise self.error(f"must be an object, not {describe(item)}")
        key_text = item.get("key")
        url_text = item.get("url")
        if not isinstance(key_text, str):
            raise self.error(f"'key' must be a string, not {describe(key_text)}")
        if not isinstance(url_text, str):
            raise self.error(f"'url' must be a string, not {describe(url_text)}")
        if ("offset" in item) != ("length" in item):
            raise self.error("give both 'offset' and 'length', or neither")
        ranged = "offset" in item
        offset_value: object = item.get("offset")
        length_value: object = item.get("length")
        dimensions = item.get("dimensions")
        if not isinstance(dimensions, dict):
            raise self.error(f"'dimensions' must be an object, not {describe(dimensions)}")
        names = tuple(dimensions)
        axes = [self._axis(name, spec) for name, spec in dimensions.items()]
        count = 1
        for axis in axes:
            count *= _length(axis)
        if count > MAX_GEN_KEYS:
            raise self.error(f"generates {count:,} keys, more than {MAX_GEN_KEYS:,}")
        if count == 0:
            return  # (itertools.product would still copy every other axis first)

        render = self._render
        parser = self._parser
        offset_constant = _constant(offset_value)
        length_constant = _constant(length_value)
        for values in itertools.product(*axes):
            variables = dict(zip(names, values, strict=True))
            key = render(None, key_text, variables, "key")
            url = render(key, url_text, variables, "url")
            if not url:
                raise self.error(f"the url {url_text!r} renders as an empty string", key)
            resolved = parser.rendered_url(key, url)
            if not ranged:
                out.put(key, Whole(resolved))
                continue
            offset = offset_constant
            if offset is None:
                offset = self._integer(offset_value, "offset", key, variables)
            length = length_constant
            if length is None:
                length = self._integer(length_value, "length", key, variables)
            problem = check_range(offset, length)
            if problem is not None:
                raise self.error(problem, key)
            out.put_range(key, resolved, offset, length)

    def _render(
        self, key: str | None, text: str, variables: Mapping[str, object], field: str
    ) -> str:
        """Return ``text`` rendered; errors name this item, ``field`` and ``key``."""
        try:
            return self._templates.render(key, text, variables, field)
        except ReferenceFormatError as exc:
            raise self.error(exc.problem, key) from exc

    def _axis(self, name: str, spec: object) -> Sequence[object]:
        """Return the values of one dimension: a list as given, or ``{start, stop, step}``."""
        if name in self._templates:
            raise self.error(f"dimension {name!r} has the name of a template")
        if isinstance(spec, list):
            return spec
        if not isinstance(spec, dict):
            raise self.error(
                f"dimension {name!r} must be a list or an object, not {describe(spec)}"
            )
        if "stop" not in spec:
            raise self.error(f"dimension {name!r} has no 'stop'")
        bounds: list[int] = []
        for field, default in (("start", 0), ("stop", None), ("step", 1)):
            value = spec.get(field, default)
            if type(value) is not int:
                raise self.error(
                    f"dimension {name!r}: '{field}' must be an integer, not {describe(value)}"
                )
            bounds.append(value)
        start, stop, step = bounds
        if step == 0:
            raise self.error(f"dimension {name!r}: 'step' must not be 0")
        return range(start, stop, step)

    def _integer(self, value: object, field: str, key: str, variables: Mapping[str, object]) -> int:
        """Return an ``offset`` or ``length``: a JSON integer, or a template rendered and parsed."""
        if type(value) is int:
            return value
        if not isinstance(value, str):
            raise self.error(
                f"'{field}' must be a string or an integer, not {describe(value)}", key
            )
        text = self._render(key, value, variables, field)
        try:
            return int(text)
        except ValueError:
            raise self.error(f"{field} {text!r} is not an integer", key) from None


def _length(axis: Sequence[object]) -> int:
    """Return how many values a dimension has (``len`` of a range fails beyond ``sys.maxsize``)."""
    if isinstance(axis, range):
        if axis.step > 0:
            return max(0, -(-(axis.stop - axis.start) // axis.step))
        return max(0, -(-(axis.start - axis.stop) // -axis.step))
    return len(axis)


def _constant(value: object) -> int | None:
    """Return an ``offset`` or ``length`` that needs no rendering (``5``, ``"1000"``), or None."""
    if type(value) is int:
        return value
    if isinstance(value, str) and "{" not in value:
        try:
            return int(value)
        except ValueError:
            return None  # reported, with the key, by GenItem._integer
    return None


def _member(
    document: Mapping[str, object],
    name: str,
    kind: type[_T],
    default: _T,
    kind_name: str,
    source: str,
) -> _T:
    """Return ``document[name]`` checked to be a ``kind``, or ``default`` when it is absent."""
    if name not in document:
        return default
    value = document[name]
    if not isinstance(value, kind):
        raise ReferenceFormatError(
            source, None, f"'{name}' must be {kind_name}, not {describe(value)}"
        )
    return value
