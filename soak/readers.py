"""The reader threads: each reads random ranges (half of them with O_DIRECT) or whole keys of
the mount until the deadline and tallies every read, checking every byte."""

from __future__ import annotations

import errno
import os
import random
import threading
import time
from pathlib import Path

from soak.dataset import Key
from soak.tally import Read, Tally
from soak.units import KIB

WHOLE_SHARE = 0.1
"""The share of reads that read the whole file."""
DIRECT_SHARE = 0.5
"""The share of range reads with O_DIRECT (so they reach the daemon, not the page cache)."""
LARGEST_RANGE = 256 * KIB


def read_range(path: Path, offset: int, size: int, direct: bool) -> bytes:
    """Read ``size`` bytes at ``offset`` (fewer at the end of the file), O_DIRECT if asked."""
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    try:
        pieces = []
        while size > 0:
            piece = os.pread(fd, size, offset)
            if not piece:
                break
            pieces.append(piece)
            offset += len(piece)
            size -= len(piece)
        return b"".join(pieces)
    finally:
        os.close(fd)


def warm_engines(mountpoint: Path, keys: list[Key]) -> None:
    """Read the smallest key of each target once, before any fault, and check its bytes.

    The fetch engines are imported and their clients made (and S3's service model loaded) at
    the first request, not at mount: the RSS the bound is counted from is taken after this,
    as the daemon's RSS "after loading" is meant.
    """
    smallest: dict[str, Key] = {}
    for key in keys:
        if key.target not in smallest or len(key.data) < len(smallest[key.target].data):
            smallest[key.target] = key
    for key in smallest.values():
        if (mountpoint / key.name).read_bytes() != key.data:
            raise SystemExit(f"soak: wrong bytes in {key.name} before any fault")


def choose(rng: random.Random, keys: list[Key], direct_ok: bool) -> Read:
    """A random read: a key, the whole file one time in ten, else a range of at most 256 KiB
    (with O_DIRECT half of the time, when ``direct_ok``)."""
    key = rng.choice(keys)
    whole = rng.random() < WHOLE_SHARE
    direct = direct_ok and rng.random() < DIRECT_SHARE
    if whole:
        return Read(key, 0, len(key.data), whole, direct)
    offset = rng.randrange(len(key.data))
    size = rng.randint(1, min(len(key.data) - offset, LARGEST_RANGE))
    return Read(key, offset, size, whole, direct)


def reader(
    number: int,
    mountpoint: Path,
    keys: list[Key],
    deadline: float,
    seed: int,
    tally: Tally,
    direct_ok: threading.Event,
) -> None:
    """Read random keys, at random offsets and sizes, until ``deadline``; check every byte."""
    rng = random.Random(seed * 1000 + number)
    while time.monotonic() < deadline:
        read = choose(rng, keys, direct_ok.is_set())
        path = mountpoint / read.key.name
        started = time.monotonic()
        try:
            if read.whole:
                got = path.read_bytes()
            else:
                got = read_range(path, read.offset, read.size, read.direct)
        except OSError as error:
            ended = time.monotonic()
            if read.direct and error.errno == errno.EINVAL:
                direct_ok.clear()  # the kernel refuses O_DIRECT here: buffered reads only
                continue
            tally.fail(read, error, started, ended)
            continue
        tally.record(read, got, started, time.monotonic())


class Readers:
    """``count`` reader threads over the keys of the mount, reading until ``deadline``."""

    def __init__(
        self, count: int, mountpoint: Path, keys: list[Key], deadline: float, seed: int
    ) -> None:
        self.tally = Tally()
        direct_ok = threading.Event()
        direct_ok.set()
        self.threads = [
            threading.Thread(
                target=reader,
                args=(i, mountpoint, keys, deadline, seed, self.tally, direct_ok),
                name=f"soak-reader-{i}",
                daemon=True,
            )
            for i in range(count)
        ]

    def start(self) -> None:
        """Start every reader."""
        for thread in self.threads:
            thread.start()

    def join(self, by: float) -> int:
        """Wait for the readers until ``by`` (``time.monotonic()``); how many still read."""
        for thread in self.threads:
            thread.join(max(0.0, by - time.monotonic()))
        return sum(thread.is_alive() for thread in self.threads)
