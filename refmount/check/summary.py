"""What ``refmount check`` finds out about one reference set: its arrays, targets, byte counts
and problems (``Summary``), and the summary as JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from refmount.model import Inline, Range, Reference, Whole


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the set: the key at fault (None: the set as a whole) and why."""

    key: str | None
    problem: str

    def __str__(self) -> str:
        return self.problem if self.key is None else f"key {self.key!r}: {self.problem}"


@dataclass(frozen=True, slots=True)
class ArrayInfo:
    """One array of the set, from its ``.zarray`` or ``zarr.json``.

    ``grid`` is the number of chunks along each dimension; ``present`` how many chunk keys
    exist (None when not counted: ``--quick`` on a Parquet set).
    """

    path: str
    zarr_format: int
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    grid: tuple[int, ...]
    present: int | None

    @property
    def chunk_count(self) -> int:
        """Return how many chunk keys the array can have."""
        total = 1
        for extent in self.grid:
            total *= extent
        return total


@dataclass(slots=True)
class TargetInfo:
    """One target URL: how many references point into it and how many bytes they span.

    ``size`` is the target's own size, known only when ``--sizes`` asked for it.
    """

    url: str
    first_key: str
    ranges: int = 0
    whole: int = 0
    range_bytes: int = 0
    end: int = 0
    end_key: str = ""
    size: int | None = None

    @property
    def references(self) -> int:
        """Return how many references point into this target."""
        return self.ranges + self.whole

    @property
    def bytes(self) -> int | None:
        """Return the bytes referenced: ranges, plus whole-target references once sized."""
        if self.whole and self.size is None:
            return None
        return self.range_bytes + self.whole * (self.size or 0)


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """One virtual chunk container an Icechunk repository declares: its URL prefix, whether
    the mount may read it (``--authorize-container``), and how many chunks point into it."""

    prefix: str
    authorized: bool
    chunks: int


@dataclass(frozen=True, slots=True)
class RepositoryInfo:
    """What is particular to an Icechunk repository: the snapshot resolved (and what was
    asked for: ``branch main``), its containers, and its chunks by kind (inline, native,
    virtual)."""

    version: str
    snapshot: str
    containers: list[ContainerInfo]
    chunk_kinds: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        """Return the repository's part of ``refmount check --json``."""
        return {
            "version": self.version,
            "snapshot": self.snapshot,
            "containers": [dataclasses.asdict(container) for container in self.containers],
            "chunks": dict(self.chunk_kinds),
        }


UNREADABLE = "unreadable"
"""``Summary.format`` of a set that could not be read at all (missing, no permission...)."""


@dataclass(slots=True)
class Summary:
    """What ``refmount check`` found out about one reference set."""

    source: str
    format: str
    explicit_keys: int = 0
    chunk_keys: int | None = 0
    chunk_positions: int = 0
    arrays: list[ArrayInfo] = field(default_factory=list)
    targets: dict[str, TargetInfo] = field(default_factory=dict)
    inline: int = 0
    inline_bytes: int = 0
    ranges: int = 0
    range_bytes: int = 0
    whole: int = 0
    whole_bytes: int | None = None
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    malformed: bool = False
    served_as_stored: list[tuple[str, str, str]] | None = None
    """With ``--decode``: the arrays a decoded mount serves as stored (path, codec, reason)."""
    served_as_v3: list[tuple[str, str, str]] | None = None
    """With ``--zarr-format 2``: the v3 arrays the v2 view serves as stored (path, what stands
    in the way, reason)."""
    repository: RepositoryInfo | None = None
    """For an Icechunk repository that opened: its snapshot, containers and chunk kinds."""
    netcdf_left_out: list[tuple[str, str]] | None = None
    """With ``--netcdf``: the arrays the netCDF file leaves out (path, reason)."""
    netcdf_renamed: list[str] = field(default_factory=list)
    """With ``--netcdf``: the dimensions the netCDF file renames, one line each."""

    @property
    def ok(self) -> bool:
        """Return True when the set loaded and has no problems."""
        return not self.malformed and not self.problems

    @property
    def total_bytes(self) -> int:
        """Return the bytes referenced by ranges, inline values and sized whole targets."""
        return self.range_bytes + self.inline_bytes + (self.whole_bytes or 0)

    def add(self, key: str, reference: Reference) -> None:
        """Count one reference."""
        match reference:
            case Inline(data):
                self.inline += 1
                self.inline_bytes += len(data)
            case Range(url, offset, length):
                self.ranges += 1
                self.range_bytes += length
                target = self._target(url, key)
                target.ranges += 1
                target.range_bytes += length
                if offset + length > target.end:
                    target.end, target.end_key = offset + length, key
            case Whole(url):
                self.whole += 1
                self._target(url, key).whole += 1

    def problem(self, key: str | None, text: str) -> None:
        """Record a problem once (the same key and text may be reported by two checks)."""
        found = Problem(key, text)
        if found not in self.problems:
            self.problems.append(found)

    def _target(self, url: str, key: str) -> TargetInfo:
        target = self.targets.get(url)
        if target is None:
            target = self.targets[url] = TargetInfo(url, key)
        return target

    def to_json(self) -> dict[str, Any]:
        """Return the summary as JSON-ready values (``refmount check --json``)."""
        return {
            "source": self.source,
            "format": self.format,
            "ok": self.ok,
            "malformed": self.malformed,
            "explicit_keys": self.explicit_keys,
            "chunk_keys": self.chunk_keys,
            "chunk_positions": self.chunk_positions,
            "arrays": [
                {**dataclasses.asdict(array), "chunk_count": array.chunk_count}
                for array in self.arrays
            ],
            "targets": [
                {
                    "url": target.url,
                    "references": target.references,
                    "ranges": target.ranges,
                    "whole": target.whole,
                    "bytes": target.bytes,
                    "size": target.size,
                }
                for target in self.targets.values()
            ],
            "inline": {"count": self.inline, "bytes": self.inline_bytes},
            "ranges": {"count": self.ranges, "bytes": self.range_bytes},
            "whole": {"count": self.whole, "bytes": self.whole_bytes},
            "total_bytes": self.total_bytes,
            "problems": [{"key": p.key, "problem": p.problem} for p in self.problems],
            "warnings": list(self.warnings),
            **({} if self.repository is None else {"repository": self.repository.to_json()}),
            **(
                {}
                if self.served_as_stored is None
                else {
                    "served_as_stored": [
                        {"array": path, "codec": codec, "reason": reason}
                        for path, codec, reason in self.served_as_stored
                    ]
                }
            ),
            **(
                {}
                if self.served_as_v3 is None
                else {
                    "served_as_v3": [
                        {"array": path, "codec": codec, "reason": reason}
                        for path, codec, reason in self.served_as_v3
                    ]
                }
            ),
            **(
                {}
                if self.netcdf_left_out is None
                else {
                    "netcdf": {
                        "left_out": [
                            {"array": path, "reason": reason}
                            for path, reason in self.netcdf_left_out
                        ],
                        "renamed": list(self.netcdf_renamed),
                    }
                }
            ),
        }
