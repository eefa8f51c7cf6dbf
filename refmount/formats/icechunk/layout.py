"""Recognising an Icechunk repository by its layout, without the icechunk package (so that a
mount of one without it is refused by name, not taken for a Parquet reference directory)."""

from __future__ import annotations

from refmount.model import ReferenceSource

SNAPSHOTS = "snapshots"
"""The directory of a repository's snapshot files (every Icechunk version has it)..."""

REPOSITORY_MARKERS = frozenset({"repo", "refs"})
"""...beside its repository file (``repo``, Icechunk 2) or its branch and tag refs (``refs/``,
Icechunk 1)."""


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
    return SNAPSHOTS in found and not REPOSITORY_MARKERS.isdisjoint(found)
