"""Reading the chunks of a mounted Icechunk snapshot (``icechunk://SNAPSHOT/KEY`` URLs) through
the repository's read-only session: ``store.get`` with the byte range, on fsspec's loop like
every other coroutine of the store (``runner``), so Icechunk checks each virtual chunk's
checksum (ETag or modification time) and reads native chunks from the repository's storage.

Ranges reach here already clamped to the chunk's length (the reader asks only inside the
``Range`` the manifests sized); an empty one is answered without asking. Icechunk's errors
leave as ``TargetError``: an unauthorized virtual chunk container as ``TargetAccessError``
naming ``--authorize-container``, a virtual chunk whose object changed since it was
committed as a failure that is never retried.
"""

from __future__ import annotations

from typing import Any, Protocol

from zarr.abc.store import RangeByteRequest
from zarr.core.buffer import default_buffer_prototype

from refmount.errors import TargetAccessError, TargetError, TargetReadError
from refmount.store.routes import Kind, Route
from refmount.store.runner import Runner
from refmount.urls import icechunk_chunk_key

ROUTE = Route(Kind.OTHER, "icechunk", ("icechunk", None), "icechunk")
"""The route of every chunk: one pool of request slots for the repository's reads."""

REFUSED = frozenset({"unauthorized-virtual-chunk-container", "no-container-for-virtual-chunk"})
"""Icechunk's error kinds for a virtual chunk this mount may not read."""

CHANGED = "virtual-chunk-modified"
"""Icechunk's error kind for a virtual chunk whose object is not the one committed."""

TRANSIENT = frozenset({"throttled", "io", "object-store", "semaphore-acquire"})
"""Icechunk's error kinds worth trying again (after its own retries)."""


class ChunkStore(Protocol):
    """What the engine needs of Icechunk's ``IcechunkStore`` (read-only)."""

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        """Return the value of ``key`` (its bytes ``byte_range``), or None if absent."""
        ...


class IcechunkEngine:
    """Reads byte ranges of chunks through one read-only Icechunk session's store."""

    def __init__(self, store: ChunkStore, runner: Runner) -> None:
        self._store = store
        self._runner = runner
        self._prototype = default_buffer_prototype()

    @staticmethod
    def serves(url: str) -> bool:
        """Return True for the URL of a chunk of a mounted snapshot."""
        return icechunk_chunk_key(url) is not None

    async def read(self, url: str, start: int, end: int) -> bytes | memoryview:
        """Return bytes ``[start, end)`` of the chunk ``url`` names."""
        key = icechunk_chunk_key(url)
        if key is None:
            raise TargetReadError(url, "not the URL of an Icechunk chunk")
        if end <= start:
            return b""

        async def get() -> bytes | memoryview:
            try:
                found = await self._store.get(key, self._prototype, RangeByteRequest(start, end))
            except Exception as error:  # Icechunk's errors, by their kind
                raise icechunk_error(url, error) from error
            if found is None:
                raise TargetReadError(url, "the snapshot has no such chunk")
            return memoryview(found.as_numpy_array())

        return await self._runner.on_loop(url, ROUTE, get)


def icechunk_error(url: str, error: BaseException) -> TargetError:
    """Return the ``TargetError`` that stands for Icechunk's ``error`` reading ``url``."""
    kind = str(getattr(error, "kind", "") or "")
    lines = str(error).strip().splitlines()
    problem = lines[0] if lines else type(error).__name__
    if kind in REFUSED:
        return TargetAccessError(
            url,
            f"{problem} (the mount may read a virtual chunk container only when "
            "--authorize-container names its prefix, or all)",
        )
    if kind == CHANGED:
        return TargetReadError(url, f"{problem} since it was committed", retryable=False)
    return TargetReadError(url, problem, retryable=kind in TRANSIENT)
