"""The only fsspec user: target URLs to filesystems, range reads and sizes, the trio↔asyncio
bridge, and reading the reference file itself.

Async filesystems (HTTP, S3 …) run on fsspec's own asyncio loop thread; trio awaits their
results through ``_wait_for_future`` without a thread per request. Blocking filesystems (local
files …) run in worker threads bounded by one ``trio.CapacityLimiter``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar, cast

import fsspec
import fsspec.asyn
import fsspec.core
import trio

from refmount.errors import RemoteError
from refmount.urls import directory_of, protocol_of

log = logging.getLogger(__name__)

T = TypeVar("T")

FileSystem = Any
"""An ``fsspec.AbstractFileSystem``; fsspec has no type hints."""


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Split storage options into ``(for every protocol, per protocol)``.

    ``{"s3": {...}, "https": {...}}`` (every key a known protocol, every value an object) is per
    protocol; anything else is a flat dict that applies to every protocol.
    """
    known = set(fsspec.available_protocols())
    if options and all(k in known and isinstance(v, dict) for k, v in options.items()):
        return {}, {k: dict(v) for k, v in options.items()}
    return dict(options), {}


class Store:
    """Reads byte ranges and sizes of target URLs; one filesystem per protocol.

    The protocol is resolved for each URL, never guessed once for the whole set.
    """

    def __init__(self, options: Mapping[str, Any] | None = None, *, threads: int = 16) -> None:
        self._common, self._per_protocol = split_options(options or {})
        self._filesystems: dict[str, FileSystem] = {}
        self._lock = threading.Lock()
        self._threads = trio.CapacityLimiter(threads)

    def options_for(self, protocol: str) -> dict[str, Any]:
        """Return the storage options used for ``protocol``."""
        merged = dict(self._common)
        merged.update(self._per_protocol.get(protocol, {}))
        return merged

    def filesystem(self, url: str) -> tuple[FileSystem, str]:
        """Return the filesystem that serves ``url`` and the path to give it."""
        if "::" in url:
            return self._chained(url)
        protocol = protocol_of(url) or "file"
        with self._lock:
            fs = self._filesystems.get(protocol)
            if fs is None:
                fs = fsspec.filesystem(protocol, **self.options_for(protocol))
                self._filesystems[protocol] = fs
        return fs, fs._strip_protocol(url)

    def _chained(self, url: str) -> tuple[FileSystem, str]:
        chain = url.rsplit("::", 1)[0]
        protocols = [protocol_of(part) or part.split(":", 1)[0] for part in url.split("::")]
        per_protocol = {p: self.options_for(p) for p in protocols if p}
        with self._lock:
            fs = self._filesystems.get(chain)
            if fs is None:
                fs, _ = fsspec.core.url_to_fs(url, **per_protocol)
                self._filesystems[chain] = fs
        return fs, fs._strip_protocol(url.rsplit("::", 1)[1])

    async def read_range(self, url: str, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)`` of ``url`` (fewer if the target is shorter)."""
        fs, path = self._resolve(url)
        if fs.async_impl:
            return cast(bytes, await self._on_fsspec_loop(url, fs._cat_file(path, start, end)))
        return cast(bytes, await self._in_thread(url, fs.cat_file, path, start, end))

    async def size(self, url: str) -> int:
        """Return the size in bytes of the whole target ``url``."""
        fs, path = self._resolve(url)
        if fs.async_impl:
            info = await self._on_fsspec_loop(url, fs._info(path))
        else:
            info = await self._in_thread(url, fs.info, path)
        size = info.get("size") if isinstance(info, dict) else None
        if not isinstance(size, int):
            raise RemoteError(url, "the target does not report its size")
        return size

    def _resolve(self, url: str) -> tuple[FileSystem, str]:
        try:
            return self.filesystem(url)
        except Exception as error:
            raise RemoteError(url, _describe(error)) from error

    async def _on_fsspec_loop(self, url: str, coroutine: Coroutine[Any, Any, T]) -> T:
        loop = fsspec.asyn.get_loop()
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return await _wait_for_future(future)
        except trio.Cancelled:
            raise
        except Exception as error:
            raise RemoteError(url, _describe(error)) from error

    async def _in_thread(self, url: str, function: Callable[..., T], *args: Any) -> T:
        try:
            return await trio.to_thread.run_sync(
                lambda: function(*args), limiter=self._threads, abandon_on_cancel=True
            )
        except Exception as error:
            raise RemoteError(url, _describe(error)) from error


async def _wait_for_future(future: concurrent.futures.Future[T]) -> T:
    """Await a future completed on another thread, without blocking trio or using a thread."""
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()

    def wake(_: object) -> None:
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(done.set)

    future.add_done_callback(wake)
    try:
        await done.wait()
    except trio.Cancelled:
        future.cancel()
        raise
    return future.result()


def _describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if text != type(error).__name__ else text


class FsspecSource:
    """A ``ReferenceSource`` read through fsspec: a reference file or Parquet directory."""

    def __init__(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        options = dict(options or {})
        options.pop("compression", None)  # compression is recognised from the bytes
        self._url = url
        self._fs, self._path = fsspec.core.url_to_fs(url, **options)

    @property
    def url(self) -> str:
        """Return the URL as given."""
        return self._url

    @property
    def base_url(self) -> str:
        """Return the directory holding the reference file (or the Parquet directory)."""
        return directory_of(self._url)

    def is_directory(self) -> bool:
        """Return True for a directory (Parquet) source."""
        return bool(self._fs.isdir(self._path))

    def read(self, relative: str = "") -> bytes:
        """Return the bytes of the source, or of ``relative`` below it."""
        path = f"{self._path.rstrip('/')}/{relative}" if relative else self._path
        try:
            return cast(bytes, self._fs.cat_file(path))
        except FileNotFoundError:
            raise
        except IsADirectoryError as error:
            raise FileNotFoundError(path) from error

    def mtime(self) -> float | None:
        """Return the source's modification time in seconds, if the store reports one."""
        path = self._path
        if self.is_directory():
            path = f"{path.rstrip('/')}/.zmetadata"
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
