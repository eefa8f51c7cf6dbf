"""The local-root rule of shared mounts: which local files a target URL may read."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import cast

from fsspec.implementations.local import LocalFileSystem

from refmount.errors import TargetAccessError
from refmount.store.local_files import real_path
from refmount.store.options import LOCAL_PROTOCOLS, UNCHECKABLE_PROTOCOLS
from refmount.urls import protocol_of


class LocalRoots:
    """The directories local targets must lie in when users other than the mounter can read.

    A target is local when it has no protocol, or ``file://``/``local://``, or is a chain
    whose last part is one of those; its path is taken exactly as fsspec's local filesystem
    takes it, then made real (``os.path.realpath``: symlinks and ``..`` resolved). ``data:``
    URIs and remote protocols are not local. Chains through ``reference``, ``dir`` or ``git``
    are refused: the files they read do not appear in the URL.
    """

    def __init__(self, roots: Iterable[str], forbidden: Iterable[str] = ()) -> None:
        self._roots = tuple(os.path.realpath(root) for root in roots)
        self._forbidden = tuple(os.path.realpath(path) for path in forbidden)

    @property
    def roots(self) -> tuple[str, ...]:
        """Return the allowed directories, resolved."""
        return self._roots

    def local_path(self, url: str) -> str | None:
        """Return the path, not yet made real, that ``url`` reads locally, or None."""
        last = url.rsplit("::", 1)[-1]
        protocol = protocol_of(last)
        if protocol is not None and protocol.lower() not in LOCAL_PROTOCOLS:
            return None
        return cast(str, LocalFileSystem._strip_protocol(last))

    def problem(self, url: str) -> str | None:
        """Return why ``url`` may not be read, or None when it may."""
        return self._examine(url)[0]

    def _examine(self, url: str) -> tuple[str | None, str | None]:
        """Return why ``url`` may not be read (None: it may) and its real local path (None
        when it is not a local file)."""
        *wrappers, last = url.split("::")
        for protocol in [protocol_of(part) or part for part in wrappers] + [protocol_of(last)]:
            if protocol is not None and protocol.lower() in UNCHECKABLE_PROTOCOLS:
                return (
                    f"protocol {protocol!r} may read any local file and is not allowed on a "
                    "mount other users can read"
                ), None
        path = self.local_path(url)
        if path is None:
            return None, None
        try:  # never looks inside the mount itself (see real_path)
            real = real_path(path, self._forbidden)
        except OSError as error:
            return f"the local file {path}: {error.strerror}", None
        if any(_inside(real, root) for root in self._roots):
            return None, real
        roots = ", ".join(self._roots) if self._roots else "none given"
        return (
            f"the local file {real} is outside the local roots ({roots}); other users can "
            "read this mount, so local targets must lie under --local-root DIR"
        ), real

    def resolve(self, url: str) -> str:
        """Return the real path of a local ``url``; raise ``TargetAccessError`` if refused."""
        problem, real = self._examine(url)
        if problem is not None:
            raise TargetAccessError(url, problem)
        return real if real is not None else url


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
