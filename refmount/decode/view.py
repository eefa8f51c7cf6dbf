"""The decoded view of a reference set: the plan and the references as served.

``plan`` looks at the metadata once, at mount: which arrays are decoded (their codecs are
all allowed and a decoded chunk fits a quarter of the cache), which are served as stored
and why, and the rewritten JSON of every metadata document. ``DecodedReferences`` serves
those documents and the decoded sizes in place of the stored ones; the bytes of decoded
chunks are ``decode.reader``'s. Neither changes what the rest of the tree serves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refmount.decode import metadata
from refmount.decode.codecs import Pipeline, v2_pipeline, v3_pipeline
from refmount.decode.decompress import Undecodable
from refmount.errors import ReferenceFormatError
from refmount.formats.zarr_meta import ZARR_JSON, ZARRAY, grid_from_zarr_json, grid_from_zarray
from refmount.model import ChunkGrid, Inline, Reference, ReferenceSet, ReferenceView, ravel
from refmount.zarr2.view import StoredArray, Zarr2References

log = logging.getLogger(__name__)

CACHE_SHARE = 4
"""An array whose decoded chunk exceeds ``cache_size / CACHE_SHARE`` is served as stored."""


@dataclass(frozen=True, slots=True)
class DecodedArray:
    """An array served decoded: its key prefix, chunk grid and decoding pipeline."""

    path: str
    grid: ChunkGrid
    pipeline: Pipeline

    def is_chunk(self, name: str) -> bool:
        """Return True when ``name`` (the key below the array) names one of its chunks."""
        return self.index_of(name) is not None

    def index_of(self, name: str) -> int | None:
        """Return the C-order index of chunk ``name`` (the key below the array), or None."""
        grid = self.grid
        if not grid.shape:
            return 0 if name == grid.scalar_name() else None
        if grid.prefix:
            head, _, name = name.partition("/")
            if head != grid.prefix:
                return None
        parts = name.split(grid.separator)
        if len(parts) != len(grid.shape):
            return None
        if not all(p.isdigit() and int(p) < n for p, n in zip(parts, grid.shape, strict=True)):
            return None
        return ravel([int(p) for p in parts], grid.shape)

    def chunk_index(self, key: str) -> int:
        """Return the C-order index of the chunk whose full key is ``key``."""
        index = self.index_of(key[len(self.path) + 1 :] if self.path else key)
        assert index is not None  # only asked of keys chunk_array matched to this array
        return index


@dataclass(slots=True)
class Plan:
    """What ``--decode`` does with one reference set, decided from its metadata at mount."""

    arrays: dict[str, DecodedArray] = field(default_factory=dict)
    stored: list[StoredArray] = field(default_factory=list)
    documents: dict[str, bytes] = field(default_factory=dict)

    def chunk_array(self, key: str) -> DecodedArray | None:
        """Return the decoded array ``key`` is a chunk of, or None."""
        if not self.arrays:
            return None
        end = len(key)
        while end >= 0:
            end = key.rfind("/", 0, end)
            path, name = (key[:end], key[end + 1 :]) if end >= 0 else ("", key)
            array = self.arrays.get(path)
            if array is not None and array.is_chunk(name):
                return array
            if end < 0:
                return None
        return None

    def warn(self) -> None:
        """Log one warning per array served as stored, then how many arrays are decoded."""
        for stored in self.stored:
            log.warning("--decode: %s", stored.describe())
        log.info(
            "--decode: %d arrays decoded, %d served as stored", len(self.arrays), len(self.stored)
        )


_NOT_INLINE = "its metadata lies in a target, not in the set: it is not read at mount"


def plan(references: ReferenceSet, cache_size: int) -> Plan:
    """Decide, from the metadata alone, which arrays are decoded and rewrite the metadata."""
    documents: dict[str, Any] = {}
    result = Plan()
    keys = references.keys()  # a ReferenceSet is not itself iterable
    for key in keys:
        path, _, name = key.rpartition("/")
        if name not in metadata.JSON_NAMES:
            continue
        reference = references.get(key)
        if not isinstance(reference, Inline):
            if reference is not None and name in (ZARRAY, ZARR_JSON):
                result.stored.append(StoredArray(path, "metadata", _NOT_INLINE))
            continue
        try:
            documents[key] = metadata.parse(reference.data)
        except ValueError:
            continue
    decoded_v3 = references.plan.decoded_v3 if isinstance(references, Zarr2References) else {}
    for key, document in _array_documents(documents).items():
        _plan_array(result, key, document, cache_size, decoded_v3)

    def rewrite(key: str, document: Any) -> Any:
        path, _, name = key.rpartition("/")
        array = result.arrays.get(path)
        if name == ZARRAY and array is not None:
            return metadata.decoded_zarray(document)
        if name == ZARR_JSON:
            if array is not None:
                return metadata.decoded_zarr_json(document)
            base = f"{path}/" if path else ""
            return metadata.consolidated(document, rewrite, base)
        if name == metadata.ZMETADATA:
            return metadata.consolidated(document, rewrite, f"{path}/" if path else "")
        return document

    for key, document in documents.items():
        result.documents[key] = metadata.dumps(rewrite(key, document))
    return result


def _array_documents(documents: Mapping[str, Any]) -> dict[str, Any]:
    """Return the array metadata documents by key: stored keys, and consolidated entries."""
    found: dict[str, Any] = {}
    for key, document in documents.items():
        path, _, name = key.rpartition("/")
        if name == metadata.ZMETADATA and isinstance(document, dict):
            base = f"{path}/" if path else ""
            entries = document.get("metadata")
            for entry, value in entries.items() if isinstance(entries, dict) else ():
                if entry.rpartition("/")[2] in (ZARRAY, ZARR_JSON):
                    parsed = _parsed(value)
                    if parsed is not None:
                        found.setdefault(base + entry, parsed)
    for key, document in documents.items():
        if key.rpartition("/")[2] in (ZARRAY, ZARR_JSON):
            found[key] = document
    return found


def _parsed(value: Any) -> Any:
    """Return a consolidated entry as a document (it may be JSON text); None if malformed."""
    if not isinstance(value, str):
        return value
    try:
        return metadata.parse(value)
    except ValueError:
        return None


def decodes_v3(document: Mapping[str, Any], cache_size: int) -> bool:
    """Return True when a v3 array (its ``zarr.json``) would be decoded (for the zarr v2
    view, which then serves it as v2 in decoded form)."""
    try:
        return v3_pipeline(document).size <= cache_size // CACHE_SHARE
    except (Undecodable, KeyError, TypeError, ValueError):
        return False


def _plan_array(
    result: Plan,
    key: str,
    document: Any,
    cache_size: int,
    decoded_v3: Mapping[str, Mapping[str, Any]],
) -> None:
    """Add the array described by ``document`` (at ``key``) to the plan, decoded or stored.

    An array of ``decoded_v3`` is a v3 array the zarr v2 view serves as v2 in decoded form:
    its ``.zarray`` has the v2 grid, its ``zarr.json`` the pipeline."""
    if not isinstance(document, dict):
        return
    path, _, name = key.rpartition("/")
    try:
        if name == ZARRAY:
            grid: ChunkGrid | None = grid_from_zarray(path, document, "", key)
            stored = decoded_v3.get(path)
            pipeline = v2_pipeline(document) if stored is None else v3_pipeline(stored)
        else:
            grid = grid_from_zarr_json(path, document, "", key)
            if grid is None:
                return  # a group
            pipeline = v3_pipeline(document)
    except ReferenceFormatError:
        return  # the loader reported (or skipped) malformed metadata
    except Undecodable as refusal:
        result.stored.append(StoredArray(path, refusal.codec, refusal.reason))
        return
    except (KeyError, TypeError, ValueError) as error:
        result.stored.append(StoredArray(path, "metadata", f"cannot be read: {error}"))
        return
    if pipeline.size > cache_size // CACHE_SHARE:
        result.stored.append(
            StoredArray(
                path,
                pipeline.names,
                f"a decoded chunk would be {pipeline.size} bytes, over a quarter of the "
                f"cache ({cache_size} bytes)",
            )
        )
        return
    assert grid is not None
    result.arrays[path] = DecodedArray(path, grid, pipeline)


class DecodedReferences(ReferenceView):
    """A ``ReferenceSet`` whose metadata is rewritten and whose decoded chunks have their
    decoded size; chunk references stay those of the stored bytes (``DecodingReader``
    decodes them), and so do keys, grids, absence and the stored ranges neighbour prefetch
    fetches."""

    def __init__(self, inner: ReferenceSet, decisions: Plan) -> None:
        super().__init__(inner)
        self._plan = decisions
        self._grid_arrays = [decisions.arrays.get(grid.array) for grid in inner.grids]
        self._grid_numbers = {grid.array: number for number, grid in enumerate(inner.grids)}

    def chunk_now(self, array: DecodedArray, index: int) -> tuple[str, Reference] | None:
        """Return the key and stored reference of chunk ``index`` of ``array`` when they are
        known without I/O (an explicit key, or a chunk of a loaded Parquet record)."""
        key = array.grid.key(index)
        reference = self._inner.get(key)
        if reference is not None:
            return key, reference
        number = self._grid_numbers.get(array.path)
        if number is None or not self._inner.chunk_is_loaded(number, index):
            return None
        try:
            reference = self._inner.chunk(number, index)
        except ReferenceFormatError:
            return None
        return None if reference is None else (key, reference)

    def get(self, key: str) -> Reference | None:
        """Return the rewritten document of a metadata key, else the stored reference."""
        document = self._plan.documents.get(key)
        if document is not None:
            return Inline(document)
        return self._inner.get(key)

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        """Return the lengths of explicit keys as served (decoded chunks: their full size)."""
        lengths = self._inner.known_lengths(prefix, names)
        decisions = self._plan
        for position, name in enumerate(names):
            key = prefix + name.decode("utf-8")
            document = decisions.documents.get(key)
            if document is not None:
                lengths[position] = len(document)
                continue
            array = decisions.chunk_array(key)
            if array is not None and (
                lengths[position] is not None or self._inner.get(key) is not None
            ):
                lengths[position] = array.pipeline.size
        return lengths

    def chunk_sizes(self, grid: int, start: int, stop: int) -> list[int | None] | None:
        """Return chunk sizes as served: a decoded array's present chunks have its full size."""
        sizes = self._inner.chunk_sizes(grid, start, stop)
        array = self._grid_arrays[grid]
        if sizes is None or array is None:
            return sizes
        size = array.pipeline.size
        return [s if s is None or s < 0 else size for s in sizes]
