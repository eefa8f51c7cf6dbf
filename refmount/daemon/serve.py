"""A mount's lifecycle: mount with libfuse, serve under trio, report readiness, keep the
resident set within its bound, stop on signals, a lazy unmount or the owner's exit, and
always unmount."""

from __future__ import annotations

import faulthandler
import functools
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyfuse3
import trio

from refmount.config import MountConfig
from refmount.daemon.compose import open_mount, prepare_targets
from refmount.daemon.fuse_options import fuse_options
from refmount.daemon.loading import Loaded
from refmount.daemon.mountpoint import MOUNTINFO, check_mountpoint
from refmount.errors import MountError
from refmount.formats.icechunk.runtime import settle_runtime
from refmount.fuse.adapter import InFlight
from refmount.ops import allocator, kernel_tuning, notify
from refmount.read.reader import Reader

log = logging.getLogger("refmount.daemon")
"""One logger for the daemon's lines, whichever module says them (``refmount.daemon:``)."""


READY_TIMEOUT = 30.0
"""Seconds to wait for the new mount to answer before giving up."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

STOP_GRACE = 2.0
"""Seconds, at most, during which requests are still answered (with EIO) at shutdown."""

STOP_QUIET = 0.2
"""Shutdown closes the connection once no request came for this many seconds."""

DETACH_POLL = 0.5
"""Seconds between two looks at the mount table for a lazy unmount (see ``_stop_when_detached``)."""

HEAP_HEADROOM = 32 * 1024 * 1024
"""Resident bytes allowed above the set after loading plus the cache budget before freed
heap pages are handed back (half of the 64 MiB the daemon promises to stay within)."""

HEAP_CHECK = 0.5
"""Seconds between looks at the resident set; doubled, up to ``HEAP_CHECK_MAX``, while
trimming does not bring it under its bound (live data, not freed pages, is over it)."""

HEAP_CHECK_MAX = 8.0


def mount_and_serve(
    config: MountConfig,
    loaded: Loaded,
    on_ready: Callable[[], None] = lambda: None,
    tuning: kernel_tuning.KernelTuning | None = None,
    lifeline: int | None = None,
) -> None:
    """Mount, call ``on_ready`` once the mount answers, serve until unmounted or signalled.

    With ``lifeline``, the read end of a pipe whose other end the owner of the mount holds
    (the Python API), the end of that pipe (the owner exited, normally or not) unmounts too.

    Under a service manager (``$NOTIFY_SOCKET``) readiness is also reported as ``READY=1``,
    and the start of the unmount as ``STOPPING=1``. With ``tuning`` (the default; none with
    ``-o no_tune_kernel``), the connection's sysfs knobs are set once the mount answers,
    before readiness is reported.
    """
    mountpoint = config.mountpoint
    parts = open_mount(config, loaded)
    store, reader, requests = parts.store, parts.reader, parts.requests
    check_mountpoint(mountpoint, config.nonempty)  # again: it may have changed since
    # Hold SIGINT/SIGTERM from the moment the mount exists until trio listens for them, so a
    # signal in between is handled (late) instead of killing us with the mount left behind.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        pyfuse3.init(parts.operations, str(mountpoint), fuse_options(config))
    except RuntimeError as error:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        raise MountError(f"cannot mount on {mountpoint}: {error}") from None
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    allocator.reuse_freed_blocks()  # after loading (the loader's garbage was trimmed then)
    bound = allocator.ResidentBound(config.read.cache_size + HEAP_HEADROOM)

    def ready() -> None:
        on_ready()
        notify.ready(f"mounted {loaded.source.url} on {mountpoint}")

    def prepare() -> None:
        prepare_targets(store, loaded.references)
        bound.settle()  # the fetch engines are imported: count the bound from here

    try:
        serving = Serving(mountpoint, ready, reader, requests, tuning, prepare, lifeline, bound)
        trio.run(_serve, serving)
    finally:
        store.close()
        log.info("unmounting %s", mountpoint)
        notify.stopping(f"unmounting {mountpoint}")
        pyfuse3.close(unmount=True)
        if loaded.chunk_store is not None:
            settle_runtime()  # the process exits next: Icechunk's threads finish first


def tune_kernel(
    mountpoint: Path,
    device: int,
    tuning: kernel_tuning.KernelTuning,
    sysfs: Path = kernel_tuning.SYSFS,
) -> None:
    """Apply ``tuning`` to the connection of the mount ``device``, mounting fusectl first
    when it is missing; one log line says what was done or why not.

    The default tuning logs at debug level and does nothing without root; asked for
    (``tuning.asked``), it logs at info level, and a failure or missing root is a warning.
    Blocking file operations on sysfs (never on the mount itself): call it from a thread.
    """
    done, failed = (logging.INFO, logging.WARNING) if tuning.asked else (logging.DEBUG,) * 2
    if os.geteuid() != 0:
        log.log(
            failed, "-o tune_kernel needs root; keeping the kernel's defaults for %s", mountpoint
        )
        return
    try:
        if kernel_tuning.ensure_fusectl(sysfs):
            log.log(done, "mounted fusectl on %s", sysfs / "fs" / "fuse" / "connections")
        knobs = kernel_tuning.tune_connection(device, tuning, sysfs)
    except (kernel_tuning.TuningError, OSError) as error:
        log.log(
            failed, "cannot tune the kernel for %s (keeping its defaults): %s", mountpoint, error
        )
        return
    log.log(done, "kernel tuning for %s: %s", mountpoint, kernel_tuning.describe(knobs))


@dataclass(frozen=True)
class Serving:
    """What the serving loop runs with: the mount's reader and requests, what to call once
    it answers (``ready``) and in a worker thread meanwhile (``prepare``), the kernel
    ``tuning``, the owner's ``lifeline`` and the resident ``bound``."""

    mountpoint: Path
    ready: Callable[[], None]
    reader: Reader
    requests: InFlight
    tuning: kernel_tuning.KernelTuning | None = None
    prepare: Callable[[], None] | None = None
    lifeline: int | None = None
    bound: allocator.ResidentBound | None = None


