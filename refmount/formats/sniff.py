"""Recognise what a reference file is: its compression, and JSON versus Parquet."""

from __future__ import annotations

import bz2
import lzma
import zlib
from collections.abc import Callable, Iterator
from typing import Protocol

from refmount.errors import ReferenceFormatError, too_large
from refmount.urls import protocol_of

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BZ2_MAGIC = b"BZh"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_PARQUET_MAGIC = b"PAR1"

_EXTENSIONS = {
    ".gz": "gzip",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".bz2": "bzip2",
    ".xz": "xz",
}

_PARQUET_SUFFIXES = (".parq", ".parquet")


def file_name(url: str) -> str:
    """Return the last path component of ``url``, lower-cased, without an HTTP query or fragment."""
    if protocol_of(url) in ("http", "https"):
        url = url.partition("#")[0].partition("?")[0]
    return url.rstrip("/").rpartition("/")[2].lower()


def compression_by_magic(data: bytes) -> str | None:
    """Return the compression whose magic bytes start ``data``, or None."""
    if data.startswith(_GZIP_MAGIC):
        return "gzip"
    if data.startswith(_ZSTD_MAGIC) or _is_zstd_skippable(data):
        return "zstd"
    if data.startswith(_BZ2_MAGIC) and data[3:4].isdigit() and data[3:4] != b"0":
        return "bzip2"
    if data.startswith(_XZ_MAGIC):
        return "xz"
    return None


def compression_by_name(url: str) -> str | None:
    """Return the compression that ``url``'s extension names, or None."""
    name = file_name(url)
    for suffix, compression in _EXTENSIONS.items():
        if name.endswith(suffix):
            return compression
    return None


def decompress(
    data: bytes,
    name: str,
    limit: int | None = None,
    first_look: Callable[[bytearray], None] | None = None,
) -> bytes | bytearray:
    """Return ``data`` decompressed if it is gzip, zstd, bzip2 or xz, else unchanged.

    The magic bytes decide. A file whose extension names a compression but whose bytes do not
    start with its magic is accepted only when it already looks like JSON (an HTTP server may
    have sent it with ``Content-Encoding`` and the transport decompressed it); otherwise it is
    corrupt. Corrupt or truncated data raises ``ReferenceFormatError`` naming ``name``.

    ``limit`` caps both ``data`` and what it inflates to: decompression is streamed into one
    buffer and stops one byte past the cap, so a bomb costs the cap (plus ``data``), not
    what it would inflate to, nor twice the cap (``ReferenceFormatError``).

    ``first_look`` is shown the first ``FIRST_LOOK`` bytes inflated, once, when more are to
    come: it may raise to stop before the rest is inflated (a bomb of bytes that are not
    JSON stops there).
    """
    pieces = inflate(data, name, limit)
    first = next(pieces, b"")
    if first is data:  # not compressed: no copy
        return data
    inflated = bytearray(first)
    for piece in pieces:
        if first_look is not None and len(inflated) >= FIRST_LOOK:
            first_look(inflated)
            first_look = None
        inflated += piece  # grows in place (realloc moves large buffers without copying)
    return inflated


def inflate(data: bytes, name: str, limit: int | None = None) -> Iterator[bytes]:
    """Yield what ``data`` inflates to, a piece at a time (``data`` itself when it is not
    compressed); see ``decompress`` for the rules and errors.

    The caller may stop early: a document whose first piece is already malformed costs no
    more than that piece.
    """
    if limit is not None and len(data) > limit:
        raise too_large(name, limit)
    compression = compression_by_magic(data)
    if compression is None:
        claimed = compression_by_name(name)
        if claimed is None or data.lstrip(b" \t\r\n\xef\xbb\xbf").startswith((b"{", b"[")):
            yield data
            return
        raise ReferenceFormatError(
            name, None, f"the name says {claimed} but the data is not {claimed}-compressed"
        )
    most = _UNLIMITED if limit is None else limit + 1
    produced = 0
    try:
        for piece in _DECOMPRESSORS[compression](data, most):
            produced += len(piece)
            if limit is not None and produced > limit:
                raise too_large(name, limit, f"inflates ({compression}) to")
            yield piece
    except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as exc:
        raise ReferenceFormatError(
            name, None, f"corrupt {compression}-compressed data: {exc}"
        ) from exc


def is_parquet(url: str, is_directory: bool) -> bool:
    """Return True when a source names a Parquet reference set rather than a JSON file.

    A directory is always Parquet; a file is Parquet when its name ends in ``.parq`` or
    ``.parquet`` and ``.json`` appears nowhere in it (so ``refs.json.parq`` stays JSON,
    as in fsspec).
    """
    if is_directory:
        return True
    name = file_name(url)
    return name.endswith(_PARQUET_SUFFIXES) and ".json" not in url.lower()


