"""The zarr v2 view of a reference set (``--zarr-format 2``): the plan and the references
as served.

``plan`` reads every ``zarr.json`` once, at mount, and decides: each group becomes
``.zgroup`` + ``.zattrs``; each array with a v2 form (``zarr2.metadata``) becomes ``.zarray``
+ ``.zattrs`` and its chunks are renamed ``I.J``; the other arrays are served as stored,
each with the reason. A directory above a viewed node that has no metadata of its own gets
a ``.zgroup``, and a root group gets a ``.zmetadata`` consolidating every v2 document served
(so consolidated opens see the whole view; it replaces a stored one).

``Zarr2References`` serves that plan over the references it wraps. It must wrap them before
the namespace is built (names change), and ``--decode`` wraps it in turn: the decoded view
then sees v2 arrays and decodes them like any other. A viewed array's chunk grid is replaced
by a v2 grid of the same shape, numbered in the same C order, so ``chunk(grid, index)`` and
the other grid methods delegate unchanged; explicit chunk keys (``temp/c/0/1`` of a JSON set)
are renamed (``temp/0.1``), a stored key that a served name would shadow is hidden.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refmount.errors import ReferenceFormatError
from refmount.formats.zarr_json import ZATTRS, ZGROUP, ZMETADATA, dumps, parse
from refmount.formats.zarr_meta import ZARR_JSON, ZARRAY, grid_from_zarr_json
from refmount.model import (
    ChunkGrid,
    Inline,
    Reference,
    ReferenceSet,
    ReferenceView,
)
from refmount.zarr2.metadata import (
    NotViewable,
    array_documents,
    decoded_array_documents,
    group_documents,
)

log = logging.getLogger(__name__)

V2_NAMES = frozenset({ZARRAY, ZATTRS, ZGROUP})
"""The names of zarr v2 node documents (consolidated at the root)."""

NOT_INLINE = "its zarr.json lies in a target, not in the set: it is not read at mount"

Decodes = Callable[[Mapping[str, Any]], bool]
"""Tells whether ``--decode`` decodes a v3 array, from its ``zarr.json``
(``decode.view.decodes_v3``). Given to ``plan`` under ``--decode``: an array whose codecs
have no v2 form but that is decoded is served as v2 in its decoded form."""


@dataclass(frozen=True, slots=True)
class ViewedArray:
    """An array served as v2: its key prefix, its chunk grid as stored (v3 names) and as
    served (``I.J``, the same shape and numbering)."""

    path: str
    stored: ChunkGrid
    grid: ChunkGrid
    _stored_head: str = field(init=False, repr=False, compare=False)
    _served_head: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_stored_head", _head(self.stored))
        object.__setattr__(self, "_served_head", _head(self.grid))

    def served_key(self, stored_key: str) -> str | None:
        """Return the v2 name of a stored chunk key of this array, or None if it is none."""
        if not self.stored.shape:
            return self.grid.key(0) if stored_key == self.stored.key(0) else None
        return _renamed(
            stored_key, self._stored_head, self.stored, self._served_head, self.grid.separator
        )

    def stored_key(self, served_key: str) -> str | None:
        """Return the stored key of a chunk named ``served_key`` in v2, or None."""
        if not self.grid.shape:
            return self.stored.key(0) if served_key == self.grid.key(0) else None
        return _renamed(
            served_key, self._served_head, self.grid, self._stored_head, self.stored.separator
        )


def _head(grid: ChunkGrid) -> str:
    """Return what precedes a chunk's indices in its key: ``"temp/c/"``, ``"temp/"``, ``""``."""
    head = "/".join(part for part in (grid.array, grid.prefix) if part)
    return f"{head}/" if head else ""


def _renamed(
    key: str, head: str, source: ChunkGrid, target_head: str, target_separator: str
) -> str | None:
    """Return the key, under ``target_head`` with ``target_separator``, of the chunk that
    ``source`` calls ``key``; None if ``key`` names no chunk of ``source`` (indices
    canonical and in range, as ``ChunkGrid.index_of`` wants).

    The indices are carried over as text, no flat index computed: listings and ``keys``
    rename every chunk key of a JSON set this way."""
    if not key.startswith(head):
        return None
    parts = key[len(head) :].split(source.separator)
    shape = source.shape
    if len(parts) != len(shape):
        return None
    for part, extent in zip(parts, shape, strict=True):
        if not part.isdigit() or not part.isascii() or (part[0] == "0" and len(part) > 1):
            return None
        if int(part) >= extent:
            return None
    return target_head + target_separator.join(parts)


@dataclass(frozen=True, slots=True)
class StoredArray:
    """An array a view (this one, or ``--decode``'s) serves as stored: what stands in the way
    (a codec, the data type, the metadata) and why."""

    path: str
    codec: str
    reason: str

    def describe(self) -> str:
        """Return the warning line: the array, what stands in the way and why."""
        return f"array {self.path or '/'!r} is served as stored: {self.codec}: {self.reason}"


