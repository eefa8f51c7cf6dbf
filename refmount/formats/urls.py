"""Target URL resolution: protocols are per URL, relative paths follow the reference file."""

from __future__ import annotations

import posixpath
import re

_PROTOCOL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")


def protocol_of(url: str) -> str | None:
    """Return the URL's protocol (``s3``, ``https``, ``simplecache`` …) or None for a bare path.

    One-letter protocols are Windows drive letters, not protocols; ``data:`` URIs count.
    """
    if url.startswith("data:"):
        return "data"
    match = _PROTOCOL.match(url)
    if match is None:
        return None
    return match.group(1)


def directory_of(url: str) -> str:
    """Return the directory part of a URL or path (what relative URLs are resolved against)."""
    stripped = url.rstrip("/")
    head, _, _ = stripped.rpartition("/")
    if protocol_of(url) is not None and head.endswith(":/"):
        return stripped  # "s3://bucket" has no parent inside the store
    return head or ("/" if stripped.startswith("/") else ".")


def resolve(url: str, base: str, remote_protocol: str | None = None) -> str:
    """Return ``url`` made absolute.

    A URL with a protocol is kept as it is, except ``file://relative`` which, like a bare
    relative path, is resolved against ``base`` (the reference file's directory). A bare
    path gets ``remote_protocol`` when one is given (``bucket/key`` becomes ``s3://bucket/key``);
    otherwise it is a local path.
    """
    protocol = protocol_of(url)
    if protocol == "file":
        path = url[len("file://") :]
        if path.startswith("/"):
            return url
        return resolve(path, base)
    if protocol is not None:
        return url
    if remote_protocol is not None and remote_protocol not in ("file", "local"):
        return f"{remote_protocol}://{url}"
    if url.startswith("/"):
        return url
    if protocol_of(base) is not None:
        return f"{base.rstrip('/')}/{url}"
    return posixpath.normpath(posixpath.join(base, url))
