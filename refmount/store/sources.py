"""Where a reference set is read from: a file or Parquet directory through fsspec, or a
stream (standard input); both read as streams and stop at the size cap."""

from __future__ import annotations

from typing import BinaryIO, Protocol, cast

import fsspec.core

from refmount.errors import too_large
from refmount.store.options import StorageOptions, is_http
from refmount.urls import directory_of


class Readable(Protocol):
    """What ``read_capped`` reads: a binary file or stream."""

    def read(self, size: int = -1, /) -> bytes:
        """Return up to ``size`` bytes; ``b""`` at the end."""


ZMETADATA = ".zmetadata"
"""The file a Parquet reference set's directory holds (the formats read it; here it only tells
a directory over HTTP)."""

SOURCE_PIECE = 4 << 20
"""How many bytes of a reference file are read at once when its size is capped."""


class FsspecSource:
    """A ``ReferenceSource`` read through fsspec: a reference file or Parquet directory."""

    def __init__(
        self, url: str, options: StorageOptions | None = None, max_size: int | None = None
    ) -> None:
        kwargs = (options or StorageOptions()).for_url(url)
        kwargs.pop("compression", None)  # compression is recognised from the bytes
        self._url = url
        self._fs, self._path = fsspec.core.url_to_fs(url, **kwargs)
        self._max_size = max_size
        self._directory: bool | None = None
        self._http = is_http(url.rsplit("::", 1)[-1])

    @property
    def url(self) -> str:
        """Return the URL as given."""
        return self._url

    @property
    def base_url(self) -> str:
        """Return the directory holding the reference file (or the Parquet directory)."""
        return directory_of(self._url.rsplit("::", 1)[-1])

    def is_directory(self) -> bool:
        """Return True for a directory (Parquet) source (asked of the store once).

        Over HTTP a URL is a directory when it ends in ``/`` or ``.zmetadata`` lies below
        it: fsspec's own test GETs the URL and, for an answer typed ``text/html`` or not
        typed at all, reads the whole body (inflated) to look for links, which no size cap
        bounds; asking for ``.zmetadata`` reads no body.
        """
        if self._directory is None:
            self._directory = self._find_directory()
        return self._directory

    def _find_directory(self) -> bool:
        try:
            if self._http:
                return self._url.endswith("/") or bool(
                    self._fs.exists(f"{self._path.rstrip('/')}/{ZMETADATA}")
                )
            return bool(self._fs.isdir(self._path))
        except (OSError, ValueError):
            return False

    def names(self, relative: str = "") -> list[str] | None:
        """Return the names in directory ``relative`` below the source (``[]``: no such
        directory); None over HTTP, which has no directory listings to trust."""
        if self._http:
            return None
        path = f"{self._path.rstrip('/')}/{relative}" if relative else self._path
        try:
            entries = self._fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        except (OSError, ValueError, NotImplementedError):
            return None
        return [str(entry).rstrip("/").rpartition("/")[2] for entry in entries]

    def read(self, relative: str = "") -> bytes:
        """Return the bytes of the source, or of ``relative`` below it.

        With a ``max_size`` the file is read as a stream, and a file longer than that raises
        ``ReferenceFormatError`` once ``max_size + 1`` bytes have come, whatever the store
        says its size is (a remote file may be longer than announced, or endless).
        """
        path = f"{self._path.rstrip('/')}/{relative}" if relative else self._path
        try:
            if self._max_size is None:
                return cast(bytes, self._fs.cat_file(path))
            # HTTP: one streamed GET (block_size 0), not a range request per block.
            protocols = self._fs.protocol
            streamed = "http" in (protocols if isinstance(protocols, tuple) else (protocols,))
            with self._fs.open(path, "rb", **({"block_size": 0} if streamed else {})) as file:
                return read_capped(file, self._max_size, self._url)
        except IsADirectoryError as error:
            raise FileNotFoundError(path) from error

    def size(self, relative: str) -> int | None:
        """Return the size in bytes of ``relative`` below the source, as the store reports
        it; None when it does not exist, or the store gives no size or cannot be asked (no
        credentials: botocore's error is no ``OSError``), which the reader then reports."""
        path = f"{self._path.rstrip('/')}/{relative}"
        try:
            size = self._fs.size(path)
        except Exception:  # noqa: BLE001 - the read that needs the file will say
            return None
        return size if isinstance(size, int) else None

    def mtime(self) -> float | None:
        """Return the source's modification time in seconds, if the store reports one."""
        path = self._path
        if self.is_directory():
            path = f"{path.rstrip('/')}/{ZMETADATA}"
        try:
            info = self._fs.info(path)
        except (OSError, ValueError):
            return None
        for field in ("mtime", "LastModified", "last_modified", "updated", "created"):
            value = info.get(field)
            if isinstance(value, int | float):
                return float(value)
            if hasattr(value, "timestamp"):
                return float(value.timestamp())
        return None


STDIN_NAME = "<stdin>"
"""How messages name a reference document read from standard input."""


class StreamSource:
    """A ``ReferenceSource`` read once from a stream: a JSON document with no file behind it
    (REFS ``-``, standard input; the Python API hands an in-memory set over this way, so no
    temporary file anyone else could read exists).

    It has no directory, so relative targets need ``base`` (an empty base refuses them), and
    no modification time, so the mount's time is used.
    """

    def __init__(
        self, stream: BinaryIO, base: str | None = None, max_size: int | None = None
    ) -> None:
        self._data = read_capped(stream, max_size, STDIN_NAME)
        self._base = base or ""

    @property
    def url(self) -> str:
        """Return the name messages use."""
        return STDIN_NAME

    @property
    def base_url(self) -> str:
        """Return ``base``, or ``""`` when none was given."""
        return self._base

    def is_directory(self) -> bool:
        """Return False: a stream holds one document, never a Parquet directory."""
        return False

    def names(self, relative: str = "") -> list[str] | None:
        """Return None: a stream has no directory to list."""
        return None

    def read(self, relative: str = "") -> bytes:
        """Return the document; nothing lies below it."""
        if relative:
            raise FileNotFoundError(relative)
        return self._data

    def mtime(self) -> float | None:
        """Return None: a stream has no modification time."""
        return None


def read_capped(stream: Readable, cap: int | None, name: str) -> bytes:
    """Return what ``stream`` holds, read in pieces; raise ``ReferenceFormatError`` naming
    ``name`` once more than ``cap`` bytes have come (never holding more than one piece more)."""
    pieces: list[bytes] = []
    total = 0
    while True:
        limit = SOURCE_PIECE if cap is None else min(SOURCE_PIECE, cap + 1 - total)
        piece = stream.read(limit)
        if not piece:
            return b"".join(pieces)
        pieces.append(piece)
        total += len(piece)
        if cap is not None and total > cap:
            raise too_large(name, cap)
