"""``gen`` items of Version 1: their fields checked, their cost counted against the cap on
the reference file, and their keys made, stored key by key or kept as a chunk grid."""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from refmount.errors import ReferenceFormatError
from refmount.formats.compact import CompactReferences
from refmount.formats.gen_grid import (
    GenGrid,
    IntField,
    Pieces,
    UrlField,
    dimensions_of,
    grid_layout,
    leading_literal,
    render,
)
from refmount.formats.templates import Templates
from refmount.formats.values import ValueParser, check_range, describe
from refmount.model import ChunkGrid, Whole, ravel

_T = TypeVar("_T")

MAX_GEN_KEYS = 100_000_000
"""The most keys one ``gen`` item stored key by key may generate, and the most combinations
of its dimensions a grid item may render at load."""

GEN_KEY_COST = 300
"""Bytes of memory one ``gen`` key stored key by key is counted at against the cap on the
reference file (``--max-refs-size``), besides one byte per character of the key: what it
costs at the peak of a load (283 B measured at 10^7 keys, see docs/performance.md)."""

GRID_COLUMN_COST = 8
"""Bytes one key of a grid item costs per text kept as a column (only jinja renders it)."""


class GenBudget:
    """What the ``gen`` items of one file may cost in memory: ``cap`` bytes, the cap on the
    reference file (``--max-refs-size``), in all.

    A key stored key by key is counted at ``GEN_KEY_COST`` bytes when its item is reserved
    (before any item is generated: the number of keys is known from the dimensions), and
    one byte per character of the key as it is generated. A grid item costs what its columns
    hold (``GRID_COLUMN_COST`` bytes per key and column), counted before it is filled.
    """

    __slots__ = ("cap", "spent")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.spent = 0

    def over(self, cost: int) -> bool:
        """Count ``cost`` more bytes; return True when the total is now over the cap."""
        self.spent += cost
        return self.spent > self.cap


@dataclass(frozen=True, slots=True)
class _Item:
    """The fields of a ``gen`` item, checked (``offset`` and ``length`` only when ``ranged``)."""

    key: str
    url: str
    ranged: bool
    offset: object
    length: object
    names: tuple[str, ...]
    axes: list[Sequence[object]]
    count: int


