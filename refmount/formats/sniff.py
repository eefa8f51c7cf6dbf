"""Recognise what a reference file is: its compression, and JSON versus Parquet."""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from collections.abc import Callable

from refmount.errors import ReferenceFormatError
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


def decompress(data: bytes, name: str) -> bytes:
    """Return ``data`` decompressed if it is gzip, zstd, bzip2 or xz, else unchanged.

    The magic bytes decide. A file whose extension names a compression but whose bytes do not
    start with its magic is accepted only when it already looks like JSON (an HTTP server may
    have sent it with ``Content-Encoding`` and the transport decompressed it); otherwise it is
    corrupt. Corrupt or truncated data raises ``ReferenceFormatError`` naming ``name``.
    """
    compression = compression_by_magic(data)
    if compression is None:
        claimed = compression_by_name(name)
        if claimed is None or data.lstrip(b" \t\r\n\xef\xbb\xbf").startswith((b"{", b"[")):
            return data
        raise ReferenceFormatError(
            name, None, f"the name says {claimed} but the data is not {claimed}-compressed"
        )
    try:
        return _DECOMPRESSORS[compression](data)
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


def is_parquet_data(data: bytes) -> bool:
    """Return True when ``data`` is a Parquet file (its first four bytes are ``PAR1``)."""
    return data.startswith(_PARQUET_MAGIC)


def _is_zstd_skippable(data: bytes) -> bool:
    """Return True when ``data`` starts with a zstd skippable frame (magic 0x184D2A5?)."""
    return len(data) >= 4 and data[1:4] == b"\x2a\x4d\x18" and data[0] & 0xF0 == 0x50


def _gunzip(data: bytes) -> bytes:
    return gzip.decompress(data)


def _bunzip2(data: bytes) -> bytes:
    return bz2.decompress(data)


def _unxz(data: bytes) -> bytes:
    return lzma.decompress(data)


def _unzstd(data: bytes) -> bytes:
    """Decompress every zstd frame in ``data``, including frames that do not record their size."""
    import zstandard

    chunks: list[bytes] = []
    rest = data
    while rest:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        try:
            chunks.append(decompressor.decompress(rest))
        except zstandard.ZstdError as exc:
            raise ValueError(str(exc)) from exc
        if not decompressor.eof:
            raise EOFError("compressed data ended before the end of the frame")
        rest = decompressor.unused_data
    return b"".join(chunks)


_DECOMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": _gunzip,
    "zstd": _unzstd,
    "bzip2": _bunzip2,
    "xz": _unxz,
}
