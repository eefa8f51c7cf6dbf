"""Target URL resolution: protocols are per URL, relative paths follow the reference file."""

from __future__ import annotations

import posixpath
import re

_PROTOCOL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)(?:://|::)")


def protocol_of(url: str) -> str | None:
    """Return the URL's protocol (``s3``, ``https``, ``simplecache`` …) or None for a bare path.

    For a chained URL (``simplecache::s3://b/k``) this is the outermost protocol. One-letter
    protocols are Windows drive letters, not protocols; ``data:`` URIs count.
    """
    if url.startswith("data:"):
        return "data"
    match = _PROTOCOL.match(url)
    if match is None:
        return None
    return match.group(1)


def _split(url: str) -> tuple[str, str]:
    """Split ``url`` into ``("proto://", path)``; the prefix is empty for a bare path."""
    if protocol_of(url) is None or "://" not in url:
        return "", url
    head, _, path = url.partition("://")
    return head + "://", path


def directory_of(url: str) -> str:
    """Return the directory part of a URL or path (what relative URLs are resolved against).

    A query string (``?sig=…``) is not part of the path.
    """
    prefix, path = _split(url)
    if prefix.startswith(("http://", "https://")):
        path = path.split("?", 1)[0].split("#", 1)[0]
    stripped = path.rstrip("/")
    head, slash, _ = stripped.rpartition("/")
    if prefix:
        return prefix + (head if slash else stripped)  # "s3://bucket" has no parent
    return head or ("/" if stripped.startswith("/") else ".")


def resolve(url: str, base: str, remote_protocol: str | None = None) -> str:
    """Return ``url`` made absolute.

    A URL with a protocol is kept as it is, except ``file://relative`` which, like a bare
    relative path, is resolved against ``base`` (the reference file's directory) when that is
    local. A bare path gets ``remote_protocol`` when one is given (``bucket/key`` becomes
    ``s3://bucket/key``); otherwise it is a local path. ``.`` and ``..`` are folded.
    """
    protocol = protocol_of(url)
    if protocol == "file" and "::" not in url:
        path = url[len("file://") :]
        if path.startswith("/") or protocol_of(base) is not None:
            return url
        return resolve(path, base)
    if protocol is not None:
        return url
    if remote_protocol is not None and remote_protocol not in ("file", "local"):
        return f"{remote_protocol}://{url.lstrip('/')}"
    if url.startswith("/"):
        return posixpath.normpath(url)
    prefix, base_path = _split(base)
    if prefix:
        joined = posixpath.normpath(posixpath.join("/" + base_path, url)).lstrip("/")
        return prefix + joined
    return posixpath.normpath(posixpath.join(base, url))


ICECHUNK_CHUNK_PREFIX = "icechunk://"
"""The URLs of chunks a mounted Icechunk repository holds (native or virtual): the store reads
them through the repository's own session, which checks each virtual chunk's checksum."""


def icechunk_chunk_url(snapshot: str, key: str) -> str:
    """Return the URL of chunk ``key`` (``temp/c/0/1``) of snapshot ``snapshot``."""
    return f"{ICECHUNK_CHUNK_PREFIX}{snapshot}/{key}"


def icechunk_chunk_key(url: str) -> str | None:
    """Return the chunk key of an ``icechunk_chunk_url``, or None for any other URL."""
    if not url.startswith(ICECHUNK_CHUNK_PREFIX):
        return None
    _, slash, key = url[len(ICECHUNK_CHUNK_PREFIX) :].partition("/")
    return key if slash and key else None
