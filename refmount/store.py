"""The only fsspec user: target URLs to filesystems, range reads and sizes, version pinning,
the local-root check, the trio↔asyncio bridge, error classification, and the reference file.

Each remote URL is read by one of two engines, chosen at its first use (``engine_of``):
obstore (``refmount.fetch_obstore``) for S3, HTTP(S), GCS and Azure URLs whose options map
onto it, unless the store was made with ``fetcher="fsspec"``; fsspec for everything else,
and for a URL whose server ignored a range or sent no length (from then on). obstore's
coroutines run on fsspec's loop through the same bridge, host limits and error handling.

Async filesystems (HTTP, S3 …) run on fsspec's own asyncio loop thread; trio awaits their
results through ``_wait_for_future`` without a thread per request, at most
``connections_per_host`` at a time per host. HTTP(S) and S3 ranges are read as a stream and
never past one byte after the range, never inflated (``_bounded_http_range``,
``_bounded_s3_range``): no answer makes the daemon hold more than it asked for. Plain
local files are read through descriptors kept open (``LocalFiles``: from the page cache on
the loop's thread, else in a worker thread given up on at the deadline, at most a few per
file; only regular files outside the mount); other blocking filesystems run in worker
threads. All worker threads are bounded by one ``trio.CapacityLimiter``. Every failure
leaves as ``RemoteError``, marked retryable or not; retrying is the reader's business.

Storage options may be keyed by URL prefix (``https://host``); each (protocol, option key)
gets its own filesystem instance, so credentials meant for one host never reach another.
With pinning on, each target's version (ETag, else mtime/Last-Modified and size) is recorded
by its first use and every later read is checked against it (``RemoteChangedError``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import functools
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, BinaryIO, TypeVar, cast
from urllib.parse import urlsplit

import fsspec
import fsspec.asyn
import fsspec.core
import trio
from fsspec.implementations.local import LocalFileSystem

from refmount.config import FETCHERS
from refmount.errors import RemoteAccessError, RemoteChangedError, RemoteError, too_large
from refmount.fetch_obstore import ObstoreEngine, Plan, PreconditionFailed, RangeIgnored
from refmount.local_files import LocalFiles, real_path
from refmount.urls import directory_of, protocol_of
from refmount.versions import Pin

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

HTTP_PROTOCOLS = ("http", "https")

LOCAL_PROTOCOLS = frozenset({"file", "local"})
"""Protocols that read local files (as do URLs without a protocol)."""

UNCHECKABLE_PROTOCOLS = frozenset({"reference", "dir", "git"})
"""Protocols that read local files the URL does not name (a nested reference set's targets,
a directory prefix from the options, a local repository); refused when the mount is shared."""

PIN_RECHECK_SECONDS = 5.0
"""Where a range read cannot carry the pinned version (S3 through s3fs, other protocols),
how old a confirmation may be before a read asks the target for its version again."""

PRECONDITION_FAILED = 412

Data = bytes | memoryview
"""What a range read returns: obstore's buffers are handed on as views, never copied."""


