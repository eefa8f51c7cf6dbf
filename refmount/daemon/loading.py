"""Loading a reference set for a mount: its source (a file, a URL or standard input) read
under the size cap, the set parsed, the namespace built, the loader's garbage handed back.
An Icechunk repository (recognised by its layout, or ``--format icechunk``) is opened at one
snapshot instead, and its chunks are read through its session (``Loaded.chunk_store``)."""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from refmount.config import REPOSITORY_ONLY, STDIN_REFS, MountConfig
from refmount.errors import ReferenceFormatError, out_of_memory_is_bad_input
from refmount.formats import LoadOptions, load
from refmount.formats.icechunk import (
    DEFAULT_SHARE,
    FileLimit,
    is_repository_for,
    load_repository,
)
from refmount.formats.options import Progress
from refmount.model import Inline, ReferenceSet
from refmount.namespace.tree import Tree
from refmount.ops import allocator
from refmount.ops.memory import default_max_refs_size, describe_limit
from refmount.store.options import StorageOptions
from refmount.store.pin_file import read_pins
from refmount.store.pins import Pin
from refmount.store.roots import LocalRoots
from refmount.store.sources import FsspecSource, StreamSource
from refmount.zarr2.view import Decodes, zarr2_view

log = logging.getLogger("refmount.daemon")
"""One logger for the daemon's lines, whichever module says them (``refmount.daemon:``)."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """A reference set ready to be served: its source, references, tree and mtime.

    For an Icechunk repository, ``chunk_store`` is the read-only session's store that its
    chunks are read through, and ``about`` says which snapshot is served (``snapshot``).
    """

    source: FsspecSource | StreamSource
    references: ReferenceSet
    tree: Tree
    mtime_ns: int
    chunk_store: object | None = None
    about: Mapping[str, str] = field(default_factory=dict)
    recorded_pins: Mapping[str, Pin] | None = None
    """The targets' versions the pins file records (``--pins``), read before the set."""


def load_references(config: MountConfig, progress: Progress | None = None) -> Loaded:
    """Read and check the reference set; raises ``ReferenceFormatError`` when malformed.

    ``progress`` is told ``(keys read, total)`` now and then while a large JSON file loads.
    A pins file (``--pins``) is read first: a malformed one stops the mount before the set
    is read.
    """
    started = time.monotonic()
    recorded = None if config.pins is None else read_pins(config.pins)
    loaded = _load(config, progress, started)
    return loaded if recorded is None else dataclasses.replace(loaded, recorded_pins=recorded)


def _load(config: MountConfig, progress: Progress | None, started: float) -> Loaded:
    """Read and check the reference set or repository (``load_references``' work)."""
    cap = config.max_refs_size or default_max_refs_size()
    source: FsspecSource | StreamSource
    try:
        if config.refs == STDIN_REFS:
            source = StreamSource(sys.stdin.buffer, config.base, cap)
        else:
            storage = StorageOptions(config.refs_options, config.s3_options)
            source = FsspecSource(config.refs, storage, cap)
    except (OSError, ValueError, ImportError) as error:
        raise ReferenceFormatError(config.refs, None, f"cannot open: {error}") from error
    if is_repository_for(config.format, source):
        with out_of_memory_is_bad_input(source.url, describe_limit):
            return _load_repository(config, source, started)
    if config.version.given or config.authorize_containers:
        raise ReferenceFormatError(
            source.url, None, f"{REPOSITORY_ONLY} apply only to an Icechunk repository"
        )
    options = LoadOptions(
        target=config.target,
        remote_protocol=config.remote_protocol,
        skip_invalid=config.skip_invalid,
        progress=progress,
        max_size=cap,
    )
    with out_of_memory_is_bad_input(source.url, describe_limit):
        try:
            references = load(source, options)
        except OSError as error:
            raise ReferenceFormatError(source.url, None, f"cannot read: {error}") from error
        if config.shared:
            check_local_targets(references, LocalRoots(config.local_roots))
        references = as_format(references, config)
        tree = Tree.build(
            references.keys(),
            references.grids,
            source=source.url,
            skip_invalid=config.skip_invalid,
        )
    mtime = source.mtime() or time.time()
    _settle()
    log.info(
        "loaded %s: %d names, %d chunk grids in %.2f s",
        source.url,
        tree.static_count,
        len(references.grids),
        time.monotonic() - started,
    )
    return Loaded(source, references, tree, int(mtime * 1e9))


