"""The fsspec fetch engine: every protocol fsspec knows (and the URLs obstore does not serve).

One filesystem per (protocol or chain, storage-option prefix), made at its first use and kept,
so credentials meant for one host never reach another; the first of a protocol may import it
(s3fs, aiohttp: a tenth of a second or more), so the store makes it in a worker thread or
ahead of the first read (``prepare``). Range reads over HTTP and S3 are streamed by
``bounded``: never past one byte after the range, never inflated; other async filesystems
answer through ``_cat_file`` on fsspec's loop, blocking ones through ``cat_file`` in a worker
thread. A pinned HTTP read carries its version (``If-Match``); a 412 is reported as
``VersionRefused`` for the store to name the version now there.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterable
from typing import Any, cast

import fsspec
import fsspec.core

from refmount.errors import TargetError, TargetReadError
from refmount.store.bounded import bounded_range, http_stream, s3_stream
from refmount.store.failures import http_status
from refmount.store.options import StorageOptions
from refmount.store.routes import Kind, Route, route_of
from refmount.store.runner import Runner

log = logging.getLogger(__name__)

FileSystem = Any
"""An ``fsspec.AbstractFileSystem``; fsspec has no type hints."""

PRECONDITION_FAILED = 412


class VersionRefused(Exception):
    """The server refused a read carrying the pinned version (HTTP 412)."""


class FsspecEngine:
    """fsspec's filesystems for target URLs, and the reads and look-ups made through them."""

    def __init__(self, options: StorageOptions, runner: Runner) -> None:
        self._options = options
        self._runner = runner
        self._filesystems: dict[tuple[str, str | None], FileSystem] = {}
        self._lock = threading.Lock()

    def has(self, route: Route) -> bool:
        """Return True once the filesystem serving ``route`` exists (no import is pending)."""
        return route.filesystem_key in self._filesystems

    def filesystem(self, url: str, key: tuple[str, str | None]) -> tuple[FileSystem, str]:
        """Return the filesystem whose key is ``key`` (made now if new: blocking) and the path
        to give it for ``url``; a filesystem that cannot be made is a ``TargetReadError``."""
        try:
            return self._filesystem_for(url, key)
        except Exception as error:
            raise TargetReadError(url, f"cannot open a filesystem for it: {error}") from error

    def _filesystem_for(self, url: str, key: tuple[str, str | None]) -> tuple[FileSystem, str]:
        with self._lock:
            fs = self._filesystems.get(key)
            if fs is None:
                if "::" in url:
                    fs, _ = fsspec.core.url_to_fs(url, **self._options.for_url(url))
                else:
                    fs = fsspec.filesystem(
                        key[0], skip_instance_cache=True, **self._options.for_target(url)
                    )
                self._filesystems[key] = fs
        if "::" in url:
            return fs, fs._strip_protocol(url.rsplit("::", 1)[1])
        if key[0] == "data":
            return fs, url  # fsspec's data filesystem reads the URI, not its stripped body
        return fs, fs._strip_protocol(url)

    def prepare(self, urls: Iterable[str]) -> None:
        """Make the filesystems that serve ``urls`` now (blocking: call it from a thread).

        A URL whose filesystem cannot be made is left for its first read to report.
        """
        for url in urls:
            key = route_of(url, self._options).filesystem_key  # a thread: not the kept routes
            if key not in self._filesystems:
                try:
                    self._filesystem_for(url, key)
                except Exception as error:  # noqa: BLE001 - the read that needs it will say
                    log.debug("cannot prepare a filesystem for %s yet: %s", url, error)

    async def read(
        self,
        url: str,
        route: Route,
        fs: FileSystem,
        path: str,
        start: int,
        end: int,
        condition: dict[str, str],
    ) -> bytes:
        """Read ``[start, end)``; HTTP and S3 answers are read as a bounded stream.

        Over HTTP and S3 the body is read up to one byte more than the range asks for and
        no further (``bounded_range``): a server that ignores the range, sends a body that
        never ends or an encoded body cannot make the daemon hold more than the range. Other
        async filesystems answer through ``_cat_file``, blocking ones in a worker thread.
        ``condition`` (HTTP only) are the headers that carry the pinned version.
        """
        if end <= start:
            return b""
        if not fs.async_impl:
            data = await self._runner.in_thread(
                url, lambda: fs.cat_file(path, start=start, end=end)
            )
            return cast(bytes, data)
        if route.kind is Kind.HTTP:
            read = functools.partial(bounded_range, http_stream, url, fs, path, start, end)
        elif route.kind is Kind.S3:
            read = functools.partial(bounded_range, s3_stream, url, fs, path, start, end)
        else:
            return cast(
                bytes,
                await self._runner.on_loop(
                    url, route, lambda: fs._cat_file(path, start=start, end=end)
                ),
            )
        if not condition:
            return await self._runner.on_loop(url, route, read)
        try:
            return await self._runner.on_loop(url, route, functools.partial(read, condition))
        except TargetError as error:
            if http_status(error.__cause__ or error) != PRECONDITION_FAILED:
                raise
        raise VersionRefused(url)

    async def info(
        self, url: str, route: Route, fs: FileSystem, path: str, **kwargs: Any
    ) -> dict[str, Any]:
        """Return fsspec's ``info`` of ``path`` (size, ETag, modification time)."""
        if fs.async_impl:
            info = await self._runner.on_loop(url, route, lambda: fs._info(path, **kwargs))
        else:
            info = await self._runner.in_thread(url, lambda: fs.info(path, **kwargs))
        return info if isinstance(info, dict) else {}
