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
    ├── RemoteError                     EIO, a target URL could not be read (store level)
    │   ├── RemoteAccessError           EACCES, a local target outside the allowed roots
    │   └── RemoteChangedError          the target is no longer the version pinned
    └── TargetError                     EIO, names the key and the URL
        ├── TargetReadError             the target failed (cause chained)
        ├── TargetChangedError          the target changed since its first use
        ├── TargetAccessError           EACCES, the target may not be read by this mount
        ├── RecentFailureError          the same range failed less than a second ago
        └── ShortReadError              the target returned fewer bytes than declared
"""

from __future__ import annotations

import errno as errno_codes
from collections.abc import Callable
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


class RemoteError(RefmountError):
    """The store could not read a URL; carries the URL, the underlying error's text, and
    whether trying again may help (connection errors, timeouts, 5xx, 408, 429)."""

    def __init__(self, url: str, problem: str, *, retryable: bool = False) -> None:
        self.url = url
        self.problem = problem
        self.retryable = retryable
        super().__init__(f"{url}: {problem}")


class RemoteAccessError(RemoteError):
    """A local target lies outside the directories this mount may read (``--local-root``)."""

    errno = errno_codes.EACCES


class RemoteChangedError(RemoteError):
    """The target is no longer the version pinned at its first use; never retried."""

    def __init__(self, url: str, pinned: str, now: str) -> None:
        self.pinned = pinned
        self.now = now
        super().__init__(url, f"the target changed since its first use: pinned {pinned}, now {now}")


class TargetError(RefmountError):
    """Reading a reference's target failed; the message names the key, the URL and, when the
    request was tried more than once, how many attempts were made."""

    def __init__(self, key: str, url: str, problem: str) -> None:
        self.key = key
        self.url = url
        self.problem = problem
        self.attempts = 1
        super().__init__(self._message())

    def _message(self) -> str:
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return f"key {self.key!r} ({self.url}): {self.problem}{tries}"

    def after_attempts(self, attempts: int) -> Self:
        """Return this error, saying it is the last of ``attempts`` attempts."""
        self.attempts = attempts
        self.args = (self._message(),)
        return self


class TargetReadError(TargetError):
    """The target could not be read (missing, unreachable, refused); the cause is chained."""


class TargetChangedError(TargetError):
    """The target changed since its version was pinned; reading it could mix two versions."""


class TargetAccessError(TargetError):
    """The target may not be read by this mount (a local file outside ``--local-root``)."""

    errno = errno_codes.EACCES


class RecentFailureError(TargetError):
    """The range asked for lies in one whose read failed a moment ago; not asked again.

    It carries the errno of that failure; being a repeat of an error already reported, it
    is logged at debug level only.
    """

    def __init__(self, key: str, failure: TargetError) -> None:
        super().__init__(key, failure.url, f"failed a moment ago: {failure.problem}")
        self.errno = failure.errno
        self.failure = failure


class ShortReadError(TargetError):
    """The target is shorter than the reference declares; refmount never pads."""

    def __init__(self, key: str, url: str, expected: int, received: int) -> None:
        self.expected = expected
        self.received = received
        super().__init__(key, url, f"target returned {received} bytes, expected {expected}")


OnInvalid = Callable[[ReferenceFormatError], None]
"""The one way problems in a reference set are reported when they are skipped
(``--skip-invalid``, ``refmount check``): called with each problem's error. Whoever loads a
set passes one to the formats and to ``Tree.build``; without one they log a warning."""
