"""The raw readers: byte ranges straight from the target (``os.pread``, concurrent ranged GETs
with aiohttp or s3fs), the physical limit the mounts are compared with."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import fsspec


class RawReader:
    """Reads byte ranges of the target straight from it, as fast as it can."""

    concurrency = 16

    def read_ranges(self, which: str, ranges: Sequence[tuple[int, int]]) -> int:
        """Read ``ranges`` of target file ``which`` ("big" or "many"); return the bytes read."""
        raise NotImplementedError

    def first_byte(self, which: str, offset: int) -> float:
        """Seconds to the first byte at ``offset``."""
        started = time.perf_counter()
        self.read_ranges(which, [(offset, 1)])
        return time.perf_counter() - started

    def close(self) -> None:
        """Release what the reader holds."""


class LocalRaw(RawReader):
    """``os.pread`` from the local files, one thread."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.fds = {which: os.open(path, os.O_RDONLY) for which, path in files.items()}

    def read_ranges(self, which: str, ranges: Sequence[tuple[int, int]]) -> int:
        fd = self.fds[which]
        return sum(len(os.pread(fd, size, offset)) for offset, size in ranges)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


class HttpRaw(RawReader):
    """Concurrent ranged GETs with aiohttp on one event loop in a thread."""

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def session() -> aiohttp.ClientSession:
            connector = aiohttp.TCPConnector(limit=self.concurrency)
            return aiohttp.ClientSession(connector=connector)

        self.session = asyncio.run_coroutine_threadsafe(session(), self.loop).result()

    async def _get(self, url: str, offset: int, size: int, gate: asyncio.Semaphore) -> int:
        async with gate:
            headers = {"Range": f"bytes={offset}-{offset + size - 1}"}
            async with self.session.get(url, headers=headers) as response:
                response.raise_for_status()
                return len(await response.read())

    async def _all(self, url: str, ranges: Sequence[tuple[int, int]]) -> int:
        gate = asyncio.Semaphore(self.concurrency)
        done = await asyncio.gather(*(self._get(url, o, s, gate) for o, s in ranges))
        return sum(done)

    def read_ranges(self, which: str, ranges: Sequence[tuple[int, int]]) -> int:
        return asyncio.run_coroutine_threadsafe(
            self._all(self.urls[which], ranges), self.loop
        ).result()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.session.close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


class S3Raw(RawReader):
    """Concurrent ranged GETs through s3fs ``cat_ranges``."""

    def __init__(self, urls: dict[str, str], options: dict[str, Any]) -> None:
        self.urls = urls
        self.fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)

    def read_ranges(self, which: str, ranges: Sequence[tuple[int, int]]) -> int:
        url = self.urls[which]
        blocks = self.fs.cat_ranges(
            [url] * len(ranges),
            [o for o, _ in ranges],
            [o + s for o, s in ranges],
            batch_size=self.concurrency,
        )
        return sum(len(b) for b in blocks)
