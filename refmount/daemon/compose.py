"""The one place that wires a mount: store, reader, the ``--decode`` view, filesystem and
FUSE adapter, built from the options and a loaded set (``open_mount``)."""

from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass

import trio

from refmount.config import MountConfig
from refmount.daemon.loading import Loaded
from refmount.errors import MountError
from refmount.extras import DECODE
from refmount.fuse.adapter import FuseOperations, InFlight
from refmount.fuse.filesystem import Owner, RefFilesystem
from refmount.fuse.virtual import ServedFile
from refmount.model import Inline, ReferenceSet
from refmount.read.path import ReadPath
from refmount.read.reader import Reader
from refmount.store.disk_cache import DiskCache, default_size, open_directory
from refmount.store.options import StorageOptions
from refmount.store.roots import LocalRoots
from refmount.store.store import Store
from refmount.zarr2.view import Zarr2References
from refmount.zarr2.view import plan as zarr2_plan

log = logging.getLogger("refmount.daemon")
"""One logger for the daemon's lines, whichever module says them (``refmount.daemon:``)."""


DISK_THREADS = 8
"""How many worker threads read and write the disk cache at once."""

PREPARE_SAMPLE = 10_000
"""How many stored keys are looked at to find the targets to get ready for at mount time."""


def decode_view(
    references: ReferenceSet, reader: Reader, cache_size: int
) -> tuple[ReferenceSet, ReadPath]:
    """Return the ``--decode`` view of the references and the reader."""
    try:
        from refmount.decode.reader import decoded_view  # numcodecs, only for --decode
    except ImportError as error:
        raise MountError(
            f"--decode needs numcodecs ({error}); install it with: {DECODE.install}"
        ) from None
    return decoded_view(references, reader, cache_size)


def cache_dir_problem(directory: str | None) -> str | None:
    """Return why ``--cache-dir`` cannot be used (checked before loading), or None."""
    if directory is None:
        return None
    try:
        os.close(open_directory(directory))
    except OSError as error:
        return str(error.strerror or error)
    return None


def open_disk_cache(config: MountConfig) -> DiskCache:
    """Open the disk cache that ``--cache-dir`` names (``MountError`` if it is refused)."""
    directory = config.cache_dir
    assert directory is not None
    try:
        size = config.cache_dir_size
        if size is None:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            size = default_size(directory)
        return DiskCache(directory, size, trio.CapacityLimiter(DISK_THREADS))
    except OSError as error:
        raise MountError(f"--cache-dir: {error.strerror or error}") from None


def netcdf_file(
    config: MountConfig,
    loaded: ReferenceSet,
    references: ReferenceSet,
    read_path: ReadPath,
    reader: Reader,
) -> ServedFile:
    """Return the ``--netcdf`` file of the (with ``--decode``, decoded) set, laid out now
    with ``--netcdf-eager``; its warnings are logged once.

    Without ``--decode``, where the decode extra is installed, the arrays whose codecs have
    no HDF5 filter are read through a decoded view of their own (no ``--decode`` warnings:
    the tree is served as stored). The file's schema reads zarr v2 metadata: a set as
    ``loaded`` with zarr v3 nodes (an Icechunk repository, a kerchunk set of ``zarr.json``
    arrays), unless the tree is already their v2 view (``--zarr-format 2``), gets a v2 view
    of its own for the file, read through the plain ``reader`` and decoded by its own view.
    """
    from refmount.netcdf.served import Decoding, open_netcdf  # h5py, only for --netcdf

    assert config.netcdf is not None
    decoded = config.decode
    if config.zarr_format != 2:
        view = zarr2_plan(loaded, None)
        if view.hidden:  # v3 nodes (those with no v2 form stay v3: the file leaves them out)
            references, read_path, decoded = Zarr2References(loaded, view), reader, False
    decoding = None
    if not decoded and DECODE.missing() is None:
        from refmount.decode.reader import DecodingReader
        from refmount.decode.view import DecodedReferences, plan

        decisions = plan(references, config.read.cache_size)
        view_of = DecodedReferences(references, decisions)
        decoding = Decoding(view_of, DecodingReader(reader, decisions, lookahead=view_of.chunk_now))
    return open_netcdf(
        config.netcdf,
        references,
        read_path,
        budget=config.read.cache_size,
        eager=config.netcdf_eager,
        decoding=decoding,
    )


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


@dataclass(frozen=True, slots=True)
class MountParts:
    """A mount's parts, wired: what the lifecycle runs and closes."""

    store: Store
    reader: Reader
    filesystem: RefFilesystem
    operations: FuseOperations
    requests: InFlight


def open_mount(config: MountConfig, loaded: Loaded) -> MountParts:
    """Build the parts of a mount of ``loaded`` with ``config`` (nothing is mounted yet)."""
    mountpoint = config.mountpoint
    roots = LocalRoots(config.local_roots, forbidden=[str(mountpoint)]) if config.shared else None
    store = Store(
        StorageOptions(config.remote_options, config.s3_options),
        connections_per_host=config.retry.connections_per_host,
        local_roots=roots,
        pin=config.pin_versions,
        own_mount=str(mountpoint),
        fetcher=config.fetcher,
        icechunk_store=loaded.chunk_store,
        recorded=loaded.recorded_pins,
        recorded_in=config.pins or "",
        disk=None if config.cache_dir is None else open_disk_cache(config),
    )
    reader = Reader(store, config.read, config.retry)
    references: ReferenceSet = loaded.references
    read_path: ReadPath = reader
    if config.decode:
        references, read_path = decode_view(loaded.references, reader, config.read.cache_size)
    served = None
    if config.netcdf is not None:
        served = netcdf_file(config, loaded.references, references, read_path, reader)
    filesystem = RefFilesystem(
        loaded.tree,
        references,
        read_path,
        owner=Owner.current(config.umask, uid=config.uid, gid=config.gid),
        mtime_ns=loaded.mtime_ns,
        target_problem=None if roots is None else roots.problem,
        about=loaded.about,
        disk_cache=store.disk_statistics,
        served=served,
    )
    requests = InFlight()
    operations = FuseOperations(
        filesystem, timeout=config.attr_timeout, xattrs=config.xattrs, requests=requests
    )
    return MountParts(store, reader, filesystem, operations, requests)
