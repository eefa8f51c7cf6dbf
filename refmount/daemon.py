"""Wiring and lifecycle: load the references, mount, serve under trio, report readiness,
handle signals, and always unmount."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import faulthandler
import functools
import gc
import itertools
import logging
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pyfuse3
import trio

from refmount.config import STDIN_REFS, MountConfig, default_max_refs_size
from refmount.errors import MountError, ReferenceFormatError
from refmount.formats import LoadOptions, load
from refmount.formats.options import Progress
from refmount.fuse.adapter import FuseOperations, InFlight
from refmount.fuse.filesystem import Owner, RefFilesystem
from refmount.model import Inline, ReferenceSet
from refmount.namespace.tree import Tree
from refmount.ops import allocator, kernel_tuning, notify
from refmount.read.path import ReadPath
from refmount.read.reader import Reader
from refmount.store.options import StorageOptions
from refmount.store.roots import LocalRoots
from refmount.store.sources import FsspecSource, StreamSource
from refmount.store.store import Store

log = logging.getLogger(__name__)

READY_TIMEOUT = 30.0
"""Seconds to wait for the new mount to answer before giving up."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

STOP_GRACE = 2.0
"""Seconds, at most, during which requests are still answered (with EIO) at shutdown."""

STOP_QUIET = 0.2
"""Shutdown closes the connection once no request came for this many seconds."""

MOUNTINFO = Path("/proc/self/mountinfo")

DETACH_POLL = 0.5
"""Seconds between two looks at the mount table for a lazy unmount (see ``_stop_when_detached``)."""

DEFAULT_FUSE_OPTIONS = ("fsname=refmount", "subtype=refmount", "ro", "default_permissions")

OVERRIDDEN_FUSE_OPTIONS = frozenset({"rw"})
"""Options that contradict a default and are dropped: the mount is always read-only."""

HEAP_HEADROOM = 32 * 1024 * 1024
"""Resident bytes allowed above the set after loading plus the cache budget before freed
heap pages are handed back (half of the 64 MiB the daemon promises to stay within)."""

HEAP_CHECK = 0.5
"""Seconds between looks at the resident set; doubled, up to ``HEAP_CHECK_MAX``, while
trimming does not bring it under its bound (live data, not freed pages, is over it)."""

HEAP_CHECK_MAX = 8.0

PREPARE_SAMPLE = 10_000
"""How many stored keys are looked at to find the targets to get ready for at mount time."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """A reference set ready to be served: its source, references, tree and mtime."""

    source: FsspecSource | StreamSource
    references: ReferenceSet
    tree: Tree
    mtime_ns: int


MOUNTINFO = Path("/proc/self/mountinfo")
"""The kernel's list of the mounts this process sees, one per line, in mount order."""

NONEMPTY_OPTION = "nonempty"
"""``-o nonempty``: mount over a directory that has entries (libfuse 3 no longer knows it)."""


@dataclass(frozen=True, slots=True)
class MountEntry:
    """One line of ``/proc/self/mountinfo``: where, what type and from what."""

    mountpoint: str
    fstype: str
    source: str

    @property
    def is_fuse(self) -> bool:
        """Return True for a FUSE filesystem (``fuse``, ``fuseblk``, ``fuse.NAME``)."""
        return self.fstype in ("fuse", "fuseblk") or self.fstype.startswith("fuse.")


def _unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (``\\040`` for a space, and tab, newline, backslash)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def mounts_on(path: Path, mountinfo: Path = MOUNTINFO) -> list[MountEntry]:
    """Return the mounts whose mountpoint is ``path`` (resolved), oldest first."""
    wanted = os.path.realpath(path)
    found: list[MountEntry] = []
    try:
        text = mountinfo.read_text(errors="replace")
    except OSError:  # no /proc: nothing to learn, the kernel still refuses what it must
        return found
    for line in text.splitlines():
        fields = line.split(" ")
        if " - " not in line or len(fields) < 5:
            continue
        tail = line.split(" - ", 1)[1].split(" ")
        if _unescape(fields[4]) == wanted and len(tail) >= 2:
            found.append(MountEntry(wanted, _unescape(tail[0]), _unescape(tail[1])))
    return found


