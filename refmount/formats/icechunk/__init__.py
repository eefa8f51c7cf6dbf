"""Icechunk repositories as reference sets: recognised by their layout (``layout``, without
the icechunk package), opened at one snapshot (``opening``), read into chunk tables
(``chunks``) and served as a ``ReferenceSet`` (``references``) by ``load``.

Only ``layout`` may be imported where the icechunk package is missing (Python 3.11): the
other modules import it, and ``load_repository`` refuses in one line without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from refmount.config import RepositoryVersion
from refmount.errors import ReferenceFormatError
from refmount.formats.icechunk.layout import (
    DEFAULT_SHARE,
    ContainerOptions,
    FileLimit,
    is_repository,
)
from refmount.model import ReferenceSource

if TYPE_CHECKING:
    from refmount.formats.icechunk.load import LoadedRepository

INSTALL_HINT = "pip install 'refmount[icechunk]'"
"""How to get the icechunk package (it needs Python 3.12 or later)."""


def is_repository_for(format_name: str, source: ReferenceSource) -> bool:
    """Return True when ``source`` is to be read as an Icechunk repository: ``--format
    icechunk`` says so, ``kerchunk`` says not, ``auto`` looks at its layout (a source that
    cannot be listed is no repository)."""
    if format_name != "auto":
        return format_name == "icechunk"
    try:
        return is_repository(source)
    except (OSError, ValueError):
        return False


def load_repository(
    url: str,
    version: RepositoryVersion,
    authorize: Sequence[str] = (),
    s3_options: Mapping[str, Any] | None = None,
    limit: FileLimit | None = None,
    container_options: ContainerOptions | None = None,
) -> LoadedRepository:
    """Load the snapshot ``version`` of the repository at ``url`` (``load.load_repository``;
    ``s3_options`` are the storage options of ``url``, in s3fs's names, ``limit`` the
    largest file it may read whole, ``container_options`` those of each container's prefix:
    ``opening``); raises
    ``ReferenceFormatError`` in one line when the icechunk package is missing."""
    try:
        from refmount.formats.icechunk.load import load_repository as load
    except ImportError as error:
        raise ReferenceFormatError(
            url,
            None,
            f"an Icechunk repository needs the icechunk package ({error}); "
            f"install it with: {INSTALL_HINT} (Python 3.12 or later)",
        ) from None
    return load(url, version, authorize, s3_options, limit, container_options)


__all__ = [
    "DEFAULT_SHARE",
    "INSTALL_HINT",
    "ContainerOptions",
    "FileLimit",
    "is_repository",
    "is_repository_for",
    "load_repository",
]
