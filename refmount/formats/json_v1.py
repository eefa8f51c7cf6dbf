"""Version 1 reference files: ``templates``, ``gen`` and ``refs``; which ``gen`` items are kept
as grids (the items themselves are ``gen_items``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from refmount.errors import OnInvalid, ReferenceFormatError
from refmount.formats.compact import CompactReferences
from refmount.formats.gen_grid import (
    GenGrid,
    GenGrids,
    refs_inside,
    unreachable,
)
from refmount.formats.gen_items import GenBudget, GenItem
from refmount.formats.json_v0 import parse_refs
from refmount.formats.options import LoadOptions
from refmount.formats.templates import Templates
from refmount.formats.values import ValueParser, describe
from refmount.model import ChunkGrid

_T = TypeVar("_T")


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
    expand_gen(gen, templates, parser, refs, options.size_cap())
    return refs


def expand_gen(
    gen: Sequence[object],
    templates: Templates,
    parser: ValueParser,
    refs: CompactReferences,
    cap: int,
) -> None:
    """Add the references of every ``gen`` item to ``refs``; generated keys replace ``refs``
    keys of the same name.

    Items whose keys are a chunk grid no other item reaches are kept as grids
    (``refs.generated``, see ``gen_grid``); the others are stored key by key. What the items
    cost in memory counts against ``cap`` (see ``GenBudget``), before anything is generated.
    """
    budget = GenBudget(cap)
    items = [GenItem(index, templates, parser, budget) for index in range(len(gen))]
    candidates: dict[int, ChunkGrid] = {}
    literals: list[str | None] = []
    for number, item in enumerate(items):
        grid, literal = item.layout(gen[number])
        literals.append(literal)
        if grid is not None:
            candidates[number] = grid
    alone = unreachable(candidates, literals) if candidates else set()
    grids = {number: candidates[number] for number in sorted(alone)}
    hidden: dict[int, list[str]] = {}
    if grids and len(refs):
        hidden, spoiled = refs_inside(grids, refs)
        for number in spoiled:
            del grids[number]
    for number, item in enumerate(items):
        if number not in grids:
            item.reserve(gen[number])
    made: list[GenGrid] = []
    for number, item in enumerate(items):
        grid = grids.get(number)
        if grid is None:
            refs.expect_duplicates()
            item.expand(gen[number], refs)
        else:
            made.append(item.expand_grid(gen[number], grid))
    if made:
        replaced = (key for number in grids for key in hidden.get(number, ()))
        refs.generated = GenGrids(made, replaced)


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