def check_mountpoint(mountpoint: Path, nonempty: bool = False, mountinfo: Path = MOUNTINFO) -> None:
    """Raise ``MountError`` with advice if ``mountpoint`` cannot be mounted on.

    Refused: a missing path or not a directory; a stale FUSE mount; a directory on which a
    FUSE filesystem is mounted already (a second mount would stack on it); and, unless
    ``nonempty``, a directory with entries, which the mount would hide. Other mounts there
    are fine: an automount point (autofs, always empty) or a bind mount.
    """
    try:
        os.statvfs(mountpoint)  # unlike stat, never answered from the kernel's caches
    except FileNotFoundError:
        raise MountError(f"mountpoint {mountpoint} does not exist") from None
    except OSError as error:
        if error.errno == errno.ENOTCONN:
            raise MountError(
                f"mountpoint {mountpoint} is a stale FUSE mount (Transport endpoint is not "
                f"connected): its daemon died without unmounting. Clear it with "
                f"'fusermount3 -u {mountpoint}' (or 'umount -l {mountpoint}' as root), "
                f"or mount with -o auto_unmount to have this done automatically."
            ) from None
        raise MountError(f"mountpoint {mountpoint}: {error.strerror}") from None
    if not os.path.isdir(mountpoint):
        raise MountError(f"mountpoint {mountpoint} is not a directory")
    mounts = mounts_on(mountpoint, mountinfo)
    fuse = [entry for entry in mounts if entry.is_fuse]
    if fuse:
        raise MountError(
            f"mountpoint {mountpoint} already has a FUSE filesystem mounted on it "
            f"({fuse[-1].fstype} from {fuse[-1].source}); unmount it first with "
            f"'fusermount3 -u {mountpoint}'"
        )
    automount = bool(mounts) and mounts[-1].fstype == "autofs"
    if not nonempty and not automount and _has_entries(mountpoint):
        raise MountError(
            f"mountpoint {mountpoint} is not empty: the mount would hide its files; "
            f"give -o {NONEMPTY_OPTION} to mount over them anyway"
        )


def _has_entries(directory: Path) -> bool:
    try:
        with os.scandir(directory) as entries:
            return next(entries, None) is not None
    except OSError as error:
        raise MountError(f"mountpoint {directory}: {error.strerror}") from None


def load_references(config: MountConfig, progress: Progress | None = None) -> Loaded:
    """Read and check the reference set; raises ``ReferenceFormatError`` when malformed.

    ``progress`` is told ``(keys read, total)`` now and then while a large JSON file loads.
    """
    started = time.monotonic()
    cap = config.max_refs_size or default_max_refs_size()
    source: FsspecSource | StreamSource
    try:
        if config.refs == STDIN_REFS:
            source = StreamSource(sys.stdin.buffer, config.base, cap)
        else:
            storage = StorageOptions(config.target_options, config.s3_options)
            source = FsspecSource(config.refs, storage, cap)
    except (OSError, ValueError, ImportError) as error:
        raise ReferenceFormatError(config.refs, None, f"cannot open: {error}") from error
    options = LoadOptions(
        target=config.target,
        remote_protocol=config.remote_protocol,
        skip_invalid=config.skip_invalid,
        progress=progress,
        max_size=cap,
    )
    try:
        references = load(source, options)
    except OSError as error:
        raise ReferenceFormatError(source.url, None, f"cannot read: {error}") from error
    if config.shared:
        check_local_targets(references, LocalRoots(config.local_roots))
    tree = Tree.build(
        references.keys(), references.grids, source=source.url, skip_invalid=config.skip_invalid
    )
    mtime = source.mtime() or time.time()
    # Loading freed many small objects: give those pages back, and keep the long-lived rest
    # out of the cyclic collector's sight.
    gc.collect()
    gc.freeze()
    allocator.trim()
    log.info(
        "loaded %s: %d names, %d chunk grids in %.2f s",
        source.url,
        tree.static_count,
        len(references.grids),
        time.monotonic() - started,
    )
    return Loaded(source, references, tree, int(mtime * 1e9))


def check_local_targets(references: ReferenceSet, roots: LocalRoots) -> None:
    """Raise ``ReferenceFormatError`` naming the first key whose target ``roots`` refuse.

    Only explicit keys are known at load time; the chunks of a Parquet set are checked when
    they are opened, and every read is checked again by the store.
    """
    problems: dict[str, str | None] = {}
    keys = references.keys()  # a ReferenceSet is not itself iterable
    for key in keys:
        reference = references.get(key)
        if reference is None or isinstance(reference, Inline):
            continue
        url = reference.url
        if url not in problems:
            problems[url] = roots.problem(url)
        problem = problems[url]
        if problem is not None:
            raise ReferenceFormatError(references.source, key, f"target {url}: {problem}")


def fuse_options(config: MountConfig) -> set[str]:
    """Return the FUSE mount options: refmount's defaults plus the user's."""
    options = set(DEFAULT_FUSE_OPTIONS)
    options.update(config.fuse_options)
    return options - OVERRIDDEN_FUSE_OPTIONS


class _FuseArgs(ctypes.Structure):
    """libfuse's ``struct fuse_args``."""

    _fields_ = (
        ("argc", ctypes.c_int),
        ("argv", ctypes.POINTER(ctypes.c_char_p)),
        ("allocated", ctypes.c_int),
    )


