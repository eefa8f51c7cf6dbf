"""Options that change how a reference set is read, shared by every format."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """How to interpret a reference set.

    ``target`` is the URL used by references whose URL is JSON ``null``; ``remote_protocol``
    is the protocol given to target URLs that have none (otherwise they are local paths);
    ``skip_invalid`` skips malformed keys with one warning each instead of refusing the set;
    ``record_cache`` bounds how many Parquet record files are kept in memory at once.
    """

    target: str | None = None
    remote_protocol: str | None = None
    skip_invalid: bool = False
    record_cache: int = 64