def as_format(references: ReferenceSet, config: MountConfig) -> ReferenceSet:
    """Return the references as ``--zarr-format`` asks: the v2 view of their v3 nodes for
    2 (before the tree is built, since names change), as stored otherwise. With
    ``--decode``, arrays whose codecs have no v2 form but that are decoded are viewed too."""
    if config.zarr_format != 2:
        return references
    return zarr2_view(references, decodes_v3(config))


def decodes_v3(config: MountConfig) -> Decodes | None:
    """Return, with ``--decode``, what tells the v2 view which v3 arrays are decoded."""
    if not config.decode:
        return None
    try:
        from refmount.decode import view  # numcodecs, only for --decode
    except ImportError:
        return None  # composing the mount says what is missing
    return functools.partial(view.decodes_v3, cache_size=config.read.cache_size)


def _settle() -> None:
    """Loading freed many small objects: give those pages back, and keep the long-lived
    rest out of the cyclic collector's sight."""
    gc.collect()
    gc.freeze()
    allocator.trim()


def _file_limit(source: FsspecSource | StreamSource, given: int | None) -> FileLimit | None:
    """Return the limit on the repository's files: ``--max-refs-size`` if ``given``, else a
    share of the default cap on a reference file (``DEFAULT_SHARE``)."""
    if not isinstance(source, FsspecSource):
        return None
    return FileLimit(source.size, given or default_max_refs_size() // DEFAULT_SHARE)


def _load_repository(
    config: MountConfig, source: FsspecSource | StreamSource, started: float
) -> Loaded:
    """Open REFS as an Icechunk repository at the snapshot asked for, and build its tree;
    no file of it that Icechunk reads whole may be larger than ``_file_limit`` allows."""
    storage = StorageOptions(config.refs_options, config.s3_options).for_target(source.url)
    repository = load_repository(
        source.url,
        config.version,
        config.authorize_containers,
        storage,
        _file_limit(source, config.max_refs_size),
        StorageOptions(config.remote_options, config.s3_options).for_target,
    )
    opened, references = repository.opened, repository.references
    if config.shared:
        check_local_containers(source.url, opened.authorized, LocalRoots(config.local_roots))
    served = as_format(references, config)
    tree = Tree.build(
        served.keys(), served.grids, source=source.url, skip_invalid=config.skip_invalid
    )
    _settle()
    counts = references.count_by_kind()
    log.info(
        "loaded %s at %s, snapshot %s: %d nodes, %d arrays, %s chunks in %.2f s",
        source.url,
        config.version.describe(),
        opened.snapshot_id,
        tree.static_count,
        len(references.grids),
        ", ".join(f"{count} {kind.name.lower()}" for kind, count in counts.items()),
        time.monotonic() - started,
    )
    return Loaded(
        source,
        served,
        tree,
        int(opened.written_at * 1e9),
        chunk_store=opened.session.store,
        about={"snapshot": opened.snapshot_id},
    )


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


def check_local_containers(source: str, containers: Sequence[str], roots: LocalRoots) -> None:
    """Raise ``ReferenceFormatError`` naming the first authorized virtual chunk container
    whose local files ``roots`` refuse (on a shared mount, as for kerchunk targets)."""
    for prefix in containers:
        if roots.local_path(prefix) is None:
            continue
        problem = roots.problem(prefix)
        if problem is not None:
            raise ReferenceFormatError(source, None, f"virtual chunk container {prefix}: {problem}")
