"""What is decided once per target URL: which kind of read it gets, which filesystem instance
serves it, and which host's request limit it counts against.

A route is worked out from the URL and the storage options alone (no I/O, no filesystem
made), so it can be computed in any thread; the store keeps the routes of the URLs read
lately instead of parsing each URL again at every read.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

from refmount.store.options import S3_PROTOCOLS, StorageOptions, is_http, is_plain_local
from refmount.urls import protocol_of


class Kind(Enum):
    """How a target's bytes are read."""

    LOCAL = "local"
    """A plain local file (no chain): through descriptors kept open, ``os``-level checks."""
    HTTP = "http"
    """Plain HTTP(S): a bounded stream through the HTTP filesystem's session."""
    S3 = "s3"
    """Plain S3: a bounded stream of ``get_object``."""
    OTHER = "other"
    """Anything else (chains, other protocols): fsspec's own reads."""


@dataclass(frozen=True, slots=True)
class Route:
    """How one target URL is read."""

    kind: Kind
    protocol: str | None
    """The URL's (first) protocol, None for a path."""
    filesystem_key: tuple[str, str | None]
    """The filesystem instance that serves it: protocol (or chain) and storage-option prefix."""
    host: str
    """The key of the per-host request limit: the last part's host, else its protocol."""


def route_of(url: str, options: StorageOptions) -> Route:
    """Return the route of ``url`` under ``options``."""
    protocol = protocol_of(url)
    chained = "::" in url
    if is_plain_local(url):
        kind = Kind.LOCAL
    elif is_http(url):
        kind = Kind.HTTP
    elif not chained and protocol in S3_PROTOCOLS:
        kind = Kind.S3
    else:
        kind = Kind.OTHER
    chain = url.rsplit("::", 1)[0] if chained else protocol or "file"
    host = urlsplit(url.rsplit("::", 1)[-1]).netloc or protocol or "local"
    return Route(kind, protocol, (chain, options.prefix_of(url)), host)
