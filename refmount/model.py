"""The vocabulary every layer shares: references, chunk grids, reference sets, sources."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NewType, Protocol

Inode = NewType("Inode", int)
"""A node's number in the mounted tree; the root is 1 and numbers never change while mounted."""

FileHandle = NewType("FileHandle", int)
"""A number handed to the kernel by ``open`` and passed back with every ``read``."""

ROOT_INODE = Inode(1)


@dataclass(frozen=True, slots=True)
class Inline:
    """Bytes stored in the reference set itself (text, ``base64:`` or a JSON object)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Range:
    """``length`` bytes of the target ``url`` starting at byte ``offset``."""

    url: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Whole:
    """The whole target ``url``; its size is only known after asking the target."""

    url: str


Reference = Inline | Range | Whole


def reference_kind(reference: Reference) -> str:
    """Return the short name of a reference's kind, as shown in ``user.refmount.kind``."""
    match reference:
        case Inline():
            return "inline"
        case Range():
            return "range"
        case Whole():
            return "whole"


@dataclass(frozen=True, slots=True)
class ChunkGrid:
    """The chunk keys of one array, derived from its zarr metadata instead of being stored.

    ``array`` is the array's key prefix (``"x"`` or ``"deep/s"``); ``shape`` is the number of
    chunks along each dimension (``()`` for a 0-d array, which has exactly one chunk);
    ``separator`` joins the indices (``"."`` keeps them in one name, ``"/"`` nests directories);
    ``prefix`` is a leading path component such as zarr v3's ``"c"``, or ``""``.
    Chunk ``n`` is the ``n``-th index of the grid in C order.
    """

    array: str
    shape: tuple[int, ...]
    separator: str
    prefix: str = ""

    @property
    def count(self) -> int:
        """Return how many chunk keys the grid has."""
        total = 1
        for extent in self.shape:
            total *= extent
        return total

    def scalar_name(self) -> str:
        """Return the name of the single chunk of a 0-d array."""
        return self.prefix or "0"

    def key(self, index: int) -> str:
        """Return the full key of chunk number ``index``."""
        parts: list[str] = []
        if self.array:
            parts.append(self.array)
        if not self.shape:
            parts.append(self.scalar_name())
            return "/".join(parts)
        if self.prefix:
            parts.append(self.prefix)
        indices = unravel(index, self.shape)
        parts.append(self.separator.join(str(i) for i in indices))
        return "/".join(parts)

    def index_of(self, key: str) -> int | None:
        """Return the number of the chunk whose key is ``key``, or None when no chunk has it
        (the indices must be spelled canonically, as ``key`` spells them)."""
        if not self.shape:
            return 0 if key == self.key(0) else None
        head = "/".join(part for part in (self.array, self.prefix) if part)
        if head:
            if not key.startswith(head + "/"):
                return None
            key = key[len(head) + 1 :]
        parts = key.split(self.separator)
        if len(parts) != len(self.shape):
            return None
        indices = [
            canonical_index(part, extent) for part, extent in zip(parts, self.shape, strict=True)
        ]
        if any(index is None for index in indices):
            return None
        return ravel([index or 0 for index in indices], self.shape)


def canonical_index(name: str, extent: int) -> int | None:
    """Return the chunk index that ``name`` spells, or None unless it is canonical and in range.

    Canonical means plain ASCII decimal without sign, spaces or leading zeros.
    """
    if not name.isascii() or not name.isdigit() or (len(name) > 1 and name[0] == "0"):
        return None
    value = int(name)
    return value if value < extent else None


def unravel(index: int, shape: Sequence[int]) -> tuple[int, ...]:
    """Return the C-order multi-index of flat ``index`` in a grid of ``shape``."""
    out: list[int] = []
    for extent in reversed(shape):
        index, rest = divmod(index, extent)
        out.append(rest)
    return tuple(reversed(out))


def ravel(indices: Sequence[int], shape: Sequence[int]) -> int:
    """Return the flat C-order index of ``indices`` in a grid of ``shape``."""
    flat = 0
    for index, extent in zip(indices, shape, strict=True):
        flat = flat * extent + index
    return flat


@dataclass(slots=True)
class ChunkRanges:
    """Offsets and lengths of some range references into one target, in the same order."""

    offsets: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)


def reference_length(reference: Reference | None) -> int | None:
    """Return the byte length of a range or inline reference; None for a whole file or none."""
    if isinstance(reference, Range):
        return reference.length
    if isinstance(reference, Inline):
        return len(reference.data)
    return None