@dataclass(slots=True)
class Plan:
    """What ``--zarr-format 2`` does with one reference set, decided at mount."""

    arrays: dict[str, ViewedArray] = field(default_factory=dict)
    stored: list[StoredArray] = field(default_factory=list)
    documents: dict[str, bytes] = field(default_factory=dict)
    """The v2 documents served, by key."""
    hidden: set[str] = field(default_factory=set)
    """The stored ``zarr.json`` keys the documents replace."""
    decoded_v3: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """Arrays served as v2 only in decoded form (their codecs have no v2 form), by path: their
    ``zarr.json``, from which ``--decode`` builds their pipeline."""
    groups: int = 0

    def owner(self, key: str) -> ViewedArray | None:
        """Return the viewed array whose directory holds ``key`` (at any depth), or None."""
        if not self.arrays:
            return None
        end = len(key)
        while end > 0:
            end = key.rfind("/", 0, end)
            array = self.arrays.get(key[:end] if end > 0 else "")
            if array is not None:
                return array
        return None

    def warn(self) -> None:
        """Log one warning per array served as stored, then what the view serves."""
        for stored in self.stored:
            log.warning("--zarr-format 2: %s", stored.describe())
        log.info(
            "--zarr-format 2: %d arrays and %d groups served as v2, %d arrays as stored",
            len(self.arrays),
            self.groups,
            len(self.stored),
        )


def plan(references: ReferenceSet, decodes: Decodes | None = None) -> Plan:
    """Decide, from the metadata alone, what the v2 view serves (see the module); with
    ``decodes`` (under ``--decode``), arrays with no v2 codecs that it decodes are served as
    v2 in decoded form."""
    result = Plan()
    nodes: set[str] = set()  # directories with metadata of their own, stored or served
    v2_documents: dict[str, Any] = {}  # stored v2 documents, for the consolidated metadata
    consolidated: Any = None
    keys = references.keys()  # a ReferenceSet is not itself iterable
    for key in keys:
        path, _, name = key.rpartition("/")
        if name == ZARR_JSON:
            nodes.add(path)
            _plan_node(result, references, key, decodes)
        elif name in V2_NAMES or name == ZMETADATA:
            if name != ZATTRS:
                nodes.add(path)
            document = _inline_document(references.get(key))
            if name == ZMETADATA and not path:
                consolidated = document
            elif document is not None and name != ZMETADATA:
                v2_documents[key] = document
    for key in list(v2_documents):
        if key in result.documents:
            del v2_documents[key]  # a served document wins over a stored one
    for path in sorted({key.rpartition("/")[0] for key in result.documents}):
        _add_parent_groups(result, path, nodes, v2_documents)
    root_group = ZGROUP in v2_documents or ZGROUP in result.documents or consolidated is not None
    if result.documents and root_group:  # a set of v2 nodes alone is left as it is
        result.documents[ZMETADATA] = dumps(_consolidated(result, v2_documents, consolidated))
    return result


def _plan_node(result: Plan, references: ReferenceSet, key: str, decodes: Decodes | None) -> None:
    """Add the node whose ``zarr.json`` is ``key`` to the plan: v2 documents or stored."""
    path = key.rpartition("/")[0]
    reference = references.get(key)
    if not isinstance(reference, Inline):
        if reference is not None:
            result.stored.append(StoredArray(path, "metadata", NOT_INLINE))
        return
    document = _inline_document(reference)
    if not isinstance(document, dict):
        return  # the loader reported (or skipped) malformed metadata
    base = f"{path}/" if path else ""
    if document.get("node_type") == "group":
        zgroup, zattrs = group_documents(document)
        result.documents[base + ZGROUP] = dumps(zgroup)
        result.documents[base + ZATTRS] = dumps(zattrs)
        result.hidden.add(key)
        result.groups += 1
        return
    try:
        stored = grid_from_zarr_json(path, document, references.source, key)
    except ReferenceFormatError:
        return  # the loader reported (or skipped) it
    if stored is None:
        return
    try:
        zarray, zattrs = array_documents(document)
    except NotViewable as refusal:
        try:
            if decodes is None or not decodes(document):
                raise
            zarray, zattrs = decoded_array_documents(document)
        except NotViewable:
            result.stored.append(StoredArray(path, refusal.codec, refusal.reason))
            return
        result.decoded_v3[path] = document
    result.documents[base + ZARRAY] = dumps(zarray)
    result.documents[base + ZATTRS] = dumps(zattrs)
    result.hidden.add(key)
    result.arrays[path] = ViewedArray(path, stored, ChunkGrid(path, stored.shape, "."))