class StorageOptions:
    """fsspec storage options: common ones, per protocol, per URL prefix, and S3 extras.

    ``{"s3": {...}, "https": {...}, "https://data.example.org": {...}}`` (every key a known
    protocol or a URL prefix, every value an object) is structured; anything else is a flat
    dict that applies to every protocol. A URL takes the common options, then its protocol's,
    then those of the longest prefix it starts with (a prefix matches at a ``/``, ``?`` or
    ``#`` boundary, so ``https://host`` never matches ``https://host.evil`` or
    ``https://host:8443``). ``s3`` options (from ``-o s3_*`` shortcuts) are added for ``s3://``
    and ``s3a://`` on top of the protocol-level options.
    """

    def __init__(
        self, options: Mapping[str, Any] | None = None, s3: Mapping[str, Any] | None = None
    ) -> None:
        options = dict(options or {})
        s3 = dict(s3 or {})
        known = set(fsspec.available_protocols())
        self._prefixes: dict[str, dict[str, Any]] = {}
        if options and all(
            (k in known or _is_prefix(k)) and isinstance(v, dict) for k, v in options.items()
        ):
            self._common: dict[str, Any] = {}
            self._per_protocol = {k: dict(v) for k, v in options.items() if not _is_prefix(k)}
            self._prefixes = {k: dict(v) for k, v in options.items() if _is_prefix(k)}
        else:
            self._common, self._per_protocol = options, {}
        for protocol in S3_PROTOCOLS if s3 else ():
            merged = self._per_protocol.setdefault(protocol, {})
            client = {**merged.get("client_kwargs", {}), **s3.get("client_kwargs", {})}
            merged.update({k: v for k, v in s3.items() if k != "client_kwargs"})
            if client:
                merged["client_kwargs"] = client

    def for_protocol(self, protocol: str) -> dict[str, Any]:
        """Return the options for one protocol (without any URL prefix's)."""
        merged = dict(self._common)
        merged.update(self._per_protocol.get(protocol, {}))
        return merged

    def prefix_of(self, url: str) -> str | None:
        """Return the longest option key that is a prefix of ``url`` (its last part if
        chained), or None when only protocol-level options apply."""
        last = url.rsplit("::", 1)[-1]
        matches = [p for p in self._prefixes if _starts_with_prefix(last, p)]
        return max(matches, key=len) if matches else None

    def for_target(self, url: str) -> dict[str, Any]:
        """Return the options for a URL that is not chained: protocol, then prefix options."""
        merged = self.for_protocol(protocol_of(url) or "file")
        prefix = self.prefix_of(url)
        if prefix is not None:
            merged.update(self._prefixes[prefix])
        return merged

    def for_url(self, url: str) -> dict[str, Any]:
        """Return keyword arguments for ``fsspec.core.url_to_fs(url, ...)``.

        A chained URL (``simplecache::s3://…``) takes options keyed by each protocol of the
        chain, its last part's with prefix options too; a plain URL takes its options directly.
        """
        if "::" not in url:
            return self.for_target(url)
        *wrappers, last = url.split("::")  # "simplecache::s3://b/k": wrappers are bare names
        chain: dict[str, Any] = {}
        for part in wrappers:
            name = protocol_of(part) or part
            chain[name] = self.for_protocol(name)
        chain[protocol_of(last) or "file"] = self.for_target(last)
        return chain


def is_known_protocol(name: str) -> bool:
    """Return True if fsspec knows the protocol ``name`` (its package may still be missing)."""
    return name in fsspec.available_protocols()


def _is_prefix(key: str) -> bool:
    return "://" in key and bool(protocol_of(key))


def _starts_with_prefix(url: str, prefix: str) -> bool:
    if not url.startswith(prefix):
        return False
    if len(url) == len(prefix) or prefix.endswith("/"):
        return True
    return url[len(prefix)] in "/?#"


class LocalRoots:
    """The directories local targets must lie in when users other than the mounter can read.

    A target is local when it has no protocol, or ``file://``/``local://``, or is a chain
    whose last part is one of those; its path is taken exactly as fsspec's local filesystem
    takes it, then made real (``os.path.realpath``: symlinks and ``..`` resolved). ``data:``
    URIs and remote protocols are not local. Chains through ``reference``, ``dir`` or ``git``
    are refused: the files they read do not appear in the URL.
    """

    def __init__(self, roots: Iterable[str], forbidden: Iterable[str] = ()) -> None:
        self._roots = tuple(os.path.realpath(root) for root in roots)
        self._forbidden = tuple(os.path.realpath(path) for path in forbidden)

    @property
    def roots(self) -> tuple[str, ...]:
        """Return the allowed directories, resolved."""
        return self._roots

    def local_path(self, url: str) -> str | None:
        """Return the path, not yet made real, that ``url`` reads locally, or None."""
        last = url.rsplit("::", 1)[-1]
        protocol = protocol_of(last)
        if protocol is not None and protocol.lower() not in LOCAL_PROTOCOLS:
            return None
        return cast(str, LocalFileSystem._strip_protocol(last))

    def problem(self, url: str) -> str | None:
        """Return why ``url`` may not be read, or None when it may."""
        return self._examine(url)[0]

    def _examine(self, url: str) -> tuple[str | None, str | None]:
        """Return why ``url`` may not be read (None: it may) and its real local path (None
        when it is not a local file)."""
        *wrappers, last = url.split("::")
        for protocol in [protocol_of(part) or part for part in wrappers] + [protocol_of(last)]:
            if protocol is not None and protocol.lower() in UNCHECKABLE_PROTOCOLS:
                return (
                    f"protocol {protocol!r} may read any local file and is not allowed on a "
                    "mount other users can read"
                ), None
        path = self.local_path(url)
        if path is None:
            return None, None
        try:  # never looks inside the mount itself (see real_path)
            real = real_path(path, self._forbidden)
        except OSError as error:
            return f"the local file {path}: {error.strerror}", None
        if any(_inside(real, root) for root in self._roots):
            return None, real
        roots = ", ".join(self._roots) if self._roots else "none given"
        return (
            f"the local file {real} is outside the local roots ({roots}); other users can "
            "read this mount, so local targets must lie under --local-root DIR"
        ), real

    def resolve(self, url: str) -> str:
        """Return the real path of a local ``url``; raise ``RemoteAccessError`` if refused."""
        problem, real = self._examine(url)
        if problem is not None:
            raise RemoteAccessError(url, problem)
        return real if real is not None else url


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


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
    text = _describe(error)
    cause = error.__cause__
    if cause is not None and type(error).__module__ == "builtins":
        text = f"{text} ({_describe(cause)})"  # fsspec's FileNotFoundError hides an HTTP status
    return RemoteError(url, text, retryable=is_retryable(error))


