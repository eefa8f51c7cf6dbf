"""The pins file: the version of every target of a set, as ``refmount pin`` records it and
``--pins`` reads it.

One JSON object: ``{"refmount_pins": 1, "refs": URL, "targets": {URL: VERSION, ...}}``, each
``VERSION`` an object with ``etag`` and ``modified`` (strings or null) and ``size`` (an
integer or null), what a mount would pin at the target's first use. Targets are written in
sorted order and nothing else varies, so recording an unchanged set again writes the same
bytes (a pins file diffs well and can be checked in).
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from typing import Any

from refmount.errors import ReferenceFormatError
from refmount.store.pins import Pin

FORMAT_VERSION = 1
"""The value of ``refmount_pins``: the only layout written and read."""

MAX_PINS_FILE = 64 * 1024 * 1024
"""The largest pins file read (some 400 000 targets): anything larger is refused."""


def dumps_pins(refs: str, pins: Mapping[str, Pin]) -> str:
    """Return the pins file recording ``pins`` for the set at ``refs``."""
    targets = {
        url: {"etag": pin.etag, "modified": pin.modified, "size": pin.size}
        for url, pin in sorted(pins.items())
    }
    document = {"refmount_pins": FORMAT_VERSION, "refs": refs, "targets": targets}
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def read_pins(path: str, cap: int = MAX_PINS_FILE) -> dict[str, Pin]:
    """Read the pins file at ``path``: each target's recorded version, by URL.

    Raises ``ReferenceFormatError`` naming the file (and the target at fault) when it cannot
    be read, is larger than ``cap`` bytes or is not a pins file. Each pin comes back never
    checked (``checked`` is minus infinity): a mount compares it with the target at first use.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(descriptor, "rb") as stream:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise ReferenceFormatError(path, None, "a pins file must be a regular file")
            data = stream.read(cap + 1)
    except OSError as error:
        raise ReferenceFormatError(path, None, f"cannot read: {error.strerror}") from error
    if len(data) > cap:
        raise ReferenceFormatError(path, None, f"a pins file is at most {cap:,} bytes")
    return loads_pins(path, data)


def loads_pins(path: str, data: bytes) -> dict[str, Pin]:
    """Return the pins of a pins file's bytes (``path`` names it in errors)."""
    try:
        document = json.loads(data)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        raise ReferenceFormatError(path, None, f"not valid JSON: {error}") from error
    return parse_pins(path, document)


def parse_pins(path: str, document: object) -> dict[str, Pin]:
    """Return the pins of a parsed pins file (``path`` names it in errors)."""
    if not isinstance(document, dict) or document.get("refmount_pins") != FORMAT_VERSION:
        raise ReferenceFormatError(
            path, None, f'not a pins file: an object with "refmount_pins": {FORMAT_VERSION}'
        )
    targets = document.get("targets")
    if not isinstance(targets, dict):
        raise ReferenceFormatError(path, None, '"targets" must be an object')
    return {str(url): _pin(path, str(url), version) for url, version in targets.items()}


def _pin(path: str, url: str, version: Any) -> Pin:
    if not isinstance(version, dict):
        raise ReferenceFormatError(path, None, f"target {url}: its version must be an object")
    etag, modified, size = version.get("etag"), version.get("modified"), version.get("size")
    for name, value in (("etag", etag), ("modified", modified)):
        if value is not None and not isinstance(value, str):
            raise ReferenceFormatError(path, None, f"target {url}: {name} must be a string or null")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise ReferenceFormatError(
            path, None, f"target {url}: size must be a non-negative integer or null"
        )
    return Pin(etag, modified, size, -math.inf, f"{path} was recorded")
