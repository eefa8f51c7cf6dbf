"""One target version in the disk cache: a sparse data file and an append-only piece log.

The target is cut into pieces of ``PIECE`` bytes (the last one shorter). A cached piece's
bytes sit in ``KEY.data`` at the piece's own offset (a sparse file the size of the target),
and ``KEY.log`` records each piece written: a header naming the layout and the target, then
fixed-size records ``(piece number, length, CRC-32 of the bytes)``, each with its own CRC.

Why this cannot serve wrong bytes:

- the key is a hash of the URL and its pinned version, so another version is another entry;
- a record is appended only after its bytes are written; a crash in between leaves bytes no
  record names (never read), and a torn record at the log's end fails its own CRC (skipped);
- every piece read is checked against its record's CRC: bytes lost in a crash (written, not
  yet on disk), flipped on disk or written by someone else fail it, and the piece is
  fetched again. Nothing is ever fsynced: the CRC does what ordering would.

Two mounts may write one entry at once: pieces of one version are the same bytes whoever
writes them, and each record is one ``O_APPEND`` write, which the kernel never interleaves.
A mount learns of pieces others wrote by reading the log's new records on a miss.

Every method but ``missing`` blocks (file I/O): the cache calls them in worker threads.
Files are opened relative to the cache directory's descriptor with ``O_NOFOLLOW``, and must
be regular files owned by this user.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import threading
import zlib
from dataclasses import dataclass

PIECE = 64 * 1024
"""The bytes of a piece: what one record covers and one check reads."""

MAGIC = b"refmount-disk-cache 1\n"
HEADER = struct.Struct("<32sQQ")
"""The log's header after ``MAGIC``: the key's digest, the piece size, the target's size."""

RECORD = struct.Struct("<QII")
"""A record: piece number, length and CRC-32 of its bytes; followed by the record's CRC."""

RECORD_SIZE = RECORD.size + 4

LOG_START = len(MAGIC) + HEADER.size
"""Where the records begin: they sit at whole multiples of ``RECORD_SIZE`` after it."""

MAX_LOG_BYTES = 64 * 1024 * 1024
"""A log larger than this is not read (a hostile or runaway file): the entry starts afresh."""


class EntryGone(OSError):
    """The entry's files were removed (evicted by another mount): open it afresh."""


@dataclass(frozen=True, slots=True)
class Piece:
    """A cached piece: its length and the CRC-32 of its bytes."""

    length: int
    crc: int