def _describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    if text != type(error).__name__:
        text = f"{type(error).__name__}: {text}"
    return text


class Store:
    """Reads byte ranges and sizes of target URLs; one filesystem per (protocol, option key).

    The protocol is resolved for each URL, never guessed once for the whole set. The option
    key is the storage-option prefix that matches the URL, if any, so a filesystem (and its
    HTTP session or S3 client) carrying one host's credentials only ever serves that host.

    ``local_roots``, when given, restricts local targets (checked again at every read, and
    the real path is what is read). Local targets inside ``own_mount`` (the mountpoint) are
    refused: reading them would ask this very mount. ``pin`` records each target's version
    at first use; a later read of another version fails with ``RemoteChangedError``.
    """

    def __init__(
        self,
        options: StorageOptions | None = None,
        *,
        threads: int = 16,
        connections_per_host: int = 32,
        local_roots: LocalRoots | None = None,
        pin: bool = False,
        recheck_after: float = PIN_RECHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        own_mount: str | None = None,
        fetcher: str = "auto",
        obstore_engine: ObstoreEngine | None = None,
    ) -> None:
        if fetcher not in FETCHERS:
            raise ValueError(f"fetcher must be one of {', '.join(FETCHERS)}, not {fetcher!r}")
        self._options = options or StorageOptions()
        self._obstore = (obstore_engine or ObstoreEngine()) if fetcher == "auto" else None
        self._plans: dict[str, Plan | None] = {}
        """URL → how obstore reads it (None: fsspec does), decided at the URL's first use."""
        self._filesystems: dict[tuple[str, str | None], FileSystem] = {}
        self._lock = threading.Lock()
        self._threads = trio.CapacityLimiter(threads)
        self._per_host = connections_per_host
        self._hosts: dict[str, trio.Semaphore] = {}
        self._local_roots = local_roots
        self._pin = pin
        self._recheck_after = recheck_after
        self._clock = clock
        self._pins: dict[str, Pin] = {}
        self._pinning: dict[str, trio.Event] = {}
        self._local = LocalFiles(self._threads, forbidden=() if own_mount is None else (own_mount,))
        self._local_paths: dict[str, str] = {}
        """URL → path of local files read at least once (the path ``LocalFiles`` keys)."""

    def close(self) -> None:
        """Close the local files kept open (once the event loop has stopped, on its thread)."""
        self._local.close()

    def filesystem(self, url: str) -> tuple[FileSystem, str]:
        """Return the filesystem that serves ``url`` and the path to give it.

        The first call for a protocol may import its implementation (s3fs, aiohttp: a tenth
        of a second or more): the read path calls it from a worker thread then
        (``_resolve``), and ``prepare`` does it ahead of the first read.
        """
        return self._filesystem_for(url, self._filesystem_key(url))

    def _filesystem_for(self, url: str, key: tuple[str, str | None]) -> tuple[FileSystem, str]:
        """``filesystem`` for ``url``, whose ``_filesystem_key`` is ``key``."""
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

    def _filesystem_key(self, url: str) -> tuple[str, str | None]:
        """Return what one filesystem instance serves: a protocol (or chain) and options prefix."""
        chain = url.rsplit("::", 1)[0] if "::" in url else protocol_of(url) or "file"
        return chain, self._options.prefix_of(url)

    def prepare(self, urls: Iterable[str]) -> None:
        """Create the filesystems that serve ``urls`` now (blocking: call it from a thread).

        A URL whose filesystem cannot be created is left for its first read to report.
        """
        for url in urls:
            if self._obstore_plan(url) is not None:
                continue
            key = self._filesystem_key(url)
            if key not in self._filesystems:
                try:
                    self._filesystem_for(url, key)
                except Exception as error:  # noqa: BLE001 - the read that needs it will say
                    log.debug("cannot prepare a filesystem for %s yet: %s", url, error)

    def engine_of(self, url: str) -> str:
        """Return the name of the engine that serves ``url``: ``obstore`` or ``fsspec``."""
        return "fsspec" if self._obstore_plan(url) is None else "obstore"

    def _obstore_plan(self, url: str) -> Plan | None:
        """Return how obstore reads ``url``, or None when fsspec does (decided once)."""
        if url in self._plans:
            return self._plans[url]
        plan = None
        if self._obstore is not None:
            plan = self._obstore.plan(url, self._options.for_target(url))
        self._plans[url] = plan
        return plan

    def pinned(self, url: str) -> Pin | None:
        """Return the version pinned for ``url``, if it has been used."""
        return self._pins.get(url)

    async def read_range(self, url: str, start: int, end: int) -> Data:
        """Return bytes ``[start, end)`` of ``url`` (fewer if the target is shorter)."""
        plan = self._obstore_plan(url)
        if plan is not None:
            try:
                return await self._read_obstore(url, plan, start, end)
            except RangeIgnored as error:
                self._plans[url] = None
                log.info("%s: %s; reading it through fsspec from now on", url, error.problem)
        fs, path = await self._resolve(url)
        if _is_plain_local(url):
            return await self._read_local(url, fs, path, start, end)
        pin = await self._pinned(url, fs, path) if self._pin else None
        if fs.async_impl:
            data = await self._read_async(url, fs, path, start, end, pin)
        else:
            data = cast(
                bytes, await self._in_thread(url, lambda: fs.cat_file(path, start=start, end=end))
            )
        if pin is not None and not (_is_http(url) and pin.http_condition()):
            await self._recheck(url, fs, path, pin)
        return data

    async def size(self, url: str) -> int:
        """Return the size in bytes of the whole target ``url`` (its pinned size, if pinned)."""
        plan = self._obstore_plan(url)
        if plan is not None and self._pin:
            size: object = (await self._pinned(url, None, url)).size
        elif plan is not None:
            size = (await self._current_version(url, None, url)).size
        else:
            size = await self._fsspec_size(url)
        if not isinstance(size, int):
            raise RemoteError(url, "the target does not report its size")
        return size

    async def _fsspec_size(self, url: str) -> object:
        fs, path = await self._resolve(url)
        if self._pin:
            size: object = (await self._pinned(url, fs, path)).size
        elif _is_plain_local(url):
            size = (await self._local_status(url, path)).st_size
        else:
            size = (await self._info(url, fs, path)).get("size")
        return size

    async def _read_obstore(self, url: str, plan: Plan, start: int, end: int) -> Data:
        """Read ``[start, end)`` through obstore on fsspec's loop (``fetch_obstore``).

        Pinned, the read carries the version (``If-Match``, else ``If-Unmodified-Since``);
        a 412 becomes ``RemoteChangedError``. A pin that no header can carry (a weak ETag)
        is checked again once it is old, as on fsspec.
        """
        if end <= start:
            return b""
        pin = await self._pinned(url, None, url) if self._pin else None
        condition = pin.http_condition() if pin is not None else {}
        engine = self._obstore
        assert engine is not None
        try:
            data = await self._on_fsspec_loop(
                url, lambda: engine.read(url, plan, start, end, condition)
            )
        except RemoteError as error:
            if pin is None or not isinstance(error.__cause__, PreconditionFailed):
                raise
            try:
                now = (await self._current_version(url, None, url)).describe()
            except RemoteError:
                now = "another version (HTTP 412)"
            raise RemoteChangedError(url, pin.describe(), now) from None
        if pin is not None and not condition:
            await self._recheck(url, None, url, pin)
        return data

    async def _resolve(self, url: str) -> tuple[FileSystem, str]:
        key = self._filesystem_key(url)
        if key not in self._filesystems:
            # the first use of a protocol may import it: not on the event loop
            await trio.to_thread.run_sync(self._filesystem, url, key, limiter=self._threads)
        roots = self._local_roots
        if roots is not None:
            if not _is_plain_local(url):
                roots.resolve(url)  # raises RemoteAccessError
                return self._filesystem(url, key)
            # path look-ups in a worker thread of the file's own: its filesystem may hang
            path = roots.local_path(url) or url
            real = await self._local.call(path, functools.partial(roots.resolve, url))
            return self._filesystem(url, key)[0], real
        return self._filesystem(url, key)

    def _filesystem(self, url: str, key: tuple[str, str | None]) -> tuple[FileSystem, str]:
        try:
            return self._filesystem_for(url, key)
        except Exception as error:
            raise RemoteError(url, f"cannot open a filesystem for it: {error}") from error

    # ------------------------------------------------------------------ pinning

    async def _pinned(self, url: str, fs: FileSystem, path: str) -> Pin:
        """Return the version of ``url`` pinned at its first use (asking once per URL)."""
        while True:
            pin = self._pins.get(url)
            if pin is not None:
                return pin
            flight = self._pinning.get(url)
            if flight is None:
                break
            await flight.wait()  # another task is asking; it may fail, then we ask ourselves
        done = self._pinning[url] = trio.Event()
        try:
            pin = await self._current_version(url, fs, path)
            if not pin.known:
                log.debug("%s reports no ETag or modification time: not pinned", url)
            self._pins[url] = pin
            return pin
        finally:
            del self._pinning[url]
            done.set()

    async def _current_version(self, url: str, fs: FileSystem, path: str) -> Pin:
        plan = self._obstore_plan(url)
        if plan is not None:
            engine = self._obstore
            assert engine is not None
            info = await self._on_fsspec_loop(url, lambda: engine.head(url, plan))
            return Pin.from_info(info, self._clock())
        if _is_plain_local(url):
            return Pin.from_stat(await self._local_status(url, path), self._clock())
        refresh = {"refresh": True} if protocol_of(url) in S3_PROTOCOLS else {}
        return Pin.from_info(await self._info(url, fs, path, **refresh), self._clock())

    async def _info(self, url: str, fs: FileSystem, path: str, **kwargs: Any) -> dict[str, Any]:
        if fs.async_impl:
            info = await self._on_fsspec_loop(url, lambda: fs._info(path, **kwargs))
        else:
            info = await self._in_thread(url, lambda: fs.info(path, **kwargs))
        return info if isinstance(info, dict) else {}

    async def _read_async(
        self, url: str, fs: FileSystem, path: str, start: int, end: int, pin: Pin | None
    ) -> bytes:
        """Read ``[start, end)`` on fsspec's loop; HTTP and S3 answers are read as a stream.

        Over HTTP and S3 the body is read up to one byte more than the range asks for and
        no further (``_bounded_http_range``, ``_bounded_s3_range``): a server that ignores
        the range, sends a body that never ends or an encoded body cannot make the daemon
        hold more than the range. Other async filesystems answer through ``_cat_file``.
        """
        if end <= start:
            return b""
        condition = pin.http_condition() if pin is not None and _is_http(url) else {}
        if _is_http(url):
            read = functools.partial(_bounded_http_range, url, fs, path, start, end)
        elif "::" not in url and protocol_of(url) in S3_PROTOCOLS:
            read = functools.partial(_bounded_s3_range, url, fs, path, start, end)
        else:
            return cast(
                bytes,
                await self._on_fsspec_loop(url, lambda: fs._cat_file(path, start=start, end=end)),
            )
        if not condition:
            return await self._on_fsspec_loop(url, read)
        try:
            return await self._on_fsspec_loop(url, functools.partial(read, condition))
        except RemoteError as error:
            if _http_status(error.__cause__ or error) != PRECONDITION_FAILED:
                raise
        assert pin is not None
        try:
            now = (await self._current_version(url, fs, path)).describe()
        except RemoteError:
            now = "another version (HTTP 412)"
        raise RemoteChangedError(url, pin.describe(), now)

    async def _recheck(self, url: str, fs: FileSystem, path: str, pin: Pin) -> None:
        """Where a read cannot carry the version: ask again once the last check is old."""
        if not pin.known or self._clock() - pin.checked < self._recheck_after:
            return
        current = await self._current_version(url, fs, path)
        if not pin.same(current):
            raise RemoteChangedError(url, pin.describe(), current.describe())
        pin.checked = current.checked

    def read_now(self, url: str, start: int, end: int) -> bytes | None:
        """Return ``read_range``'s answer if it is at hand without waiting, else None.

        Only a plain local file already read once (its descriptor is open; with local roots,
        its path must still resolve to the file that passed the check) whose range the page
        cache holds, and whose pin needs no new look-up, is read here; the bytes are checked
        against the pin as ``read_range`` checks them. Any doubt answers None, and
        ``read_range`` does the full work.
        """
        path = self._local_paths.get(url)
        if path is None:
            return None
        if self._local_roots is not None:
            try:  # at every read, as read_range does: a link swapped since is refused there
                if self._local_roots.resolve(url) != path:
                    return None
            except RemoteError:
                return None
        found = self._local.read_now(path, start, end)
        if found is None:
            return None
        data, status = found
        pin = self._pins.get(url) if self._pin else None
        if pin is not None and pin.known:
            now = self._clock()
            stale = now - pin.checked >= self._recheck_after
            if stale or not pin.same(Pin.from_stat(status, now)):
                return None
        return data

    async def _read_local(self, url: str, fs: FileSystem, path: str, start: int, end: int) -> bytes:
        """Read a local file through its kept-open descriptor (see ``LocalFiles``).

        Pinned: the descriptor's status after each read must match the pin (a file written
        in place); once the last check is ``recheck_after`` old, the path is looked up again
        too (a file replaced by another: the descriptor still reads the old one).
        """
        pin = await self._pinned(url, fs, path) if self._pin else None
        try:
            data, status = await self._local.read(path, start, end)
        except OSError as error:
            raise remote_error(url, error) from error
        self._local_paths[url] = path
        if pin is None or not pin.known:
            return data
        now = self._clock()
        current = Pin.from_stat(status, now)
        if not pin.same(current):
            raise RemoteChangedError(url, pin.describe(), current.describe())
        if now - pin.checked >= self._recheck_after:
            try:
                at_path = Pin.from_stat(await self._local.path_status(path), now)
            except OSError as error:
                raise remote_error(url, error) from error
            if not pin.same(at_path):
                self._local.forget(path)
                raise RemoteChangedError(url, pin.describe(), at_path.describe())
            pin.checked = now
        return data

    async def _local_status(self, url: str, path: str) -> os.stat_result:
        """Return the status of a local target through its descriptor (a regular file)."""
        try:
            return await self._local.status(path)
        except OSError as error:
            raise remote_error(url, error) from error

    # ------------------------------------------------------------------ running requests

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
            except (trio.Cancelled, RemoteError):
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