class GenItem:
    """Expands one ``gen`` item into references."""

    __slots__ = ("_budget", "_parser", "_templates", "_where")

    def __init__(
        self, index: int, templates: Templates, parser: ValueParser, budget: GenBudget
    ) -> None:
        self._where = f"gen item {index}"
        self._templates = templates
        self._parser = parser
        self._budget = budget

    def error(self, problem: str, key: str | None = None) -> ReferenceFormatError:
        """Return the error to raise for this item (and the generated ``key``, if known)."""
        return self._parser.error(key, f"{self._where}: {problem}")

    def _fields(self, item: object) -> _Item:
        """Return the fields of ``item`` checked, or raise for the first that is wrong."""
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
        dimensions = item.get("dimensions")
        if not isinstance(dimensions, dict):
            raise self.error(f"'dimensions' must be an object, not {describe(dimensions)}")
        axes = [self._axis(name, spec) for name, spec in dimensions.items()]
        count = 1
        for axis in axes:
            count *= _length(axis)
        offset, length = item.get("offset"), item.get("length")
        return _Item(key_text, url_text, ranged, offset, length, tuple(dimensions), axes, count)

    def layout(self, item: object) -> tuple[ChunkGrid | None, str | None]:
        """Return the chunk grid ``item``'s keys are, if they are one, and what each of its
        keys starts with (None when it generates none, or is broken: then the load fails)."""
        try:
            fields = self._fields(item)
        except ReferenceFormatError:
            return None, None
        if fields.count == 0:
            return None, None
        key = self._templates.pieces(fields.key, fields.names)
        return grid_layout(key, fields.axes), leading_literal(fields.key, key)

    def too_costly(self, fields: _Item, what: str) -> ReferenceFormatError:
        """Return the error for an item whose keys (``what``) would take more memory than the
        budget allows."""
        budget = self._budget
        return self.error(
            f"key {fields.key!r}: {what}, more than the {budget.cap:,} bytes allowed, the "
            "limit on a reference file (--max-refs-size, -o max_refs_size=SIZE)"
        )

    def reserve(self, item: object) -> None:
        """Count what ``item``, stored key by key, costs before its keys' text against the
        budget, or raise: too many keys, or more memory than the budget has left."""
        try:
            fields = self._fields(item)
        except ReferenceFormatError:
            return  # raised by expand, in the order of the items
        count = fields.count
        if count > MAX_GEN_KEYS:
            raise self.error(f"generates {count:,} keys, more than {MAX_GEN_KEYS:,}")
        cost = count * GEN_KEY_COST
        if self._budget.over(cost):
            spent = self._budget.spent
            before = "" if spent == cost else " with the gen items before it"
            raise self.too_costly(
                fields,
                f"its {count:,} keys, stored one by one at {GEN_KEY_COST} bytes each plus "
                f"their text, would take at least {spent:,} bytes{before}",
            )

    def expand(self, item: object, out: CompactReferences) -> None:
        """Add the references that ``item`` generates to ``out``, replacing keys already there.

        Dimensions are combined as a Cartesian product in their order, the first varying
        slowest; ``key``, ``url``, ``offset`` and ``length`` are rendered with the dimension
        values and the templates; ``offset`` and ``length`` (both or neither) are then read
        as integers, and JSON integers are accepted as they are.
        """
        fields = self._fields(item)
        if fields.count == 0:
            return  # (itertools.product would still copy every other axis first)
        key_text, url_text, names = fields.key, fields.url, fields.names
        offset_value, length_value = fields.offset, fields.length
        render = self.render_text
        parser = self._parser
        offset_constant = _constant(offset_value)
        length_constant = _constant(length_value)
        budget = self._budget
        for values in itertools.product(*fields.axes):
            variables = dict(zip(names, values, strict=True))
            key = render(None, key_text, variables, "key")
            if budget.over(len(key)):
                raise self.too_costly(
                    fields,
                    f"its keys, stored one by one at {GEN_KEY_COST} bytes each plus their "
                    f"text, take more than that by key {key!r}",
                )
            url = render(key, url_text, variables, "url")
            if not url:
                raise self.error(f"the url {url_text!r} renders as an empty string", key)
            resolved = parser.rendered_url(key, url)
            if not fields.ranged:
                out.put(key, Whole(resolved))
                continue
            offset = offset_constant
            if offset is None:
                offset = self.integer(offset_value, "offset", key, variables)
            length = length_constant
            if length is None:
                length = self.integer(length_value, "length", key, variables)
            problem = check_range(offset, length)
            if problem is not None:
                raise self.error(problem, key)
            out.put_range(key, resolved, offset, length)

    def expand_grid(self, item: object, grid: ChunkGrid) -> GenGrid:
        """Return ``item``, whose keys are the chunk keys of ``grid``, as a ``GenGrid``.

        Every text is rendered at least once per key here, as ``expand`` renders it, and the
        first failure in key order is raised the same way. A text that plain substitution
        renders is rendered once for each combination of the dimensions it uses (the first
        failing combination is in the first failing key), and computed again when asked; a
        text that takes jinja is rendered for every key and kept as one value per key.
        """
        fields = self._fields(item)
        templates, names, shape = self._templates, fields.names, grid.shape
        url = templates.pieces(fields.url, names)
        offset = _int_pieces(templates, fields.offset, names) if fields.ranged else 0
        length = _int_pieces(templates, fields.length, names) if fields.ranged else 0
        texts = (url, offset, length)
        if any(text is None for text in texts):
            used = set(range(len(shape)))  # a column: every key, in order
        else:
            used = {d for text in texts if isinstance(text, tuple) for d in dimensions_of(text)}
        check = _GridCheck(self, grid, fields)
        url_ids: dict[str, int] = {}
        url_column = array("I") if url is None else None
        offsets = array("q") if offset is None else None
        lengths = array("q") if length is None else None
        axes = [range(extent) if d in used else range(1) for d, extent in enumerate(shape)]
        self._reserve_grid(fields, axes, (url_column, offsets, lengths))
        for indices in itertools.product(*axes):
            check.indices = indices
            found_url = check.url(url)
            if url_column is not None:
                url_column.append(url_ids.setdefault(found_url, len(url_ids)))
            if not fields.ranged:
                continue
            found_offset = check.number(offset, fields.offset, "offset")
            found_length = check.number(length, fields.length, "length")
            problem = check_range(found_offset, found_length)
            if problem is not None:
                raise self.error(problem, check.key)
            if offsets is not None:
                offsets.append(found_offset)
            if lengths is not None:
                lengths.append(found_length)
        return GenGrid(
            grid,
            url_column if url_column is not None else _settled_url(url, check.last_url),
            _settled_number(offset, offsets) if fields.ranged else None,
            _settled_number(length, lengths) if fields.ranged else None,
            tuple(url_ids),
            self._parser.resolver(),
        )

    def _reserve_grid(
        self, fields: _Item, axes: Sequence[range], columns: Sequence[array[int] | None]
    ) -> None:
        """Raise unless a grid item renders at most ``MAX_GEN_KEYS`` combinations of its
        dimensions (``axes``) at load and its ``columns`` fit in the budget."""
        renders = 1
        for axis in axes:
            renders *= len(axis)
        if renders > MAX_GEN_KEYS:
            raise self.error(
                f"renders {renders:,} combinations of its dimensions, more than {MAX_GEN_KEYS:,}"
            )
        kept = sum(column is not None for column in columns)
        if kept and self._budget.over(fields.count * kept * GRID_COLUMN_COST):
            raise self.too_costly(
                fields,
                f"its {fields.count:,} keys keep {kept} value(s) of {GRID_COLUMN_COST} bytes "
                f"each: {self._budget.spent:,} bytes with the gen items before it",
            )

    def rendered_url(self, key: str, text: str) -> str:
        """Return the absolute URL that the rendered ``text`` names (remembered)."""
        return self._parser.rendered_url(key, text)

    def render_text(
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

    def integer(self, value: object, field: str, key: str, variables: Mapping[str, object]) -> int:
        """Return an ``offset`` or ``length``: a JSON integer, or a template rendered and parsed."""
        if type(value) is int:
            return value
        if not isinstance(value, str):
            raise self.error(
                f"'{field}' must be a string or an integer, not {describe(value)}", key
            )
        text = self.render_text(key, value, variables, field)
        try:
            return int(text)
        except ValueError:
            raise self.error(f"{field} {text!r} is not an integer", key) from None


class _GridCheck:
    """Renders the texts of a grid item for one combination of indices after another
    (``indices``), raising as ``GenItem.expand`` would for the first key that has them."""

    __slots__ = ("_fields", "_grid", "_item", "_last_text", "indices", "last_url")

    def __init__(self, item: GenItem, grid: ChunkGrid, fields: _Item) -> None:
        self._item = item
        self._grid = grid
        self._fields = fields
        self.indices: tuple[int, ...] = ()
        self._last_text: str | None = None
        self.last_url = ""

    @property
    def key(self) -> str:
        """Return the first key with the current indices (the others at 0)."""
        return self._grid.key(ravel(self.indices, self._grid.shape))

    def _variables(self) -> dict[str, object]:
        return dict(zip(self._fields.names, self.indices, strict=True))

    def url(self, pieces: Pieces | None) -> str:
        """Return the absolute URL of the current key."""
        item = self._item
        if pieces is None:
            text = item.render_text(self.key, self._fields.url, self._variables(), "url")
        else:
            text = render(pieces, self.indices)
        if text == self._last_text:
            return self.last_url
        if not text:
            problem = f"the url {self._fields.url!r} renders as an empty string"
            raise item.error(problem, self.key)
        self.last_url = item.rendered_url(self.key, text)
        self._last_text = text
        return self.last_url

    def number(self, text: int | Pieces | None, value: object, field: str) -> int:
        """Return the offset or length (``field``) of the current key."""
        if isinstance(text, int):
            return text
        if text is None:
            return self._item.integer(value, field, self.key, self._variables())
        rendered = render(text, self.indices)
        try:
            return int(rendered)
        except ValueError:
            raise self._item.error(f"{field} {rendered!r} is not an integer", self.key) from None


def _int_pieces(templates: Templates, value: object, names: Sequence[str]) -> int | Pieces | None:
    """Return an offset or length as a constant or a text plain substitution renders, or None
    when only jinja renders it (or it is not a string at all: rendering says so)."""
    constant = _constant(value)
    if constant is not None:
        return constant
    if isinstance(value, str):
        return templates.pieces(value, names)
    return None


def _settled_url(pieces: Pieces | None, last: str) -> UrlField:
    """Return how a grid finds its URLs: the one URL every key has, or the text."""
    assert pieces is not None
    return pieces if dimensions_of(pieces) else last


def _settled_number(text: int | Pieces | None, column: array[int] | None) -> IntField:
    """Return how a grid finds its offsets or lengths: a constant, a text, or the column."""
    if column is not None:
        return column
    assert text is not None
    if isinstance(text, int):
        return text
    return text if dimensions_of(text) else int(render(text, ()))


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
            return None  # reported, with the key, by GenItem.integer
    return None