def is_parquet_data(data: bytes | bytearray) -> bool:
    """Return True when ``data`` is a Parquet file (its first four bytes are ``PAR1``)."""
    return data.startswith(_PARQUET_MAGIC)


def _is_zstd_skippable(data: bytes) -> bool:
    """Return True when ``data`` starts with a zstd skippable frame (magic 0x184D2A5?)."""
    return len(data) >= 4 and data[1:4] == b"\x2a\x4d\x18" and data[0] & 0xF0 == 0x50


_UNLIMITED = 1 << 62
"""An output cap that is no cap."""

FIRST_LOOK = 1 << 20
"""How much of an inflated file ``decompress`` shows ``first_look`` before inflating more."""

_PIECE = 1 << 20
"""How many bytes a streamed decompressor is asked for at once."""

_ZSTD_FEED = 256
"""How many compressed bytes zstd is given at once: its output for that many is bounded (a
few MiB at most), since ``zstandard``'s streaming objects take no output cap."""


class _Inflater(Protocol):
    """The streaming decompressors of zlib, bz2 and lzma: ``decompress`` with ``max_length``."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    @property
    def needs_input(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = -1, /) -> bytes: ...


def _inflate_members(
    data: bytes, most: int, new: Callable[[], _Inflater], more: str
) -> Iterator[bytes]:
    """Inflate every member (stream) in ``data``, one after the other, up to ``most`` bytes.

    ``more`` is how a next member starts; anything else after a member is refused. Output
    past ``most`` is not produced: the caller sees ``most`` bytes and knows the cap was hit.
    """
    produced = 0
    rest = data
    while rest and produced < most:
        inflater = new()
        pending = rest
        while produced < most:
            piece = inflater.decompress(pending, min(_PIECE, most - produced))
            pending = b""
            if piece:
                yield piece
            produced += len(piece)
            if inflater.eof:
                break
            if not piece and inflater.needs_input:
                raise EOFError("compressed data ended before the end of the stream")
        if not inflater.eof:
            break  # the cap was reached
        rest = inflater.unused_data
        if rest and not rest.startswith(more.encode("latin-1")):
            raise ValueError("trailing data after the compressed stream")


class _ZlibInflater:
    """``zlib``'s decompressor with the ``needs_input`` manner of bz2 and lzma."""

    __slots__ = ("_inner", "tail")

    def __init__(self) -> None:
        self._inner = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.tail = b""

    @property
    def eof(self) -> bool:
        return self._inner.eof

    @property
    def unused_data(self) -> bytes:
        return self._inner.unused_data

    @property
    def needs_input(self) -> bool:
        return not self.tail

    def decompress(self, data: bytes, max_length: int = -1, /) -> bytes:
        piece = self._inner.decompress(self.tail + data if self.tail else data, max_length)
        self.tail = self._inner.unconsumed_tail
        return piece


def _gunzip(data: bytes, most: int) -> Iterator[bytes]:
    return _inflate_members(data, most, _ZlibInflater, "\x1f\x8b")


def _bunzip2(data: bytes, most: int) -> Iterator[bytes]:
    return _inflate_members(data, most, bz2.BZ2Decompressor, "BZh")


def _unxz(data: bytes, most: int) -> Iterator[bytes]:
    return _inflate_members(data, most, lzma.LZMADecompressor, "\xfd7zXZ\x00")


def _unzstd(data: bytes, most: int) -> Iterator[bytes]:
    """Decompress every zstd frame in ``data`` (sizes recorded or not), up to ``most`` bytes.

    The input is fed a little at a time so that no single call can inflate past the cap by
    more than a few MiB.
    """
    import zstandard

    produced = 0
    view = memoryview(data)
    position = 0
    decompressor = zstandard.ZstdDecompressor().decompressobj()
    started = False
    while position < len(view) and produced < most:
        feed = bytes(view[position : position + _ZSTD_FEED])
        position += len(feed)
        try:
            piece = decompressor.decompress(feed)
        except zstandard.ZstdError as exc:
            raise ValueError(str(exc)) from exc
        if piece:
            yield piece
        produced += len(piece)
        if decompressor.eof:  # the next frame, if any, starts in what was not used
            unused = decompressor.unused_data
            position -= len(unused)
            decompressor = zstandard.ZstdDecompressor().decompressobj()
            started = False
        else:
            started = True
    if produced < most and started:
        raise EOFError("compressed data ended before the end of the frame")


_DECOMPRESSORS: dict[str, Callable[[bytes, int], Iterator[bytes]]] = {
    "gzip": _gunzip,
    "zstd": _unzstd,
    "bzip2": _bunzip2,
    "xz": _unxz,
}
