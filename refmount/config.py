"""Every mount option as one frozen dataclass, plus parsing of sizes and durations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DAY = 24 * 3600.0

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": KIB, "m": MIB, "g": GIB, "t": 1024 * GIB}

MAX_SIZE = 2**63 - 1
"""The largest size accepted anywhere (a signed 64-bit count of bytes, as the kernel's)."""

MAX_DURATION = 100 * 365 * 24 * 3600.0
"""The longest duration accepted: finite, and far beyond any useful timeout."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_size(text: str) -> int:
    """Parse a byte count such as ``4096``, ``512M``, ``1.5GiB`` (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (examples: 4096, 64M, 1G)")
    number, unit, _ = match.groups()
    size = float(number) * _UNITS[unit.lower()]
    if not size <= MAX_SIZE:  # also infinity, from hundreds of digits
        raise ValueError(f"not a size: {text!r} is too large (at most 2**63 - 1 bytes)")
    return int(size)


def parse_duration(text: str) -> float:
    """Parse a duration in seconds such as ``30``, ``2.5s``, ``500ms``, ``5m``."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (examples: 30, 2.5s, 500ms)")
    number, unit = match.groups()
    seconds = float(number) * _SECONDS[(unit or "s").lower()]
    if not seconds <= MAX_DURATION:  # also infinity, from hundreds of digits
        raise ValueError(f"not a duration: {text!r} is too long (at most 100 years)")
    return seconds


@dataclass(frozen=True, slots=True)
class ReadConfig:
    """How reads are served: the memory budget, the size up to which a reference is fetched
    whole on its first read, and how far ahead the read path fetches.

    Neighbour prefetch (``neighbour_bytes`` 0: off) fetches the next references of a
    directory that lie in the same object, at most ``neighbour_gap`` bytes apart, together in
    one run of up to ``neighbour_bytes`` and ``neighbour_count`` references, sent as parallel
    range requests of up to ``neighbour_part_bytes`` each. While the reader stays inside what
    was fetched ahead, each further run doubles those three, up to ``neighbour_growth`` times
    their first values (fewer, larger requests: each one costs S3 clients much CPU); a run
    with nothing ahead of the reader starts from the first values again. Block
    prefetch (``prefetch_blocks`` 0: off) fetches up to that many blocks ahead of a
    sequential read of a large reference. When reads of an object still wait for data being
    fetched ahead (a slow server: 20 ms per request is common for object stores), its
    window may grow twice as far again, up to ``late_growth`` times those limits.
    """

    cache_size: int = 512 * MIB
    whole_fetch_limit: int = 16 * MIB
    block_size: int = 4 * MIB
    neighbour_gap: int = 64 * KIB
    neighbour_bytes: int = 8 * MIB
    neighbour_count: int = 64
    neighbour_part_bytes: int = 2 * MIB
    neighbour_growth: int = 4
    prefetch_blocks: int = 8
    late_growth: int = 4


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """How remote requests are bounded and retried.

    Each attempt gets ``timeout`` seconds. A retryable failure (connection error, timeout,
    5xx, 408, 429, short body) is tried again up to ``retries`` more times, after a delay drawn
    uniformly from ``[0, min(backoff_max, backoff_initial * 2**attempt)]`` ("full jitter").
    """

    timeout: float = 30.0
    retries: int = 4
    backoff_initial: float = 0.05
    backoff_max: float = 2.0
    connections_per_host: int = 32

    def backoff_limit(self, attempt: int) -> float:
        """Return the longest delay before retry number ``attempt + 1``."""
        return min(self.backoff_max, self.backoff_initial * float(2**attempt))

    @property
    def worst_case(self) -> float:
        """Return the longest a request can take, all attempts and delays included."""
        delays = sum((self.backoff_limit(a) for a in range(self.retries)), 0.0)
        return self.timeout * (self.retries + 1) + delays


def parse_umask(text: str) -> int:
    """Parse an octal permission mask such as ``022`` or ``0o077``."""
    digits = text.strip().lower().removeprefix("0o")
    if not digits or any(c not in "01234567" for c in digits) or int(digits, 8) > 0o777:
        raise ValueError(f"not a umask: {text!r} (an octal number such as 022 or 077)")
    return int(digits, 8)


SHARING_FUSE_OPTIONS = frozenset({"allow_other", "allow_root"})
"""FUSE options that let users other than the one who mounted read the tree."""


STDIN_REFS = "-"
"""REFS that means: read one JSON reference document from standard input."""

FORMATS = ("auto", "kerchunk", "icechunk")
"""``--format``: ``auto`` recognises an Icechunk repository by its layout and takes anything
else for a kerchunk reference set; the other two force one or the other."""

REPOSITORY_ONLY = "--branch, --tag, --snapshot and --authorize-container"
"""The options that only an Icechunk repository takes."""

REPOSITORY_ALL_CONTAINERS = "all"
"""``--authorize-container all``: every virtual chunk container the repository declares."""

FETCHERS = ("auto", "fsspec")
"""``--fetcher``: ``auto`` reads S3, HTTP(S), GCS and Azure through obstore where the URL's
options map onto it and everything else through fsspec; ``fsspec`` reads everything through
fsspec."""


@dataclass(frozen=True, slots=True)
class RepositoryVersion:
    """Which snapshot of an Icechunk repository a mount serves: the tip of ``branch``, the
    snapshot ``tag`` names, or ``snapshot`` itself; at most one is given (none: ``main``)."""

    branch: str | None = None
    tag: str | None = None
    snapshot: str | None = None

    def __post_init__(self) -> None:
        given = [name for name in ("branch", "tag", "snapshot") if getattr(self, name)]
        if len(given) > 1:
            flags = " and ".join(f"--{name}" for name in given)
            raise ValueError(f"give at most one of --branch, --tag and --snapshot, not {flags}")

    @property
    def given(self) -> bool:
        """Return True when a branch, tag or snapshot was asked for."""
        return bool(self.branch or self.tag or self.snapshot)

    def describe(self) -> str:
        """Return what was asked for, as a user would say it (``branch main``)."""
        if self.tag:
            return f"tag {self.tag}"
        if self.snapshot:
            return f"snapshot {self.snapshot}"
        return f"branch {self.branch or 'main'}"


@dataclass(frozen=True, slots=True)
class MountConfig:
    """Everything the daemon needs to mount one reference set.

    In the code a *target* is a data URL a reference points at: ``target`` is the default
    one (``--target``), and ``refs_options`` are the storage options of the reference file
    itself (``--target-options`` on the command line: fsspec's name for them).

    ``local_roots`` are the directories local targets must lie in when the mount is
    ``shared``; ``uid``, ``gid`` and ``umask`` (None: the mounting user, no mask) shape every
    node's attributes; ``pin_versions`` pins each target's ETag or mtime at first use;
    ``xattrs`` serves the ``user.refmount.*`` extended attributes; ``nonempty`` allows a
    mountpoint that has entries (the mount hides them); ``decode`` serves arrays decoded
    (``refmount.decode``); ``fetcher`` is one of ``FETCHERS``.
    """

    refs: str
    mountpoint: Path
    foreground: bool = False
    fuse_options: tuple[str, ...] = ()
    remote_protocol: str | None = None
    remote_options: Mapping[str, Any] = field(default_factory=dict)
    refs_options: Mapping[str, Any] = field(default_factory=dict)
    s3_options: Mapping[str, Any] = field(default_factory=dict)
    target: str | None = None
    skip_invalid: bool = False
    log_level: str = "info"
    read: ReadConfig = field(default_factory=ReadConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)
    attr_timeout: float = DAY
    local_roots: tuple[str, ...] = ()
    uid: int | None = None
    gid: int | None = None
    umask: int | None = None
    pin_versions: bool = True
    pins: str | None = None
    """The pins file (``--pins``) whose recorded versions are pinned instead of first use's."""
    cache_dir: str | None = None
    """The disk cache's directory (``--cache-dir``), or None for no disk cache."""
    cache_dir_size: int | None = None
    """The most the disk cache may hold (None: ``store.disk_cache.default_size``)."""
    xattrs: bool = False
    nonempty: bool = False
    max_refs_size: int | None = None
    """The cap on the reference file's raw and inflated size (None: the default of
    ``ops.memory.default_max_refs_size``)."""
    decode: bool = False
    base: str | None = None
    """With ``refs`` ``-`` (a JSON document on standard input, which has no directory): the
    directory or URL that relative target paths are resolved against; None refuses them."""
    fetcher: str = "auto"
    format: str = "auto"
    """One of ``FORMATS``: what REFS is."""
    version: RepositoryVersion = field(default_factory=lambda: RepositoryVersion())
    """Which snapshot of an Icechunk repository to mount."""
    authorize_containers: tuple[str, ...] = ()
    """The URL prefixes of the repository's virtual chunk containers that may be read
    (``REPOSITORY_ALL_CONTAINERS``: every one it declares)."""
    zarr_format: int | None = None
    """2: serve zarr v3 nodes as zarr v2 (``refmount.zarr2``); None or 3: as stored."""
    netcdf: str | None = None
    """The name of the root's netCDF-4 file of the whole set (``--netcdf``); None: none."""
    netcdf_eager: bool = False
    """Lay the netCDF file out at mount, not at the first question about it."""

    @property
    def shared(self) -> bool:
        """Return True when users other than the one who mounted may read the mount."""
        return any(option in SHARING_FUSE_OPTIONS for option in self.fuse_options)