READ_PIECE = 256 * 1024
"""The most a streamed body is read by at a time."""

IDENTITY = frozenset({"", "identity"})
"""``Content-Encoding`` values that leave the bytes as they are."""


def _refused(url: str, problem: str) -> RemoteError:
    """Return the error for an answer the store will not take (never retried)."""
    return RemoteError(url, problem, retryable=False)


async def _bounded_http_range(
    url: str,
    fs: FileSystem,
    path: str,
    start: int,
    end: int,
    condition: Mapping[str, str] | None = None,
) -> bytes:
    """GET ``[start, end)`` of ``path`` through the HTTP filesystem's own session.

    Asks for ``Accept-Encoding: identity`` and never inflates: an answer with another
    ``Content-Encoding`` is refused, as is one whose ``Content-Length`` exceeds the range,
    before its body is read, and so is a 200 (the whole object) to a range that does not
    start at 0. The body is read as a stream up to one byte past the range
    (that byte proves the range was ignored) and the connection is dropped there.
    """
    options = dict(getattr(fs, "kwargs", {}))
    headers = {
        **options.pop("headers", {}),
        **(condition or {}),
        "Range": f"bytes={start}-{end - 1}",
        "Accept-Encoding": "identity",
    }
    options.pop("auto_decompress", None)
    session = await fs.set_session()
    expected = end - start
    async with session.get(
        fs.encode_url(path), headers=headers, auto_decompress=False, **options
    ) as response:
        if response.status == 404:
            raise FileNotFoundError(path)
        response.raise_for_status()
        encoding = response.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in IDENTITY:
            raise _refused(
                url,
                f"the server sent a body with Content-Encoding {encoding!r} (HTTP "
                f"{response.status}) for a {expected}-byte range; only identity was asked for",
            )
        announced = response.headers.get("Content-Length", "")
        if announced.isdigit() and int(announced) > expected:
            raise _refused(url, _ignored_range(response.status, f"{announced} bytes", expected))
        if response.status == 200 and start > 0:  # the object from its byte 0: wrong bytes
            raise _refused(url, _ignored_range(200, "the object from its start", expected))
        data = await _read_at_most(response.content.read, expected + 1)
        if len(data) > expected:
            response.close()  # the rest is never read: drop the connection
            raise _refused(url, _ignored_range(response.status, "more bytes", expected))
        return data