class ReferenceSet(Protocol):
    """A loaded reference set: explicit keys, plus chunk grids whose keys are derived."""

    @property
    def source(self) -> str:
        """Name the reference file or directory, for messages."""
        ...

    def keys(self) -> Iterable[str]:
        """Return every explicitly stored key (all keys of JSON, the metadata of Parquet)."""
        ...

    def get(self, key: str) -> Reference | None:
        """Return the reference of an explicit key, or ``None``; never blocks."""
        ...

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        """Return the byte length of each explicit key ``prefix + name`` (names in UTF-8)'s
        range or inline data, without building references (a listing's hot path); None for a
        whole-file reference or no key."""
        ...

    @property
    def grids(self) -> Sequence[ChunkGrid]:
        """Return the chunk grids whose keys are not stored but derived (Parquet only)."""
        ...

    def chunk_is_loaded(self, grid: int, index: int) -> bool:
        """Return True when ``chunk(grid, index)`` will answer without I/O."""
        ...

    def chunk_sizes(self, grid: int, start: int, stop: int) -> list[int | None] | None:
        """Return, for listings, the sizes of chunks from ``start`` on, without I/O.

        Up to ``stop`` (it may stop earlier, never before ``start + 1``): each item is the
        chunk's size, ``-1`` for an absent chunk, or ``None`` when only ``chunk`` can tell.
        None altogether when ``start`` is not loaded (``chunk_is_loaded`` is False).
        """
        ...

    def chunk_ranges(self, grid: int, start: int, stop: int) -> dict[str, ChunkRanges]:
        """Return, per target URL, the range references of chunks ``[start, stop)``, without
        I/O: for neighbour prefetch, which indexes a directory's chunks by offset.

        Only chunks ``chunk`` would answer without I/O with a ``Range`` of at least one byte
        are given, in chunk order; the rest (not loaded, absent, inline, whole files,
        malformed rows) are left out.
        """
        ...

    def skip_absent(self, grid: int, start: int, stop: int, *, load: bool) -> int:
        """Return the first chunk index in ``[start, stop)`` not known to be absent (``stop``
        when there is none), for listings that must not walk a sparse grid position by
        position.

        Without ``load``, never blocks (the index is present or not loaded yet). With ``load``
        it may block on I/O, bounded: the index is present, or where the bounded work stopped.
        """
        ...

    def chunk(self, grid: int, index: int) -> Reference | None:
        """Return the reference of chunk ``index`` of grid number ``grid``, or ``None`` if absent.

        May block on I/O (a Parquet record file is read the first time it is needed), so
        callers on an event loop must check ``chunk_is_loaded`` first and use a thread if not.
        Raises ``ReferenceFormatError`` when the record that holds the chunk is malformed.
        """
        ...


class ReferenceView:
    """A ``ReferenceSet`` that serves another one, ``inner``, unchanged: the views a mount may
    stack over what it loaded (``--zarr-format 2``, ``--decode``) inherit it and override only
    what they change. Chunk numbers are the inner set's in every view."""

    def __init__(self, inner: ReferenceSet) -> None:
        self._inner = inner

    @property
    def source(self) -> str:
        """Name the reference file or directory, for messages."""
        return self._inner.source

    def keys(self) -> Iterable[str]:
        """Return every explicitly stored key."""
        return self._inner.keys()

    def get(self, key: str) -> Reference | None:
        """Return the reference of an explicit key, or None."""
        return self._inner.get(key)

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        """Return the byte length of each explicit key ``prefix + name``."""
        return self._inner.known_lengths(prefix, names)

    @property
    def grids(self) -> Sequence[ChunkGrid]:
        """Return the chunk grids whose keys are derived."""
        return self._inner.grids

    def chunk_is_loaded(self, grid: int, index: int) -> bool:
        """Return True when ``chunk`` answers without I/O."""
        return self._inner.chunk_is_loaded(grid, index)

    def chunk_sizes(self, grid: int, start: int, stop: int) -> list[int | None] | None:
        """Return the sizes of chunks from ``start`` on, without I/O."""
        return self._inner.chunk_sizes(grid, start, stop)

    def chunk_ranges(self, grid: int, start: int, stop: int) -> dict[str, ChunkRanges]:
        """Return the range references of chunks ``[start, stop)``, as stored."""
        return self._inner.chunk_ranges(grid, start, stop)

    def skip_absent(self, grid: int, start: int, stop: int, *, load: bool) -> int:
        """Return the first chunk index not known to be absent: no view changes absence."""
        return self._inner.skip_absent(grid, start, stop, load=load)

    def chunk(self, grid: int, index: int) -> Reference | None:
        """Return the stored reference of chunk ``index`` (the same number in every view)."""
        return self._inner.chunk(grid, index)


class ReferenceSource(Protocol):
    """Where a reference set is read from: a file, or a Parquet directory, local or remote."""

    @property
    def url(self) -> str:
        """Return the reference file's URL as the user gave it."""
        ...

    @property
    def base_url(self) -> str:
        """Return the directory that relative target URLs are resolved against."""
        ...

    def is_directory(self) -> bool:
        """Return True when the source is a directory (a Parquet reference set)."""
        ...

    def names(self, relative: str = "") -> list[str] | None:
        """Return the names of the entries directly in directory ``relative`` below a directory
        source (``[]`` when there is no such directory), or None when the store cannot list
        directories."""
        ...

    def read(self, relative: str = "") -> bytes:
        """Return the bytes of the source itself, or of ``relative`` below a directory source.

        Raises ``FileNotFoundError`` when that file does not exist.
        """
        ...
