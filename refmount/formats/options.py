"""Options that change how a reference set is read, shared by every format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from refmount.errors import OnInvalid
from refmount.ops.memory import default_max_refs_size

Progress = Callable[[int, int], None]
"""Told ``(done, total)`` keys now and then while a large reference file is read; ``total``
is an estimate until the last call when the file is read as a stream."""


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """How to interpret a reference set.

    ``target`` is the URL used by references whose URL is JSON ``null``; ``remote_protocol``
    is the protocol given to target URLs that have none (otherwise they are local paths);
    ``skip_invalid`` skips malformed keys with one warning each instead of refusing the set;
    ``record_cache`` bounds how many Parquet record files are kept in memory at once.
    ``on_invalid`` receives each problem that ``skip_invalid`` skips, instead of a logged
    warning; ``progress`` is called every ``PROGRESS_STEP`` keys of a JSON file's ``refs``.
    ``max_size`` caps a JSON reference file's size, raw and inflated (None: the default of
    ``ops.memory.default_max_refs_size``, taken when the file is read).
    """

    target: str | None = None
    remote_protocol: str | None = None
    skip_invalid: bool = False
    record_cache: int = 64
    on_invalid: OnInvalid | None = None
    progress: Progress | None = None
    max_size: int | None = None

    def size_cap(self) -> int:
        """Return the cap on a reference file's raw and inflated size, in bytes."""
        return default_max_refs_size() if self.max_size is None else self.max_size


PROGRESS_STEP = 100_000
"""How many keys a JSON loader reads between two calls of ``LoadOptions.progress``."""