async def _bounded_s3_range(
    url: str,
    fs: FileSystem,
    path: str,
    start: int,
    end: int,
    condition: Mapping[str, str] | None = None,
) -> bytes:
    """GET ``[start, end)`` of an S3 object, reading its body up to one byte past the range.

    The object's bytes are what is read, whatever ``Content-Encoding`` it was stored with
    (botocore never inflates; s3fs does not either).
    """
    bucket, key, version = fs.split_path(path)
    versioned = {"VersionId": version} if version else {}
    answer = await fs._call_s3(
        "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **versioned
    )
    body = answer["Body"]
    expected = end - start
    status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode", 206)
    try:
        if status == 200 and start > 0:  # the object from its byte 0: wrong bytes
            raise _refused(url, _ignored_range(200, "the object from its start", expected))
        data = await _read_at_most(body.read, expected + 1)
    finally:
        body.close()
    if len(data) > expected:
        raise _refused(url, _ignored_range(status, "more bytes", expected))
    return data


def _ignored_range(status: int, sent: str, expected: int) -> str:
    return (
        f"the server ignored the Range request: it answered HTTP {status} with {sent} "
        f"for a {expected}-byte range"
    )


async def _read_at_most(read: Callable[[int], Awaitable[bytes]], limit: int) -> bytes:
    """Return the body ``read`` streams, stopping once ``limit`` bytes have come."""
    pieces: list[bytes] = []
    received = 0
    while received < limit:
        piece = await read(min(READ_PIECE, limit - received))
        if not piece:
            break
        pieces.append(piece)
        received += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _is_plain_local(url: str) -> bool:
    """Return True for a local URL that is not chained (read with ``os``-level checks)."""
    return "::" not in url and (protocol_of(url) or "file").lower() in LOCAL_PROTOCOLS


