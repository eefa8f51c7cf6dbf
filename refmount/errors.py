"""The exception tree; every class knows the errno the kernel should see.

::

    RefmountError                       EIO
    ├── ReferenceFormatError            (load time: exit status 2; later: EIO)
    ├── MountError                      (mount time: exit status 1)
    ├── StartError                      the Python API's daemon did not mount (its one line)
    │   └── BadInputError               a malformed set or a bad option (exit status 2)
    ├── FilesystemError                 errno as given
    │   ├── NotFoundError               ENOENT
    │   ├── ReadOnlyError               EROFS
    │   └── NoAttributeError            ENODATA
    └── TargetError                     EIO, a target URL could not be read: names the URL, and
        │                               the file's key once the filesystem attaches it
        ├── TargetReadError             the target failed (missing, unreachable, refused)
        ├── TargetChangedError          the target is no longer the version pinned
        ├── TargetAccessError           EACCES, the target may not be read by this mount
        ├── ShortReadError              the target returned fewer bytes than declared
        └── RecentFailureError          the same range failed less than a second ago (its errno)

A failing target read raises one ``TargetError`` from where it fails (the store, the read
path), with the URL and the problem, and says whether trying again may help. The read path
does not name files in its errors: the filesystem attaches the file's key (``for_key``) where
it answers the kernel's request, so the one log line of a failure names the key and the URL.
"""

from __future__ import annotations

import errno as errno_codes
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Self


class RefmountError(Exception):
    """Base class of every error refmount raises on purpose."""

    errno: int = errno_codes.EIO


class ReferenceFormatError(RefmountError):
    """A reference file is malformed; names the file, the key (if any) and the problem.

    The problem is kept to one line (libraries' messages may end in or hold newlines), so the
    error is always one line of the log or of stderr.
    """

    def __init__(self, source: str, key: str | None, problem: str) -> None:
        self.source = source
        self.key = key
        problem = " ".join(problem.split())
        self.problem = problem
        where = f"{source}: key {key!r}" if key is not None else source
        super().__init__(f"{where}: {problem}")


def too_large(source: str, limit: int, what: str = "is") -> ReferenceFormatError:
    """Return the error for a reference file that ``what`` (is, inflates to) more than ``limit``
    bytes: the cap that ``--max-refs-size`` sets."""
    return ReferenceFormatError(
        source,
        None,
        f"{what} more than {limit:,} bytes, the limit on a reference file "
        "(--max-refs-size, -o max_refs_size=SIZE)",
    )


@contextmanager
def out_of_memory_is_bad_input(source: str, headroom: Callable[[], str]) -> Iterator[None]:
    """Turn a ``MemoryError`` while loading ``source`` into a ``ReferenceFormatError``.

    The frames the error passed through are cleared first, which lets go of what they held
    (the inflated file, half-built references), so the one line can be said and the
    process can exit without a traceback. ``headroom`` says what limits the memory.
    """
    try:
        yield
    except MemoryError as error:
        traceback.clear_frames(error.__traceback__)
        problem = (
            f"ran out of memory while loading it ({headroom()}); "
            "--max-refs-size SIZE refuses a file larger than SIZE before that"
        )
        raise ReferenceFormatError(source, None, problem) from None


class MountError(RefmountError):
    """The mountpoint cannot be used (missing, stale, busy, not permitted)."""


class StartError(RefmountError):
    """The daemon that ``refmount.mount()`` started stopped without mounting.

    The message is the one line the ``refmount`` command prints for the same failure (less
    its ``refmount: error:`` prefix); ``status`` is the command's exit status.
    """

    def __init__(self, message: str, status: int) -> None:
        self.status = status
        super().__init__(message)


class BadInputError(StartError):
    """The reference set is malformed, or an option's value is bad (exit status 2)."""


class FilesystemError(RefmountError):
    """An ordinary filesystem answer such as 'no such file', carried as an errno."""

    def __init__(self, errno: int, message: str = "") -> None:
        self.errno = errno
        super().__init__(message or errno_codes.errorcode.get(errno, str(errno)))


