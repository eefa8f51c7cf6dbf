"""The only fsspec user: target URLs to filesystems, range reads and sizes, the trio↔asyncio
bridge, error classification, and reading the reference file itself.

Async filesystems (HTTP, S3 …) run on fsspec's own asyncio loop thread; trio awaits their
results through ``_wait_for_future`` without a thread per request, at most
``connections_per_host`` at a time per host. Blocking filesystems (local files …) run in worker
threads bounded by one ``trio.CapacityLimiter``. Every failure leaves as ``RemoteError``, marked
retryable or not; retrying is the reader's business.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

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

S3_PROTOCOLS = ("s3", "s3a")

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 509, 598, 599})
"""HTTP statuses worth trying again (5xx that are not permanent, timeouts, throttling)."""

PERMANENT_ERRNOS = frozenset(
    {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EINVAL}
)


class StorageOptions:
    """fsspec storage options per protocol: common ones, per-protocol ones, and S3 extras.

    ``{"s3": {...}, "https": {...}}`` (every key a known protocol, every value an object) is
    per protocol; anything else is a flat dict that applies to every protocol. ``s3`` options
    (from ``-o s3_*`` shortcuts) are added for ``s3://`` and ``s3a://`` on top.
    """

    def __init__(
        self, options: Mapping[str, Any] | None = None, s3: Mapping[str, Any] | None = None
    ) -> None:
        options = dict(options or {})
        s3 = dict(s3 or {})
        known = set(fsspec.available_protocols())
        if options and all(k in known and isinstance(v, dict) for k, v in options.items()):
            self._common: dict[str, Any] = {}
            self._per_protocol = {k: dict(v) for k, v in options.items()}
        else:
            self._common, self._per_protocol = options, {}
        for protocol in S3_PROTOCOLS if s3 else ():
            merged = self._per_protocol.setdefault(protocol, {})
            client = {**merged.get("client_kwargs", {}), **s3.get("client_kwargs", {})}
            merged.update({k: v for k, v in s3.items() if k != "client_kwargs"})
            if client:
                merged["client_kwargs"] = client

    def for_protocol(self, protocol: str) -> dict[str, Any]:
        """Return the options for one protocol."""
        merged = dict(self._common)
        merged.update(self._per_protocol.get(protocol, {}))
        return merged

    def for_url(self, url: str) -> dict[str, Any]:
        """Return keyword arguments for ``fsspec.core.url_to_fs(url, ...)``.

        A chained URL (``simplecache::s3://…``) takes options keyed by each protocol of the
        chain; a plain URL takes its protocol's options directly.
        """
        if "::" not in url:
            return self.for_protocol(protocol_of(url) or "file")
        *wrappers, last = url.split("::")  # "simplecache::s3://b/k": wrappers are bare names
        chain = [protocol_of(part) or part for part in wrappers] + [protocol_of(last) or "file"]
        return {protocol: self.for_protocol(protocol) for protocol in chain}


def is_retryable(error: BaseException) -> bool:
    """Return True when ``error`` is a failure that may go away if the request is repeated."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        status = _http_status(current)
        if status is not None:
            return status in RETRYABLE_STATUS
        current = current.__cause__ or current.__context__
    if isinstance(error, TimeoutError | ConnectionError):
        return True
    if isinstance(error, OSError):
        return error.errno not in PERMANENT_ERRNOS and not isinstance(
            error, FileNotFoundError | PermissionError | IsADirectoryError | NotADirectoryError
        )
    module = type(error).__module__
    # aiohttp's connection, payload and disconnect errors; botocore's endpoint and read errors
    return module.startswith(("aiohttp", "botocore", "aiobotocore", "urllib3"))


def _http_status(error: BaseException) -> int | None:
    status = getattr(error, "status", None)  # aiohttp.ClientResponseError
    if isinstance(status, int):
        return status
    response = getattr(error, "response", None)  # botocore.exceptions.ClientError
    if isinstance(response, dict):
        code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(code, int):
            return code
    return None


def remote_error(url: str, error: BaseException) -> RemoteError:
    """Return the ``RemoteError`` that stands for ``error`` raised while reading ``url``."""
    text = str(error) or type(error).__name__
    if text != type(error).__name__:
        text = f"{type(error).__name__}: {text}"
    return RemoteError(url, text, retryable=is_retryable(error))


class Store:
    """Reads byte ranges and sizes of target URLs; one filesystem per protocol.

    The protocol is resolved for each URL, never guessed once for the whole set.
    """

    def __init__(
        self,
        options: StorageOptions | None = None,
        *,
        threads: int = 16,
        connections_per_host: int = 32,
    ) -> None:
        self._options = options or StorageOptions()
        self._filesystems: dict[str, FileSystem] = {}
        self._lock = threading.Lock()
        self._threads = trio.CapacityLimiter(threads)
        self._per_host = connections_per_host
        self._hosts: dict[str, trio.Semaphore] = {}

    def filesystem(self, url: str) -> tuple[FileSystem, str]:
        """Return the filesystem that serves ``url`` and the path to give it."""
        if "::" in url:
            chain = url.rsplit("::", 1)[0]
            with self._lock:
                fs = self._filesystems.get(chain)
                if fs is None:
                    fs, _ = fsspec.core.url_to_fs(url, **self._options.for_url(url))
                    self._filesystems[chain] = fs
            return fs, fs._strip_protocol(url.rsplit("::", 1)[1])
        protocol = protocol_of(url) or "file"
        with self._lock:
            fs = self._filesystems.get(protocol)
            if fs is None:
                fs = fsspec.filesystem(protocol, **self._options.for_protocol(protocol))
                self._filesystems[protocol] = fs
        return fs, fs._strip_protocol(url)

    async def read_range(self, url: str, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)`` of ``url`` (fewer if the target is shorter)."""
        fs, path = self._resolve(url)
        if fs.async_impl:
            return cast(
                bytes,
                await self._on_fsspec_loop(url, lambda: fs._cat_file(path, start=start, end=end)),
            )
        return cast(
            bytes, await self._in_thread(url, lambda: fs.cat_file(path, start=start, end=end))
        )

    async def size(self, url: str) -> int:
        """Return the size in bytes of the whole target ``url``."""
        fs, path = self._resolve(url)
        if fs.async_impl:
            info = await self._on_fsspec_loop(url, lambda: fs._info(path))
        else:
            info = await self._in_thread(url, lambda: fs.info(path))
        size = info.get("size") if isinstance(info, dict) else None
        if not isinstance(size, int):
            raise RemoteError(url, "the target does not report its size")
        return size

    def _resolve(self, url: str) -> tuple[FileSystem, str]:
        try:
            return self.filesystem(url)
        except Exception as error:
            raise RemoteError(url, f"cannot open a filesystem for it: {error}") from error

    def _host_slots(self, url: str) -> trio.Semaphore:
        host = urlsplit(url.rsplit("::", 1)[-1]).netloc or protocol_of(url) or "local"
        slots = self._hosts.get(host)
        if slots is None:
            slots = self._hosts[host] = trio.Semaphore(self._per_host)
        return slots

    async def _on_fsspec_loop(self, url: str, coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
        async with self._host_slots(url):
            loop = fsspec.asyn.get_loop()
            future = asyncio.run_coroutine_threadsafe(coroutine(), loop)
            try:
                return await _wait_for_future(future)
            except trio.Cancelled:
                raise
            except Exception as error:
                raise remote_error(url, error) from error

    async def _in_thread(self, url: str, function: Callable[[], T]) -> T:
        try:
            return await trio.to_thread.run_sync(
                function, limiter=self._threads, abandon_on_cancel=True
            )
        except Exception as error:
            raise remote_error(url, error) from error


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


class FsspecSource:
    """A ``ReferenceSource`` read through fsspec: a reference file or Parquet directory."""

    def __init__(self, url: str, options: StorageOptions | None = None) -> None:
        kwargs = (options or StorageOptions()).for_url(url)
        kwargs.pop("compression", None)  # compression is recognised from the bytes
        self._url = url
        self._fs, self._path = fsspec.core.url_to_fs(url, **kwargs)

    @property
    def url(self) -> str:
        """Return the URL as given."""
        return self._url

    @property
    def base_url(self) -> str:
        """Return the directory holding the reference file (or the Parquet directory)."""
        return directory_of(self._url.rsplit("::", 1)[-1])

    def is_directory(self) -> bool:
        """Return True for a directory (Parquet) source."""
        try:
            return bool(self._fs.isdir(self._path))
        except (OSError, ValueError):
            return False

    def read(self, relative: str = "") -> bytes:
        """Return the bytes of the source, or of ``relative`` below it."""
        path = f"{self._path.rstrip('/')}/{relative}" if relative else self._path
        try:
            return cast(bytes, self._fs.cat_file(path))
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