async def _serve(serving: Serving) -> None:
    """Serve until unmounted: pyfuse3's loop, and beside it the helpers that watch signals,
    the owner, readiness and the resident set."""
    requests = serving.requests
    # the reader prefetches in a nursery of its own while serving; leaving cancels it
    async with serving.reader.running(), trio.open_nursery() as nursery:
        if serving.bound is not None:
            nursery.start_soon(_keep_resident_within, serving.bound)
        if serving.prepare is not None:
            nursery.start_soon(
                functools.partial(trio.to_thread.run_sync, serving.prepare, abandon_on_cancel=True)
            )
        nursery.start_soon(_stop_on_signals, requests)
        if serving.lifeline is not None:
            nursery.start_soon(_stop_when_owner_exits, serving.lifeline, requests)
        nursery.start_soon(
            _announce_and_watch, serving.mountpoint, serving.ready, requests, serving.tuning
        )
        await pyfuse3.main(min_tasks=4, max_tasks=256)
        nursery.cancel_scope.cancel()  # unmounted from outside: stop the helpers


async def _keep_resident_within(bound: allocator.ResidentBound) -> None:
    """Hand freed heap pages back whenever the resident set grows past ``bound``."""
    interval = HEAP_CHECK
    while True:
        await trio.sleep(interval)
        trimmed = await trio.to_thread.run_sync(bound.enforce, abandon_on_cancel=True)
        interval = min(interval * 2, HEAP_CHECK_MAX) if trimmed else HEAP_CHECK


async def _stop_on_signals(requests: InFlight) -> None:
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        async for signum in signals:
            await _stop(requests, f"received {signal.Signals(signum).name}")
            return


async def _stop(requests: InFlight, why: str) -> None:
    """End serving now: answer every request in flight with EIO, then leave pyfuse3's loop.

    Nothing waits for a target: what the handlers were waiting for is cancelled (remote
    requests) or abandoned (worker threads stuck in a system call). The kernel follows a
    failed readahead with a read of its own, and a program may ask again: requests keep
    being answered, with EIO at once, until none came for ``STOP_QUIET`` (at most
    ``STOP_GRACE``). Requests left unread when the connection closes get ``ECONNABORTED``.
    """
    aborted = requests.abort()
    log.info("%s, unmounting (%d requests in flight answered EIO)", why, aborted)
    deadline = trio.current_time() + STOP_GRACE
    seen = requests.started
    while trio.current_time() < deadline:
        await trio.sleep(STOP_QUIET)
        if requests.started == seen:
            break
        seen = requests.started
    pyfuse3.terminate()


async def _announce_and_watch(
    mountpoint: Path,
    on_ready: Callable[[], None],
    requests: InFlight,
    tuning: kernel_tuning.KernelTuning | None = None,
) -> None:
    """Announce readiness, then stop serving once the mount has been detached."""
    device = await _announce_when_ready(mountpoint, on_ready, tuning)
    if device is not None:
        await _stop_when_detached(device, requests)


async def _stop_when_detached(
    device: int, requests: InFlight, mountinfo: Path = MOUNTINFO, every: float = DETACH_POLL
) -> None:
    """Stop serving once the mount ``device`` is gone from this namespace's mount table.

    A lazy unmount (``fusermount3 -u -z``) detaches the mount at once but the kernel keeps
    the connection, and us, alive while any file of it stays open: a program blocked in a
    slow read would keep the daemon serving a mount nobody can reach any more.
    """
    wanted = f" {os.major(device)}:{os.minor(device)} "
    while True:
        await trio.sleep(every)
        try:
            table = mountinfo.read_text()  # noqa: ASYNC240 - procfs, answered from memory
        except OSError:  # pragma: no cover - procfs always answers
            continue
        if wanted not in table:
            await _stop(requests, "the mount was detached (lazy unmount)")
            return


async def _stop_when_owner_exits(lifeline: int, requests: InFlight) -> None:
    """Unmount once the pipe ``lifeline`` ends: the process that owns the mount is gone."""
    while True:
        await trio.lowlevel.wait_readable(lifeline)
        if not os.read(lifeline, 4096):  # the owner never writes: anything else is noise
            break
    await _stop(requests, "the process that owns the mount exited")


async def _announce_when_ready(
    mountpoint: Path, on_ready: Callable[[], None], tuning: kernel_tuning.KernelTuning | None = None
) -> int | None:
    """Wait until the kernel routes requests on ``mountpoint`` to us, then call ``on_ready``.

    With ``tuning``, the connection's kernel knobs are set first. Returns the mount's device
    number (None if it never answered).
    """
    parent_device = (await trio.to_thread.run_sync(os.stat, mountpoint.parent)).st_dev
    deadline = trio.current_time() + READY_TIMEOUT
    while trio.current_time() < deadline:
        status = await trio.to_thread.run_sync(os.stat, mountpoint, abandon_on_cancel=True)
        if status.st_dev != parent_device and status.st_ino == pyfuse3.ROOT_INODE:
            log.info("mounted on %s", mountpoint)
            if tuning is not None:
                await trio.to_thread.run_sync(tune_kernel, mountpoint, status.st_dev, tuning)
            on_ready()
            return status.st_dev
        await trio.sleep(0.01)
    log.error("the mount on %s did not answer within %.0f s", mountpoint, READY_TIMEOUT)
    pyfuse3.terminate()
    return None
