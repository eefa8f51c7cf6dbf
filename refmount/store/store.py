"""The one way reads reach targets: each URL's filesystem and engine, chosen once and kept;
range reads, whole reads and sizes; version pinning; per-host limits; worker threads.

Each remote URL is read by one of two engines, chosen at its first use (``engine_of``):
obstore (``obstore_engine``) for S3, HTTP(S), GCS and Azure URLs whose options map onto it,
unless the store was made with ``fetcher="fsspec"``; fsspec for everything else, and for a
URL whose server ignored a range or sent no length (from then on). obstore's coroutines run
on fsspec's loop through the same bridge, host limits and error handling.

Both engines' requests run through one ``runner.Runner``: on fsspec's asyncio loop thread,
awaited from trio without a thread per request, at most ``connections_per_host`` at a time
per host, or in worker threads. The fsspec engine (``fsspec_engine``) keeps the filesystems
and streams HTTP(S) and S3 ranges through ``bounded``. Plain local files are read through
descriptors kept open (``local_files.LocalFiles``: from the page cache on the loop's
thread, else in a worker thread given up on at the deadline, at most a few per file; only
regular files outside the mount). All worker threads are bounded by one
``trio.CapacityLimiter``. Every failure leaves as ``TargetError`` (``failures``), marked
retryable or not; retrying is the reader's business.

Storage options (``options``) may be keyed by URL prefix (``https://host``); each
(protocol, option key) gets its own filesystem instance, so credentials meant for one host
never reach another. With pinning on, each target's version (``pins``: ETag, else
mtime/Last-Modified and size) is recorded by its first use and every later read is checked
against it (``TargetChangedError``). On shared mounts, ``roots`` keeps local reads inside
the local roots. The chunks of a mounted Icechunk snapshot (``icechunk://`` URLs) are read
through its session (``icechunk_engine``), which checks them against their commit.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, cast

import trio

from refmount.config import FETCHERS
from refmount.errors import TargetChangedError, TargetError, TargetReadError
from refmount.flight import SingleFlight
from refmount.lru import LRU
from refmount.store.disk_cache import DiskCache
from refmount.store.failures import target_error
from refmount.store.fsspec_engine import FileSystem, FsspecEngine, VersionRefused
from refmount.store.local_files import LocalFiles
from refmount.store.obstore_engine import (
    ObstoreEngine,
    Plan,
    PreconditionFailed,
    RangeIgnored,
)
from refmount.store.options import (
    S3_PROTOCOLS,
    StorageOptions,
)
from refmount.store.pins import Pin
from refmount.store.roots import LocalRoots
from refmount.store.routes import Kind, Route, route_of
from refmount.store.runner import Runner

if TYPE_CHECKING:
    from refmount.store.icechunk_engine import ChunkStore, IcechunkEngine

log = logging.getLogger(__name__)

PIN_RECHECK_SECONDS = 5.0
"""Where a range read cannot carry the pinned version (S3 through s3fs, other protocols),
how old a confirmation may be before a read asks the target for its version again."""

ROUTES = 65536
"""How many URLs' routes are kept (the least recently read go, and are worked out again)."""

Data = bytes | memoryview
"""What a range read returns: obstore's buffers are handed on as views, never copied."""


