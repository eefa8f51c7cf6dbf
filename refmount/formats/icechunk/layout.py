"""Recognising an Icechunk repository by its layout, without the icechunk package (so that a
mount of one without it is refused by name, not taken for a Parquet reference directory),
and the limit on the size of the files Icechunk reads whole (``FileLimit``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from refmount.errors import too_large
from refmount.model import ReferenceSource

SNAPSHOTS = "snapshots"
"""The directory of a repository's snapshot files (every Icechunk version has it)..."""

REPOSITORY_FILE = "repo"
"""The repository file of Icechunk 2 (its config, branches and tags)."""

MANIFESTS = "manifests"
"""The directory of a repository's manifest files."""

REPOSITORY_MARKERS = frozenset({REPOSITORY_FILE, "refs", MANIFESTS})
"""...beside its repository file (``repo``, Icechunk 2), its branch and tag refs (``refs/``,
Icechunk 1) or its manifests (a repository that lost its ``repo`` file is still one: opening
it then says what is missing, where a Parquet reference set would say ``.zmetadata``)."""

PARQUET_METADATA = ".zmetadata"
"""The file of a Parquet reference directory: with it, ``snapshots`` and ``manifests`` are
arrays of the set, not a repository."""


def is_repository(source: ReferenceSource) -> bool:
    """Return True when ``source`` is a directory laid out as an Icechunk repository.

    Only the directory's own names are looked at (one listing); a store that cannot list
    directories (HTTP) never looks like a repository: ``--format icechunk`` says it is one.
    """
    if not source.is_directory():
        return False
    names = source.names()
    if names is None:
        return False
    found = set(names)
    return (
        SNAPSHOTS in found
        and PARQUET_METADATA not in found
        and not REPOSITORY_MARKERS.isdisjoint(found)
    )


DEFAULT_SHARE = 4
"""By default a file Icechunk reads whole may take this share of the default cap on a
reference file: Icechunk holds the file and what it decodes from it at once, and its
runtime's threads reserve address space of their own (under a 1 GiB address-space limit a
400 MB snapshot file aborts the process inside Icechunk, a 250 MB one is refused cleanly).
A ``--max-refs-size`` given applies as it is."""

ContainerOptions = Callable[[str], Mapping[str, Any]]
"""Returns the storage options (s3fs's names) of a virtual chunk container's URL prefix."""

SizeOf = Callable[[str], int | None]
"""Returns the size of a file below the repository (``snapshots/ID``); None: unknown."""


@dataclass(frozen=True, slots=True)
class FileLimit:
    """The largest a file of the repository may be (``--max-refs-size``), and how to ask its
    size: Icechunk reads the repository file, a snapshot and each manifest whole into
    memory, so one too large is refused before Icechunk reads it."""

    size_of: SizeOf
    max_size: int

    def check(self, url: str, path: str) -> None:
        """Raise ``ReferenceFormatError`` naming ``url/path`` when it is larger than allowed
        (a file whose size is unknown is left to Icechunk)."""
        size = self.size_of(path)
        if size is not None and size > self.max_size:
            raise too_large(f"{url.rstrip('/')}/{path}", self.max_size)