def fuse_options_problem(options: Iterable[str]) -> str | None:
    """Return what libfuse says against ``options``, or None when it accepts them.

    Asked the way ``pyfuse3.init`` will ask it (``fuse_session_new`` with one ``-o`` per
    option, ASCII only), without mounting: so an unknown or malformed FUSE option stops the
    command before the set is read. None too when libfuse cannot be loaded here.
    """
    encoded: list[bytes] = []
    for option in sorted(options):
        if not option.isascii():
            return f"not ASCII: {option}"
        encoded.append(option.encode("ascii"))
    name = ctypes.util.find_library("fuse3")
    if name is None:
        return None
    library = ctypes.CDLL(name)
    library.fuse_session_new.restype = ctypes.c_void_p
    library.fuse_session_new.argtypes = (
        ctypes.POINTER(_FuseArgs),
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
    )
    library.fuse_session_destroy.argtypes = (ctypes.c_void_p,)
    library.fuse_opt_free_args.argtypes = (ctypes.POINTER(_FuseArgs),)
    words = [b"refmount", *(word for option in encoded for word in (b"-o", option))]
    argv = (ctypes.c_char_p * (len(words) + 1))(*words, None)
    args = _FuseArgs(len(words), argv, 0)
    no_operations = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_void_p))
    with tempfile.TemporaryFile() as said:  # libfuse complains on stderr: keep its words
        saved = os.dup(2)
        try:
            os.dup2(said.fileno(), 2)
            session = library.fuse_session_new(
                ctypes.byref(args), no_operations, len(no_operations), None
            )
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        said.seek(0)
        complaint = said.read(4096).decode(errors="replace")
    library.fuse_opt_free_args(ctypes.byref(args))
    if session:
        library.fuse_session_destroy(session)
        return None
    lines = [line.strip() for line in complaint.splitlines() if line.startswith("fuse:")]
    return "; ".join(line.removeprefix("fuse: ") for line in lines) or "libfuse refuses them"


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
    roots = LocalRoots(config.local_roots, forbidden=[str(mountpoint)]) if config.shared else None
    store = Store(
        StorageOptions(config.remote_options, config.s3_options),
        connections_per_host=config.retry.connections_per_host,
        local_roots=roots,
        pin=config.pin_versions,
        own_mount=str(mountpoint),
        fetcher=config.fetcher,
    )
    reader = Reader(store, config.read, config.retry)
    references: ReferenceSet = loaded.references
    read_path: ReadPath = reader
    if config.decode:
        references, read_path = decode_view(loaded.references, reader, config.read.cache_size)
    filesystem = RefFilesystem(
        loaded.tree,
        references,
        read_path,
        owner=Owner.current(config.umask, uid=config.uid, gid=config.gid),
        mtime_ns=loaded.mtime_ns,
        target_problem=None if roots is None else roots.problem,
    )
    requests = InFlight()
    operations = FuseOperations(
        filesystem, timeout=config.attr_timeout, xattrs=config.xattrs, requests=requests
    )
    check_mountpoint(mountpoint, config.nonempty)  # again: it may have changed since
    # Hold SIGINT/SIGTERM from the moment the mount exists until trio listens for them, so a
    # signal in between is handled (late) instead of killing us with the mount left behind.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        pyfuse3.init(operations, str(mountpoint), fuse_options(config))
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
        trio.run(_serve, mountpoint, ready, reader, requests, tuning, prepare, lifeline, bound)
    finally:
        store.close()
        log.info("unmounting %s", mountpoint)
        notify.stopping(f"unmounting {mountpoint}")
        pyfuse3.close(unmount=True)


def decode_view(
    references: ReferenceSet, reader: Reader, cache_size: int
) -> tuple[ReferenceSet, ReadPath]:
    """Return the ``--decode`` view of the references and the reader."""
    try:
        from refmount.decode.view import decoded_view  # numcodecs, only for --decode
    except ImportError as error:
        raise MountError(
            f"--decode needs numcodecs ({error}); install it with: pip install 'refmount[decode]'"
        ) from None
    return decoded_view(references, reader, cache_size)


def prepare_targets(store: Store, references: ReferenceSet, most: int = PREPARE_SAMPLE) -> None:
    """Create the filesystems of the targets the first ``most`` keys name (blocking).

    So the first read of an S3 or HTTP target does not wait for s3fs or aiohttp to be
    imported. Chunks not loaded yet (Parquet) are not looked at. Best effort: what fails here
    is left for the reads to report.
    """
    urls: set[str] = set()
    try:
        for key in itertools.islice(references.keys(), most):
            reference = references.get(key)
            if reference is not None and not isinstance(reference, Inline):
                urls.add(reference.url)
    except Exception as error:  # the reads report what is wrong
        log.debug("cannot look at the targets ahead of reads: %s", error)
    store.prepare(urls)


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


async def _serve(
    mountpoint: Path,
    on_ready: Callable[[], None],
    reader: Reader,
    requests: InFlight,
    tuning: kernel_tuning.KernelTuning | None = None,
    prepare: Callable[[], None] | None = None,
    lifeline: int | None = None,
    bound: allocator.ResidentBound | None = None,
) -> None:
    # the reader prefetches in a nursery of its own while serving; leaving cancels it
    async with reader.running(), trio.open_nursery() as nursery:
        if bound is not None:
            nursery.start_soon(_keep_resident_within, bound)
        if prepare is not None:
            nursery.start_soon(
                functools.partial(trio.to_thread.run_sync, prepare, abandon_on_cancel=True)
            )
        nursery.start_soon(_stop_on_signals, requests)
        if lifeline is not None:
            nursery.start_soon(_stop_when_owner_exits, lifeline, requests)
        nursery.start_soon(_announce_and_watch, mountpoint, on_ready, requests, tuning)
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
