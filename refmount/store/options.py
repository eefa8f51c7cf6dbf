"""Which options a target URL gets, and what kind of URL it is: fsspec storage options
(common, per protocol, per URL prefix, S3 shortcuts) and the protocol families."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fsspec

from refmount.urls import protocol_of

S3_PROTOCOLS = ("s3", "s3a")


HTTP_PROTOCOLS = ("http", "https")

LOCAL_PROTOCOLS = frozenset({"file", "local"})
"""Protocols that read local files (as do URLs without a protocol)."""

UNCHECKABLE_PROTOCOLS = frozenset({"reference", "dir", "git"})
"""Protocols that read local files the URL does not name (a nested reference set's targets,
a directory prefix from the options, a local repository); refused when the mount is shared."""


class StorageOptions:
    """fsspec storage options: common ones, per protocol, per URL prefix, and S3 extras.

    ``{"s3": {...}, "https": {...}, "https://data.example.org": {...}}`` (every key a known
    protocol or a URL prefix, every value an object) is structured; anything else is a flat
    dict that applies to every protocol. A URL takes the common options, then its protocol's,
    then those of the longest prefix it starts with (a prefix matches at a ``/``, ``?`` or
    ``#`` boundary, so ``https://host`` never matches ``https://host.evil`` or
    ``https://host:8443``). ``s3`` options (from ``-o s3_*`` shortcuts) are added for ``s3://``
    and ``s3a://`` on top of the protocol-level options.
    """

    def __init__(
        self, options: Mapping[str, Any] | None = None, s3: Mapping[str, Any] | None = None
    ) -> None:
        options = dict(options or {})
        s3 = dict(s3 or {})
        known = set(fsspec.available_protocols())
        self._prefixes: dict[str, dict[str, Any]] = {}
        if options and all(
            (k in known or _is_prefix(k)) and isinstance(v, dict) for k, v in options.items()
        ):
            self._common: dict[str, Any] = {}
            self._per_protocol = {k: dict(v) for k, v in options.items() if not _is_prefix(k)}
            self._prefixes = {k: dict(v) for k, v in options.items() if _is_prefix(k)}
        else:
            self._common, self._per_protocol = options, {}
        for protocol in S3_PROTOCOLS if s3 else ():
            merged = self._per_protocol.setdefault(protocol, {})
            client = {**merged.get("client_kwargs", {}), **s3.get("client_kwargs", {})}
            merged.update({k: v for k, v in s3.items() if k != "client_kwargs"})
            if client:
                merged["client_kwargs"] = client

    def for_protocol(self, protocol: str) -> dict[str, Any]:
        """Return the options for one protocol (without any URL prefix's)."""
        merged = dict(self._common)
        merged.update(self._per_protocol.get(protocol, {}))
        return merged

    def prefix_of(self, url: str) -> str | None:
        """Return the longest option key that is a prefix of ``url`` (its last part if
        chained), or None when only protocol-level options apply."""
        last = url.rsplit("::", 1)[-1]
        matches = [p for p in self._prefixes if _starts_with_prefix(last, p)]
        return max(matches, key=len) if matches else None

    def for_target(self, url: str) -> dict[str, Any]:
        """Return the options for a URL that is not chained: protocol, then prefix options."""
        merged = self.for_protocol(protocol_of(url) or "file")
        prefix = self.prefix_of(url)
        if prefix is not None:
            merged.update(self._prefixes[prefix])
        return merged

    def for_url(self, url: str) -> dict[str, Any]:
        """Return keyword arguments for ``fsspec.core.url_to_fs(url, ...)``.

        A chained URL (``simplecache::s3://…``) takes options keyed by each protocol of the
        chain, its last part's with prefix options too; a plain URL takes its options directly.
        """
        if "::" not in url:
            return self.for_target(url)
        *wrappers, last = url.split("::")  # "simplecache::s3://b/k": wrappers are bare names
        chain: dict[str, Any] = {}
        for part in wrappers:
            name = protocol_of(part) or part
            chain[name] = self.for_protocol(name)
        chain[protocol_of(last) or "file"] = self.for_target(last)
        return chain


def is_known_protocol(name: str) -> bool:
    """Return True if fsspec knows the protocol ``name`` (its package may still be missing)."""
    return name in fsspec.available_protocols()


def _is_prefix(key: str) -> bool:
    return "://" in key and bool(protocol_of(key))


def _starts_with_prefix(url: str, prefix: str) -> bool:
    if not url.startswith(prefix):
        return False
    if len(url) == len(prefix) or prefix.endswith("/"):
        return True
    return url[len(prefix)] in "/?#"


def is_plain_local(url: str) -> bool:
    """Return True for a local URL that is not chained (read with ``os``-level checks)."""
    return "::" not in url and (protocol_of(url) or "file").lower() in LOCAL_PROTOCOLS


def is_http(url: str) -> bool:
    """Return True for a plain (not chained) HTTP(S) URL."""
    return "::" not in url and protocol_of(url) in HTTP_PROTOCOLS
