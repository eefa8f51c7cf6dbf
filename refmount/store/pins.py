"""A target's version, pinned at its first use: ETag, else modification time and size."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class Pin:
    """A target's version at its first use: ETag, else modification time and size."""

    etag: str | None
    modified: str | None
    size: int | None
    checked: float
    """When the target last confirmed this version (``time.monotonic``)."""
    origin: str = "its first use"
    """Where the version comes from, for messages: the first use, or a pins file."""

    @classmethod
    def from_info(cls, info: Mapping[str, Any], now: float) -> Pin:
        """Return the version an fsspec ``info`` dict describes."""
        etag = next((info[k] for k in ("ETag", "etag", "Etag") if info.get(k)), None)
        modified: object = next(
            (
                info[k]
                for k in ("Last-Modified", "LastModified", "last_modified", "mtime", "updated")
                if info.get(k) is not None
            ),
            None,
        )
        size = info.get("size")
        return cls(
            None if etag is None else str(etag),
            None if modified is None else str(modified),
            size if isinstance(size, int) else None,
            now,
        )

    @classmethod
    def from_stat(cls, status: os.stat_result, now: float) -> Pin:
        """Return the version of a local file."""
        return cls(None, f"{status.st_mtime_ns}ns", status.st_size, now)

    @property
    def known(self) -> bool:
        """Return True when there is anything to compare later reads with."""
        return self.etag is not None or self.modified is not None

    def same(self, other: Pin) -> bool:
        """Return True when ``other`` is the same version."""
        if self.etag is not None and other.etag is not None:
            return _opaque(self.etag) == _opaque(other.etag)
        return (self.modified, self.size) == (other.modified, other.size)

    def identity(self) -> str | None:
        """Return the version as the disk cache's keys name it: the ETag's opaque value if
        there is one, else mtime and size (None for a version not known)."""
        if self.etag is not None:
            return f"etag {_opaque(self.etag)}"
        if self.modified is not None:
            return f"modified {self.modified} size {self.size}"
        return None

    def describe(self) -> str:
        """Return the version as a log line shows it."""
        if self.etag is not None:
            return f"ETag {self.etag}"
        return f"mtime {self.modified} size {self.size}"

    def http_condition(self) -> dict[str, str]:
        """Return the request header that makes an HTTP server refuse another version."""
        if self.etag is not None and not self.etag.startswith("W/"):
            return {"If-Match": self.etag}  # If-Match compares strongly: weak ETags never match
        if self.modified is not None and self.modified[:1].isalpha():  # an HTTP date
            return {"If-Unmodified-Since": self.modified}
        return {}


def _opaque(etag: str) -> str:
    """Return an ETag's opaque value: engines differ in keeping its quotes and ``W/``."""
    return etag.removeprefix("W/").strip('"')
