"""Key paths and node names: which keys FUSE can show (the names are packed by ``packed``)."""

from __future__ import annotations

NAME_MAX = 255
"""Longest name, in bytes, that Linux filesystems accept."""


def key_problem(key: str) -> str | None:
    """Return why ``key`` cannot be a path in a FUSE tree, or None when it can."""
    if key == "":
        return "empty key"
    if key.startswith("/"):
        return "key starts with '/'"
    if key.endswith("/"):
        return "key ends with '/'"
    if "\x00" in key:
        return "key contains a NUL character"
    for part in key.split("/"):
        if part == "":
            return "key contains an empty path component ('//')"
        if part in (".", ".."):
            return f"key contains a {part!r} path component"
        try:
            encoded = part.encode("utf-8")
        except UnicodeEncodeError:
            return "key is not valid UTF-8"
        if len(encoded) > NAME_MAX:
            return f"path component is {len(encoded)} bytes long (the limit is {NAME_MAX})"
    return None