class NotFoundError(FilesystemError):
    """The name does not exist."""

    def __init__(self, message: str = "") -> None:
        super().__init__(errno_codes.ENOENT, message)


class ReadOnlyError(FilesystemError):
    """Anything that would change the tree."""

    def __init__(self, message: str = "") -> None:
        super().__init__(errno_codes.EROFS, message)


class NoAttributeError(FilesystemError):
    """The extended attribute does not exist."""

    def __init__(self, message: str = "") -> None:
        super().__init__(errno_codes.ENODATA, message)


class TargetError(RefmountError):
    """Reading a target URL failed: the URL, the problem, whether trying again may help
    (``retryable``: connection errors, timeouts, 5xx, 408, 429, short bodies) and, once the
    filesystem attached it, the key of the file being served.

    The message names the key (when attached), the URL, the problem and, when the request
    was tried more than once, how many attempts were made.
    """

    retryable: bool = False

    def __init__(self, url: str, problem: str, *, retryable: bool | None = None) -> None:
        self.url = url
        self.problem = problem
        if retryable is not None:
            self.retryable = retryable
        self.key: str | None = None
        self.attempts = 1
        super().__init__(self._message())

    def _message(self) -> str:
        where = self.url if self.key is None else f"key {self.key!r} ({self.url})"
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return f"{where}: {self.problem}{tries}"

    def _renewed(self) -> Self:
        self.args = (self._message(),)
        return self

    def during(self, what: str) -> Self:
        """Return this error, its problem introduced by what failed (``read failed``)."""
        self.problem = f"{what}: {self.problem}"
        return self._renewed()

    def after_attempts(self, attempts: int) -> Self:
        """Return this error, saying it is the last of ``attempts`` attempts."""
        self.attempts = attempts
        return self._renewed()

    def for_key(self, key: str) -> Self:
        """Return this error naming ``key``, the file whose read failed (the filesystem
        attaches it, once, where it answers the request)."""
        self.key = key
        return self._renewed()


class TargetReadError(TargetError):
    """The target could not be read (missing, unreachable, refused); the cause is chained."""


class TargetChangedError(TargetError):
    """The target is no longer the version pinned at its first use (or recorded in the pins
    file, ``since``); reading it could mix two versions. Never retried."""

    def __init__(self, url: str, pinned: str, now: str, since: str = "its first use") -> None:
        self.pinned = pinned
        self.now = now
        super().__init__(url, f"the target changed since {since}: pinned {pinned}, now {now}")


class TargetAccessError(TargetError):
    """The target may not be read by this mount (a local file outside ``--local-root``).

    Never retried; the refusal reads the same whatever was being done (``during`` keeps it).
    """

    errno = errno_codes.EACCES

    def during(self, what: str) -> Self:
        """Return this error as it is: a refusal is not a failed read."""
        return self


class ShortReadError(TargetError):
    """The target is shorter than the reference declares; refmount never pads. Retried."""

    retryable = True

    def __init__(self, url: str, expected: int, received: int) -> None:
        self.expected = expected
        self.received = received
        super().__init__(url, f"target returned {received} bytes, expected {expected}")


class RecentFailureError(TargetError):
    """The range asked for lies in one whose read failed a moment ago; not asked again.

    It carries the errno of that failure; being a repeat of an error already reported, it
    is logged at debug level only.
    """

    def __init__(self, failure: TargetError) -> None:
        super().__init__(failure.url, f"failed a moment ago: {failure.problem}")
        self.errno = failure.errno
        self.failure = failure


OnInvalid = Callable[[ReferenceFormatError], None]
"""The one way problems in a reference set are reported when they are skipped
(``--skip-invalid``, ``refmount check``): called with each problem's error. Whoever loads a
set passes one to the formats and to ``Tree.build``; without one they log a warning."""
