"""JSON reference files (Version 0 and 1, plain or compressed) as a ``ReferenceSet``."""

from __future__ import annotations

import codecs
import functools
import gc
import json
import logging
from collections.abc import Iterable, Mapping, Sequence

from refmount.errors import OnInvalid, ReferenceFormatError
from refmount.formats.compact import CompactReferences
from refmount.formats.gen_grid import GenGrids
from refmount.formats.json_stream import stream_document
from refmount.formats.json_v0 import load_v0
from refmount.formats.json_v1 import load_v1
from refmount.formats.options import LoadOptions
from refmount.formats.sniff import decompress, is_parquet_data
from refmount.formats.values import describe
from refmount.model import ChunkGrid, ChunkRanges, Reference, ReferenceSource

logger = logging.getLogger(__name__)


class JsonReferenceSet:
    """The references of a JSON file: stored keys, and the chunk grids of ``gen`` items.

    The stored references are kept in a frozen ``CompactReferences``: a few arrays, not one
    Python object per key; ``get`` builds the ``Reference`` it returns. ``gen`` items whose
    keys are a chunk grid are not stored key by key: their references are computed from the
    chunk's index (``gen_grid``), and the ``refs`` keys they replace are hidden.
    """

    __slots__ = ("_generated", "_refs", "_source")

    def __init__(self, source: str, refs: Mapping[str, Reference]) -> None:
        self._source = source
        if not isinstance(refs, CompactReferences):
            compact = CompactReferences()
            for key, reference in refs.items():
                compact.put(key, reference)
            refs = compact
        self._refs = refs.freeze()
        self._generated = refs.generated or GenGrids((), ())

    @property
    def source(self) -> str:
        """Name the reference file, for messages."""
        return self._source

    def __len__(self) -> int:
        """Return how many keys the file has, generated ones included."""
        return len(self._refs) - len(self._generated.hidden) + self._generated.count

    def keys(self) -> Iterable[str]:
        """Return every stored key, in the file's order (``gen`` keys after ``refs`` keys)."""
        hidden = self._generated.hidden
        if not hidden:
            return self._refs.keys()
        return (key for key in self._refs if key not in hidden)

    def get(self, key: str) -> Reference | None:
        """Return the reference of stored key ``key``, or ``None``."""
        if key in self._generated.hidden:
            return None
        return self._refs.get(key)

    def known_lengths(self, prefix: str, names: Sequence[bytes]) -> list[int | None]:
        """Return the length of each key ``prefix + name``'s range or inline data (None:
        whole file, or absent)."""
        return self._refs.known_lengths(prefix, names)

    @property
    def grids(self) -> Sequence[ChunkGrid]:
        """Return the chunk grids of the ``gen`` items kept as grids."""
        return self._generated.grids

    def chunk_is_loaded(self, grid: int, index: int) -> bool:
        """Return True: a chunk's reference is computed without I/O."""
        self._generated.items[grid]  # (IndexError for a grid that does not exist)
        return True

    def chunk_sizes(self, grid: int, start: int, stop: int) -> list[int | None] | None:
        """Return the sizes of chunks from ``start`` on (see ``ReferenceSet.chunk_sizes``)."""
        return self._generated.chunk_sizes(grid, start, stop)

    def chunk_ranges(self, grid: int, start: int, stop: int) -> dict[str, ChunkRanges]:
        """Return, per target URL, the ranges of chunks ``[start, stop)``."""
        return self._generated.chunk_ranges(grid, start, stop)

    def skip_absent(self, grid: int, start: int, stop: int, *, load: bool) -> int:
        """Return ``start`` (``stop`` for an empty range): no generated chunk is absent."""
        return self._generated.skip_absent(grid, start, stop)

    def chunk(self, grid: int, index: int) -> Reference | None:
        """Return the reference of chunk ``index`` of grid ``grid``, computed."""
        return self._generated.chunk(grid, index)


def load_json(source: ReferenceSource, options: LoadOptions) -> JsonReferenceSet:
    """Read, decompress and parse a JSON reference file.

    Raises ``ReferenceFormatError`` naming the file (and the key, when one is at fault) if
    it is malformed, and ``FileNotFoundError`` if it does not exist.
    """
    url = source.url
    cap = options.size_cap()
    refuse_early = functools.partial(refuse_a_malformed_start, source=url)
    data = decompress(source.read(), url, cap, refuse_early)
    if is_parquet_data(data):
        raise ReferenceFormatError(
            url,
            None,
            "this is a Parquet file, not JSON; a Parquet reference set is the directory "
            "that holds .zmetadata",
        )
    # Parsing creates millions of objects and no cycles; the cyclic garbage collector would
    # only rescan them over and over (it roughly doubles the load time of a big file).
    collecting = gc.isenabled()
    gc.disable()
    try:
        refs = stream_document(data, url, source.base_url, options)
        if refs is not None:
            del data  # before the references are frozen (which takes memory of its own)
            if refs.freeze(
                find_repeats=True
            ).has_repeated_keys:  # rare: read the file again, the ordinary way
                refs, data = None, decompress(source.read(), url, cap, refuse_early)
        if refs is None:  # not streamable: load it whole, for the established answer
            text = decode_json(data, url)
            del data  # (the text and the parsed document are big enough at once)
            document = parse_json(text, url)
            del text
            refs = load_document(document, url, source.base_url, options, consume=True)
            del document
        references = JsonReferenceSet(url, refs)
    finally:
        if collecting:
            gc.enable()
    return references


