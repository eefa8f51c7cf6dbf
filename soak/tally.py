"""What the readers did: each read planned, the counts every reader thread adds to, and the
reads that did not give the right bytes."""

from __future__ import annotations

import enum
import errno
import threading
from dataclasses import dataclass, field

from soak.dataset import Key


class Kind(enum.StrEnum):
    """How a read failed."""

    EIO = "eio"
    """It raised EIO: refmount gave up on the target."""
    WRONG = "wrong"
    """It returned bytes other than the source's."""
    ERROR = "error"
    """It raised another error."""


@dataclass(frozen=True)
class Read:
    """One read a reader does: a range of a key (or the whole file), with O_DIRECT or not."""

    key: Key
    offset: int
    size: int
    whole: bool
    direct: bool

    @property
    def expected(self) -> bytes:
        """The source's bytes in the range."""
        return self.key.data[self.offset : self.offset + self.size]


@dataclass(frozen=True)
class Failure:
    """A read that did not give the right bytes."""

    key: Key
    kind: Kind
    started: float
    ended: float
    """When the read started and ended (``time.monotonic()``)."""
    detail: str


@dataclass
class Tally:
    """What the readers did; every reader thread adds to it under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    reads: int = 0
    bytes_read: int = 0
    direct_reads: int = 0
    whole_reads: int = 0
    per_target: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def record(self, read: Read, got: bytes, started: float, ended: float) -> None:
        """Count a read that returned ``got``; a failure when it is not the source's bytes."""
        with self.lock:
            self.reads += 1
            self.bytes_read += len(got)
            self.direct_reads += read.direct and not read.whole
            self.whole_reads += read.whole
            self.per_target[read.key.target] = self.per_target.get(read.key.target, 0) + 1
            self.latencies.append(ended - started)
            if got != read.expected:
                detail = (
                    f"offset {read.offset} size {read.size}: {len(got)} bytes, not the source's"
                )
                self.failures.append(Failure(read.key, Kind.WRONG, started, ended, detail))

    def fail(self, read: Read, error: OSError, started: float, ended: float) -> None:
        """Count a read that raised ``error``."""
        kind = Kind.EIO if error.errno == errno.EIO else Kind.ERROR
        with self.lock:
            self.failures.append(Failure(read.key, kind, started, ended, repr(error)))