class DiskEntry:
    """The cached pieces of one target version (see the module's description)."""

    def __init__(self, directory: int, key: str, digest: bytes, size: int) -> None:
        self.key = key
        self.size = size
        self._digest = digest
        self._pieces: dict[int, Piece] = {}
        self._log_read = 0
        self._lock = threading.Lock()
        """Held by each method: worker threads of several reads may use one entry at once."""
        self._data = self._log = -1
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        self._data = os.open(f"{key}.data", flags, 0o600, dir_fd=directory)
        try:
            self._log = os.open(f"{key}.log", flags | os.O_APPEND, 0o600, dir_fd=directory)
        except OSError:
            os.close(self._data)
            raise
        try:
            for descriptor in (self._data, self._log):
                _check_file(os.fstat(descriptor))
            self._start()
        except OSError:
            self.close()
            raise

    def _start(self) -> None:
        """Write the header of a new log, or check an existing one and read its records."""
        header = MAGIC + HEADER.pack(self._digest, PIECE, self.size)
        length = os.fstat(self._log).st_size
        if length == 0:
            os.write(self._log, header)
            self._log_read = len(header)
            return
        found = os.pread(self._log, len(header), 0)
        if found != header or length > MAX_LOG_BYTES:
            # another layout, another target (a hash collision, a file put there) or a
            # runaway log: start the entry again (pieces are never trusted without a record)
            os.ftruncate(self._log, 0)
            os.ftruncate(self._data, 0)
            os.write(self._log, header)
            self._log_read = len(header)
            return
        self._log_read = len(header)
        self._refresh()

    @property
    def pieces(self) -> int:
        """Return how many pieces are known to be cached."""
        return len(self._pieces)

    def refresh(self) -> None:
        """Read the records appended since the last look (by this mount or another)."""
        with self._lock:
            self._open()
            self._refresh()

    def _refresh(self) -> None:
        if os.fstat(self._log).st_nlink == 0:
            raise EntryGone(f"{self.key} was evicted")
        end = min(os.fstat(self._log).st_size, MAX_LOG_BYTES)
        whole = (end - self._log_read) // RECORD_SIZE * RECORD_SIZE
        if whole <= 0:
            return
        data = os.pread(self._log, whole, self._log_read)
        self._log_read += len(data) // RECORD_SIZE * RECORD_SIZE
        count = _piece_count(self.size)
        for at in range(0, len(data) - RECORD_SIZE + 1, RECORD_SIZE):
            record = data[at : at + RECORD.size]
            (check,) = struct.unpack_from("<I", data, at + RECORD.size)
            if zlib.crc32(record) != check:
                continue  # torn or garbage: as if never written
            number, length, crc = RECORD.unpack(record)
            if number < count and length == _piece_length(number, self.size):
                self._pieces[number] = Piece(length, crc)

    def missing(self, first: int, last: int) -> list[tuple[int, int]]:
        """Return the runs ``[a, b)`` of pieces ``first..last`` not known to be cached.

        The one method that neither blocks nor takes the lock (the event loop calls it):
        it only tests membership, which is atomic while a thread adds or drops pieces.
        """
        runs: list[tuple[int, int]] = []
        start: int | None = None
        for number in range(first, last + 1):
            if number in self._pieces:
                if start is not None:
                    runs.append((start, number))
                    start = None
            elif start is None:
                start = number
        if start is not None:
            runs.append((start, last + 1))
        return runs

    def read(self, first: int, stop: int) -> tuple[bytes, list[int]]:
        """Return the bytes of pieces ``[first, stop)`` (all known to be cached) and the
        numbers of those whose bytes fail their CRC, which are forgotten."""
        with self._lock:
            self._open()
            return self._read(first, stop)

    def _read(self, first: int, stop: int) -> tuple[bytes, list[int]]:
        start = first * PIECE
        end = min(stop * PIECE, self.size)
        data = os.pread(self._data, end - start, start)
        bad: list[int] = []
        view = memoryview(data)
        for number in range(first, stop):
            piece = self._pieces.get(number)
            at = (number - first) * PIECE
            chunk = view[at : at + PIECE]
            if piece is None or len(chunk) != piece.length or zlib.crc32(chunk) != piece.crc:
                bad.append(number)
                self._pieces.pop(number, None)
        return data, bad

    def write(self, first: int, data: bytes | memoryview) -> int:
        """Store ``data``, the bytes of whole pieces from ``first`` on (the last may be the
        target's shorter last piece); return the bytes written."""
        with self._lock:
            self._open()
            return self._write(first, data)

    def _write(self, first: int, data: bytes | memoryview) -> int:
        if os.fstat(self._log).st_nlink == 0:
            raise EntryGone(f"{self.key} was evicted")
        view = memoryview(data)
        count = len(view) // PIECE + (1 if len(view) % PIECE else 0)
        usable = [
            number
            for number in range(first, first + count)
            if len(view[(number - first) * PIECE : (number - first + 1) * PIECE])
            == _piece_length(number, self.size)
        ]
        if not usable:
            return 0
        length = (usable[-1] - first + 1) * PIECE
        written = os.pwrite(self._data, view[:length], first * PIECE)
        if written < min(length, len(view)):  # a full disk: record only the whole pieces
            usable = [n for n in usable if (n - first + 1) * PIECE <= written]
        records = bytearray()
        for number in usable:
            chunk = view[(number - first) * PIECE : (number - first + 1) * PIECE]
            crc = zlib.crc32(chunk)
            record = RECORD.pack(number, len(chunk), crc)
            records += record + struct.pack("<I", zlib.crc32(record))
            self._pieces[number] = Piece(len(chunk), crc)
        if records:
            self._append(records)
        if written < min(length, len(view)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return written

    def _append(self, records: bytearray) -> None:
        """Append ``records`` to the log in one ``O_APPEND`` write (records of two mounts
        never mix), after zeros completing a record torn at its end (a crash, a full disk),
        so that they start at a record boundary (a torn record would shift every later one
        and none would be read). The log is locked meanwhile: two mounts never both pad."""
        fcntl.flock(self._log, fcntl.LOCK_EX)
        try:
            torn = (os.fstat(self._log).st_size - LOG_START) % RECORD_SIZE
            padding = bytes(RECORD_SIZE - torn if torn else 0)
            os.write(self._log, padding + records)
        finally:
            fcntl.flock(self._log, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the entry's files (idempotent; waits for a method under way in another
        thread, so a descriptor is never closed, and its number reused, under it)."""
        with self._lock:
            for name in ("_data", "_log"):
                descriptor = getattr(self, name, -1)
                if descriptor >= 0:
                    os.close(descriptor)
                    setattr(self, name, -1)

    def _open(self) -> None:
        if self._data < 0:
            raise EntryGone(f"{self.key} was closed")


def pieces_of(start: int, end: int) -> tuple[int, int]:
    """Return the first and last piece numbers that bytes ``[start, end)`` touch."""
    return start // PIECE, (max(end, start + 1) - 1) // PIECE


def _piece_count(size: int) -> int:
    return -(-size // PIECE)


def _piece_length(number: int, size: int) -> int:
    return max(0, min(PIECE, size - number * PIECE))


def _check_file(status: os.stat_result) -> None:
    """Refuse a cache file that is not a regular file of this user's (put there by another)."""
    if not stat.S_ISREG(status.st_mode):
        raise OSError(f"a cache file is not a regular file (mode {status.st_mode:o})")
    if status.st_uid != os.geteuid():
        raise OSError(f"a cache file belongs to uid {status.st_uid}, not {os.geteuid()}")