START_MARGIN = 64
"""How far before the end of a document's start an error must be for the start to decide it:
json's scanner looks no further ahead than this past an error, strings aside."""


def refuse_a_malformed_start(start: bytes | bytearray, source: str) -> None:
    """Raise the whole document's JSON error when its start already shows it.

    Parsing stops at the first error, and what decides it lies at most ``START_MARGIN``
    characters past it, unless it is an unterminated string (which a longer document may
    end). Such an error well inside the start is the whole document's, with the message
    ``json.loads`` gives; so an inflated file whose first megabyte is not JSON is refused
    without inflating the rest. (Loaded whole, a document whose later bytes are not valid
    in its encoding would be refused for those instead: either way it is malformed.)
    """
    decoder = codecs.getincrementaldecoder(json.detect_encoding(bytes(start[:4])))("surrogatepass")
    try:
        text = decoder.decode(bytes(start), False)
    except UnicodeDecodeError as exc:
        if exc.start + START_MARGIN < len(start):
            raise ReferenceFormatError(
                source, None, f"not valid UTF-8: {exc.reason} at byte {exc.start}"
            ) from None
        return
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos + START_MARGIN < len(text) and not exc.msg.startswith("Unterminated string"):
            raise ReferenceFormatError(source, None, _syntax_problem(exc)) from None
    except RecursionError:
        raise ReferenceFormatError(source, None, "not valid JSON: nested too deeply") from None


def _syntax_problem(exc: json.JSONDecodeError) -> str:
    return f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"


def decode_json(data: bytes | bytearray, source: str) -> str:
    """Return the text of a JSON document as ``json.loads`` decodes it (UTF-8, -16 or -32).

    Raises ``ReferenceFormatError`` for bytes that are not valid in that encoding.
    """
    try:
        return data.decode(json.detect_encoding(data), "surrogatepass")
    except UnicodeDecodeError as exc:
        problem = f"not valid UTF-8: {exc.reason} at byte {exc.start}"
    raise ReferenceFormatError(source, None, problem)


def parse_json(data: bytes | str, source: str) -> object:
    """Return the parsed JSON document, or raise ``ReferenceFormatError`` saying where it breaks."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        problem = _syntax_problem(exc)
    except UnicodeDecodeError as exc:
        problem = f"not valid UTF-8: {exc.reason} at byte {exc.start}"
    except ValueError as exc:
        problem = f"not valid JSON: {exc}"
    except RecursionError:
        problem = "not valid JSON: nested too deeply"
    raise ReferenceFormatError(source, None, problem)


def load_document(
    document: object,
    source: str,
    base_url: str,
    options: LoadOptions,
    consume: bool = False,
) -> CompactReferences:
    """Return the references of a parsed JSON document, dispatching on its ``version``.

    No ``version`` means Version 0; ``1`` (or ``1.0``) means Version 1; anything else,
    including ``null``, ``true``, ``0`` and ``"1"``, is refused. ``consume`` lets the
    loader empty the document while reading it, to save memory.
    """
    if not isinstance(document, dict):
        raise ReferenceFormatError(
            source, None, f"the top level must be a JSON object, not {describe(document)}"
        )
    on_invalid: OnInvalid | None = None
    if options.skip_invalid:
        on_invalid = options.on_invalid or _skip
    if "version" not in document:
        return load_v0(document, source, base_url, options, on_invalid, consume)
    version = document["version"]
    if type(version) in (int, float) and version == 1:
        return load_v1(document, source, base_url, options, on_invalid, consume)
    shown = json.dumps(version)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    raise ReferenceFormatError(
        source, None, f"unknown version {shown} (1 is Version 1; no version is Version 0)"
    )


def _skip(error: ReferenceFormatError) -> None:
    """Log one warning line for a malformed value that ``--skip-invalid`` leaves out."""
    logger.warning("skipping invalid reference: %s", " ".join(str(error).splitlines()))