class Store:
    """Reads byte ranges and sizes of target URLs; one filesystem per (protocol, option key).

    The protocol is resolved for each URL, never guessed once for the whole set. The option
    key is the storage-option prefix that matches the URL, if any, so a filesystem (and its
    HTTP session or S3 client) carrying one host's credentials only ever serves that host.

    ``local_roots``, when given, restricts local targets (checked again at every read, and
    the real path is what is read). Local targets inside ``own_mount`` (the mountpoint) are
    refused: reading them would ask this very mount. ``pin`` records each target's version
    at first use; a later read of another version fails with ``TargetChangedError``.
    ``recorded`` (``--pins``, read from the file ``recorded_in``) gives the versions to pin
    instead of those of first use: each is compared with the target at its first use, as a
    pin is; a target it lacks is pinned at first use, with one warning per mount. ``disk``
    (``--cache-dir``) keeps the fetched ranges of pinned remote targets on local disk.
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
        icechunk_store: object | None = None,
        recorded: Mapping[str, Pin] | None = None,
        recorded_in: str = "",
        disk: DiskCache | None = None,
    ) -> None:
        if fetcher not in FETCHERS:
            raise ValueError(f"fetcher must be one of {', '.join(FETCHERS)}, not {fetcher!r}")
        self._options = options or StorageOptions()
        self._obstore = (obstore_engine or ObstoreEngine()) if fetcher == "auto" else None
        self._routes: LRU[str, Route] = LRU(ROUTES)
        self._plans: dict[str, Plan | None] = {}
        """URL → how obstore reads it (None: fsspec does), decided at the URL's first use."""
        self._runner = Runner(trio.CapacityLimiter(threads), connections_per_host)
        self._fsspec = FsspecEngine(self._options, self._runner)
        self._local_roots = local_roots
        self._pin = pin
        self._recheck_after = recheck_after
        self._clock = clock
        self._pins: dict[str, Pin] = {}
        self._pinning: SingleFlight[Pin] = SingleFlight()
        self._recorded = recorded
        self._recorded_in = recorded_in
        self._disk = disk
        self._unrecorded_told = False
        self._local = LocalFiles(
            self._runner.threads, forbidden=() if own_mount is None else (own_mount,)
        )
        self._local_paths: dict[str, str] = {}
        """URL → path of local files read at least once (the path ``LocalFiles`` keys)."""
        self._icechunk: IcechunkEngine | None = None
        if icechunk_store is not None:
            from refmount.store.icechunk_engine import IcechunkEngine  # needs icechunk's zarr

            self._icechunk = IcechunkEngine(cast("ChunkStore", icechunk_store), self._runner)

    def close(self) -> None:
        """Close the local files kept open and the disk cache (once the event loop has
        stopped, on its thread)."""
        self._local.close()
        if self._disk is not None:
            self._disk.close()

    def disk_statistics(self) -> dict[str, int] | None:
        """Return the disk cache's counters by name, or None without a disk cache."""
        return None if self._disk is None else dataclasses.asdict(self._disk.statistics())

    def filesystem(self, url: str) -> tuple[FileSystem, str]:
        """Return the fsspec filesystem that serves ``url`` and the path to give it (made now
        if new: the first of a protocol may import it, so not on the event loop)."""
        return self._fsspec.filesystem(url, route_of(url, self._options).filesystem_key)

    def _route(self, url: str) -> Route:
        """Return the route of ``url``, worked out at its first read and kept (event loop)."""
        route = self._routes.get(url)
        if route is None:
            route = route_of(url, self._options)
            self._routes.put(url, route)
        return route

    def prepare(self, urls: Iterable[str]) -> None:
        """Create the filesystems that serve ``urls`` now (blocking: call it from a thread).

        A URL whose filesystem cannot be created is left for its first read to report.
        """
        self._fsspec.prepare(url for url in urls if self._obstore_plan(url) is None)

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
        """Return bytes ``[start, end)`` of ``url`` (fewer if the target is shorter).

        With a disk cache, a pinned remote target's bytes come from it where cached; what
        is missing is fetched (``_fetch``) and kept there.
        """
        if self._icechunk is not None and self._icechunk.serves(url):
            return await self._icechunk.read(url, start, end)
        disk = self._disk
        if disk is not None and self._pin:
            route = self._route(url)
            if route.kind is not Kind.LOCAL:
                fs, path = await self._where(url, route)
                pin = await self._pinned(url, route, fs, path)
                version = pin.identity()
                if version is not None and pin.size is not None:
                    fetch = functools.partial(self._fetch, url)
                    return await disk.read(url, version, pin.size, start, end, fetch)
        return await self._fetch(url, start, end)

    async def _fetch(self, url: str, start: int, end: int) -> Data:
        """Read bytes ``[start, end)`` of ``url`` from the target, through its engine."""
        route = self._route(url)
        plan = self._obstore_plan(url)
        if plan is not None:
            try:
                return await self._read_obstore(url, route, plan, start, end)
            except RangeIgnored as error:
                self._plans[url] = None
                log.info("%s: %s; reading it through fsspec from now on", url, error.problem)
        fs, path = await self._resolve(url, route)
        if route.kind is Kind.LOCAL:
            return await self._read_local(url, route, fs, path, start, end)
        pin = await self._pinned(url, route, fs, path) if self._pin else None
        condition = pin.http_condition() if pin is not None and route.kind is Kind.HTTP else {}
        try:
            data = await self._fsspec.read(url, route, fs, path, start, end, condition)
        except VersionRefused:
            assert pin is not None
            raise await self._changed(url, route, fs, path, pin) from None
        if pin is not None and not (route.kind is Kind.HTTP and pin.http_condition()):
            await self._recheck(url, route, fs, path, pin)
        return data

    async def size(self, url: str) -> int:
        """Return the size in bytes of the whole target ``url`` (its pinned size, if pinned)."""
        route = self._route(url)
        plan = self._obstore_plan(url)
        if plan is not None and self._pin:
            size: object = (await self._pinned(url, route, None, url)).size
        elif plan is not None:
            size = (await self._current_version(url, route, None, url)).size
        else:
            size = await self._fsspec_size(url, route)
        if not isinstance(size, int):
            raise TargetReadError(url, "the target does not report its size")
        return size

    async def _fsspec_size(self, url: str, route: Route) -> object:
        fs, path = await self._resolve(url, route)
        if self._pin:
            size: object = (await self._pinned(url, route, fs, path)).size
        elif route.kind is Kind.LOCAL:
            size = (await self._local_status(url, path)).st_size
        else:
            size = (await self._fsspec.info(url, route, fs, path)).get("size")
        return size

    async def _read_obstore(self, url: str, route: Route, plan: Plan, start: int, end: int) -> Data:
        """Read ``[start, end)`` through obstore on fsspec's loop (``obstore_engine``).

        Pinned, the read carries the version (``If-Match``, else ``If-Unmodified-Since``);
        a 412 becomes ``TargetChangedError``. A pin that no header can carry (a weak ETag)
        is checked again once it is old, as on fsspec.
        """
        if end <= start:
            return b""
        pin = await self._pinned(url, route, None, url) if self._pin else None
        condition = pin.http_condition() if pin is not None else {}
        engine = self._obstore
        assert engine is not None
        try:
            data = await self._runner.on_loop(
                url, route, lambda: engine.read(url, plan, start, end, condition)
            )
        except TargetError as error:
            if pin is None or not isinstance(error.__cause__, PreconditionFailed):
                raise
            raise await self._changed(url, route, None, url, pin) from None
        if pin is not None and not condition:
            await self._recheck(url, route, None, url, pin)
        return data

    async def _resolve(self, url: str, route: Route) -> tuple[FileSystem, str]:
        key = route.filesystem_key
        if not self._fsspec.has(route):
            # the first use of a protocol may import it: not on the event loop
            await trio.to_thread.run_sync(
                self._fsspec.filesystem, url, key, limiter=self._runner.threads
            )
        roots = self._local_roots
        if roots is None:
            return self._fsspec.filesystem(url, key)
        local = roots.local_path(url)
        if local is None:
            roots.resolve(url)  # no file to look up: the protocols alone may refuse it
            return self._fsspec.filesystem(url, key)
        # the path looked up once per read, in a worker thread of the file's own (its
        # filesystem may hang); raises TargetAccessError
        real = await self._local.call(local, functools.partial(roots.resolve, url))
        if route.kind is not Kind.LOCAL:
            return self._fsspec.filesystem(url, key)  # a chain ending in a local file: as named
        return self._fsspec.filesystem(url, key)[0], real

    # ------------------------------------------------------------------ pinning

    async def _pinned(self, url: str, route: Route, fs: FileSystem, path: str) -> Pin:
        """Return the version of ``url`` pinned at its first use (asking once per URL; if
        the one asking fails, each waiter asks again itself)."""
        pin = self._pins.get(url)
        if pin is not None:
            return pin

        async def ask() -> Pin:
            pin = self._pins.get(url)  # pinned while this task waited for its turn
            if pin is not None:
                return pin
            pin = self._recorded_pin(url)
            if pin is None:
                pin = await self._current_version(url, route, fs, path)
                if not pin.known:
                    log.debug("%s reports no ETag or modification time: not pinned", url)
            self._pins[url] = pin
            return pin

        return await self._pinning.run(url, ask, share_errors=False)

    def _recorded_pin(self, url: str) -> Pin | None:
        """Return a fresh copy of the version ``--pins`` recorded for ``url``, never checked
        (so its first use compares it with the target), or None if none was recorded."""
        if self._recorded is None:
            return None
        recorded = self._recorded.get(url)
        if recorded is None:
            if not self._unrecorded_told:
                self._unrecorded_told = True
                log.warning(
                    "%s is not in the pins file %s: pinned at its first use instead (other "
                    "targets missing from it are not named)",
                    url,
                    self._recorded_in,
                )
            return None
        return dataclasses.replace(recorded, checked=-math.inf)

    async def version(self, url: str) -> Pin:
        """Return the version of ``url`` now, as a mount would pin it (``refmount pin``)."""
        route = self._route(url)
        fs, path = await self._where(url, route)
        return await self._current_version(url, route, fs, path)

    async def _where(self, url: str, route: Route) -> tuple[FileSystem, str]:
        """Return the fsspec filesystem and path of ``url``, or ``(None, url)`` when obstore
        reads it."""
        if self._obstore_plan(url) is not None:
            return None, url
        return await self._resolve(url, route)

    async def _current_version(self, url: str, route: Route, fs: FileSystem, path: str) -> Pin:
        plan = self._obstore_plan(url)
        if plan is not None:
            engine = self._obstore
            assert engine is not None
            info = await self._runner.on_loop(url, route, lambda: engine.head(url, plan))
            return Pin.from_info(info, self._clock())
        if route.kind is Kind.LOCAL:
            return Pin.from_stat(await self._local_status(url, path), self._clock())
        refresh = {"refresh": True} if route.protocol in S3_PROTOCOLS else {}
        info = await self._fsspec.info(url, route, fs, path, **refresh)
        return Pin.from_info(info, self._clock())

    async def _changed(
        self, url: str, route: Route, fs: FileSystem, path: str, pin: Pin
    ) -> TargetChangedError:
        """Return the error for a read the server refused for carrying ``pin`` (HTTP 412),
        naming the version there now if it can be asked."""
        try:
            now = (await self._current_version(url, route, fs, path)).describe()
        except TargetError:
            now = "another version (HTTP 412)"
        return TargetChangedError(url, pin.describe(), now, pin.origin)

    async def _recheck(self, url: str, route: Route, fs: FileSystem, path: str, pin: Pin) -> None:
        """Where a read cannot carry the version: ask again once the last check is old."""
        if not pin.known or self._clock() - pin.checked < self._recheck_after:
            return
        current = await self._current_version(url, route, fs, path)
        if not pin.same(current):
            raise TargetChangedError(url, pin.describe(), current.describe(), pin.origin)
        pin.checked = current.checked

    def read_now(self, url: str, start: int, end: int) -> bytes | None:
        """Return ``read_range``'s answer if it is at hand without waiting, else None.

        Only a plain local file already read once (its descriptor is open) whose range the
        page cache holds, and whose pin needs no new look-up, is read here; the bytes are
        checked against the pin as ``read_range`` checks them. With local roots nothing is:
        every read looks its path up again (a link swapped since is refused), and that
        look-up may block, so it is ``read_range``'s, in a worker thread. Any doubt answers
        None, and ``read_range`` does the full work.
        """
        path = self._local_paths.get(url)
        if path is None or self._local_roots is not None:
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

    async def _read_local(
        self, url: str, route: Route, fs: FileSystem, path: str, start: int, end: int
    ) -> bytes:
        """Read a local file through its kept-open descriptor (see ``LocalFiles``).

        Pinned: the descriptor's status after each read must match the pin (a file written
        in place); once the last check is ``recheck_after`` old, the path is looked up again
        too (a file replaced by another: the descriptor still reads the old one).
        """
        pin = await self._pinned(url, route, fs, path) if self._pin else None
        try:
            data, status = await self._local.read(path, start, end)
        except OSError as error:
            raise target_error(url, error) from error
        self._local_paths[url] = path
        if pin is None or not pin.known:
            return data
        now = self._clock()
        current = Pin.from_stat(status, now)
        if not pin.same(current):
            raise TargetChangedError(url, pin.describe(), current.describe(), pin.origin)
        if now - pin.checked >= self._recheck_after:
            try:
                at_path = Pin.from_stat(await self._local.path_status(path), now)
            except OSError as error:
                raise target_error(url, error) from error
            if not pin.same(at_path):
                self._local.forget(path)
                raise TargetChangedError(url, pin.describe(), at_path.describe(), pin.origin)
            pin.checked = now
        return data

    async def _local_status(self, url: str, path: str) -> os.stat_result:
        """Return the status of a local target through its descriptor (a regular file)."""
        try:
            return await self._local.status(path)
        except OSError as error:
            raise target_error(url, error) from error