def _add_parent_groups(
    result: Plan, path: str, nodes: set[str], v2_documents: Mapping[str, Any]
) -> None:
    """Give each directory above ``path`` without metadata of its own a ``.zgroup``."""
    while path:
        path = path.rpartition("/")[0]
        if path in nodes:
            return
        nodes.add(path)
        base = f"{path}/" if path else ""
        if base + ZARRAY not in v2_documents:
            result.documents[base + ZGROUP] = dumps({"zarr_format": 2})


def _consolidated(result: Plan, v2_documents: Mapping[str, Any], stored: Any) -> dict[str, Any]:
    """Return the root ``.zmetadata``: every v2 document served, the stored fields kept."""
    out = dict(stored) if isinstance(stored, dict) else {}
    entries = dict(v2_documents)
    for key, data in result.documents.items():
        if key != ZMETADATA:
            entries[key] = parse(data)
    out["zarr_consolidated_format"] = 1
    out["metadata"] = dict(sorted(entries.items()))
    return out


def _inline_document(reference: Reference | None) -> Any:
    """Return the parsed JSON of an inline reference; None if not inline or not JSON."""
    if not isinstance(reference, Inline):
        return None
    try:
        return parse(reference.data)
    except ValueError:
        return None


class Zarr2References(ReferenceView):
    """A ``ReferenceSet`` that serves a v2 view of the v3 nodes ``decisions`` chose: their v2
    documents instead of ``zarr.json``, their chunks under v2 names, their v2 grids. Chunk
    numbers, sizes, absence and references are the stored ones: renaming changes none."""

    def __init__(self, inner: ReferenceSet, decisions: Plan) -> None:
        super().__init__(inner)
        self._plan = decisions
        self._grids = [
            _viewed.grid if (_viewed := decisions.arrays.get(grid.array)) is not None else grid
            for grid in inner.grids
        ]

    @property
    def plan(self) -> Plan:
        """Return what the view serves."""
        return self._plan

    def keys(self) -> Iterable[str]:
        """Return the explicit keys as served: stored ones renamed or hidden, then the v2
        documents."""
        return self._keys()

    def _keys(self) -> Iterator[str]:
        documents = self._plan.documents
        keys = self._inner.keys()  # a ReferenceSet is not itself iterable
        for key in keys:
            served = self._served(key)
            if served is not None and served not in documents:
                yield served
        yield from documents

    def _served(self, key: str) -> str | None:
        """Return the name a stored explicit key is served under, or None if hidden."""
        if key in self._plan.hidden:
            return None
        array = self._plan.owner(key)
        if array is None:
            return key
        served = array.served_key(key)
        if served is not None:
            return served
        if array.stored_key(key) is not None:
            return None  # a v2 chunk name of a viewed array: only its renamed chunk has it
        return key

    def _stored(self, key: str) -> str | None:
        """Return the stored key behind served key ``key`` (not a document), or None."""
        if key in self._plan.hidden:
            return None
        array = self._plan.owner(key)
        if array is None:
            return key
        stored = array.stored_key(key)
        if stored is not None:
            return stored
        if array.served_key(key) is not None:
            return None  # the stored name of a renamed chunk
        return key

    def get(self, key: str) -> Reference | None:
        """Return a v2 document, else the stored reference behind a served key."""
        document = self._plan.documents.get(key)
        if document is not None:
            return Inline(document)
        stored = self._stored(key)
        return None if stored is None else self._inner.get(stored)

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        """Return the lengths of explicit keys as served (asked of the stored keys behind
        them, grouped by their directory)."""
        decisions = self._plan
        if decisions.owner(prefix + "-") is None:  # no chunk here is renamed
            found = self._inner.known_lengths(prefix, names)
            for position, name in enumerate(names):
                key = prefix + name.decode("utf-8")
                document = decisions.documents.get(key)
                if document is not None:
                    found[position] = len(document)
                elif key in decisions.hidden:
                    found[position] = None
            return found
        lengths: list[int | None] = [None] * len(names)
        asked: dict[str, tuple[list[int], list[bytes]]] = {}
        for position, name in enumerate(names):
            key = prefix + name.decode("utf-8")
            document = decisions.documents.get(key)
            if document is not None:
                lengths[position] = len(document)
                continue
            stored = self._stored(key)
            if stored is None:
                continue
            head, _, tail = stored.rpartition("/")
            positions, tails = asked.setdefault(f"{head}/" if head else "", ([], []))
            positions.append(position)
            tails.append(tail.encode("utf-8"))
        for head, (positions, tails) in asked.items():
            for position, length in zip(
                positions, self._inner.known_lengths(head, tails), strict=True
            ):
                lengths[position] = length
        return lengths

    @property
    def grids(self) -> Sequence[ChunkGrid]:
        """Return the chunk grids: a viewed array's in v2 form, the others as stored."""
        return self._grids


def zarr2_view(references: ReferenceSet, decodes: Decodes | None = None) -> Zarr2References:
    """Return the v2 view of ``references``; warn once per array served as stored."""
    decisions = plan(references, decodes)
    decisions.warn()
    return Zarr2References(references, decisions)