def _is_http(url: str) -> bool:
    return "::" not in url and protocol_of(url) in HTTP_PROTOCOLS


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

    def names(self, relative: str = "") -> list[str] | None:
        """Return the names in directory ``relative`` below the source (``[]``: no such
        directory); None over HTTP, which has no directory listings to trust."""
        if _is_http(self._url.rsplit("::", 1)[-1]):
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
                return self._read_capped(file, self._max_size)
        except IsADirectoryError as error:
            raise FileNotFoundError(path) from error

    def _read_capped(self, file: Any, cap: int) -> bytes:
        """Return what ``file`` holds, read in pieces; raise once it passes ``cap`` bytes."""
        pieces: list[bytes] = []
        total = 0
        while True:
            piece = file.read(min(SOURCE_PIECE, cap + 1 - total))
            if not piece:
                return b"".join(pieces)
            pieces.append(piece)
            total += len(piece)
            if total > cap:
                raise too_large(self._url, cap)

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
        self._data = _read_stream(stream, max_size)
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


def _read_stream(stream: BinaryIO, cap: int | None) -> bytes:
    """Return what ``stream`` holds, read in pieces; raise once it passes ``cap`` bytes."""
    pieces: list[bytes] = []
    total = 0
    while True:
        piece = stream.read(SOURCE_PIECE)
        if not piece:
            return b"".join(pieces)
        pieces.append(piece)
        total += len(piece)
        if cap is not None and total > cap:
            raise too_large(STDIN_NAME, cap)
