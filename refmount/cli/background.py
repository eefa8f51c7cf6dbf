"""Going into the background: the command line of the daemon child, starting it in its own
session and waiting until it reports that the mount answers, and the descriptors a parent
hands its child (the readiness pipe, and the lifeline whose end means "unmount")."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from refmount.cli.status import EXIT_FAILURE, EXIT_OK
from refmount.ops.logs import detach_logging

READY_FD_VARIABLE = "REFMOUNT_READY_FD"
"""Set by a backgrounding parent: the pipe its daemon child reports readiness on."""

LIFELINE_FD_VARIABLE = "REFMOUNT_LIFELINE_FD"
"""Set by a parent that owns the mount (the Python API): a pipe whose end means 'unmount'."""


READY_MESSAGE = b"ready\n"
"""What the daemon child writes on the readiness pipe once the mount answers."""

BACKGROUND_INTERPRETER_FLAGS = ("-P",)
"""How the background child's interpreter starts: ``-P`` (Python 3.11+, the project's minimum)
leaves out the one unsafe entry of ``sys.path``, the current directory that ``-m`` puts first,
so a ``refmount.py`` or ``refmount/`` where the command was started is never imported (as
whoever mounts, often root). ``-I`` would do that too, but it also drops ``PYTHONPATH`` and
the user's site directory, where a ``pip install --user`` or an administrator's
``PYTHONPATH`` puts the package: with ``-P`` the child finds ``refmount`` exactly where the
console script that started it did (a venv, a user install, or a ``pip install -e`` checkout,
whose import hook lives in site-packages)."""


def inherited_fd(variable: str) -> int | None:
    """Take the descriptor a parent named in ``variable``: made non-inheritable at once, so
    no program we start holds it (libfuse runs ``fusermount3``, which stays alive with
    ``-o auto_unmount``); None when there is none."""
    text = os.environ.pop(variable, None)
    if text is None or not text.isdigit():
        return None
    fd = int(text)
    try:
        os.set_inheritable(fd, False)
    except OSError:  # not a descriptor we were given
        return None
    return fd


def readiness_reporter(log_file: str | None, mountpoint: Path) -> Callable[[], None]:
    """Take the readiness pipe a backgrounding parent gave us (if any); return what to call
    once the mount answers: it moves logging to ``log_file`` (None: the sink chosen for
    ``mountpoint``) and lets go of the terminal, then reports.

    The parent waits for ``READY_MESSAGE``, not for the end of the pipe, so it returns even
    if a program we started held the pipe.
    """
    fd = inherited_fd(READY_FD_VARIABLE)
    if fd is None:
        return lambda: None

    def ready() -> None:
        detach_logging(log_file, str(mountpoint))
        os.write(fd, READY_MESSAGE)
        os.close(fd)

    return ready


def background_command(argv: Sequence[str]) -> list[str]:
    """Return the command line of the daemon child that ``run_in_background`` starts."""
    return [
        sys.executable,
        *BACKGROUND_INTERPRETER_FLAGS,
        "-m",
        "refmount",
        "--foreground",
        *argv,
    ]


def launch(
    argv: Sequence[str],
    *,
    stdin: int | bytes | None = subprocess.DEVNULL,
    stderr: int | IO[bytes] | None = None,
    lifeline: int | None = None,
) -> tuple[subprocess.Popen[bytes], bool]:
    """Start the daemon for ``argv`` as a child in its own session; return it and whether it
    is mounted, once it is mounted or has failed.

    ``stdin`` is what the child reads (bytes: a reference document for REFS ``-``, written
    through a pipe only the child reads; None: ours). ``lifeline`` is the read end of a pipe
    whose end makes the daemon unmount (the caller keeps the write end and closes the read
    end after this returns).
    """
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    env[READY_FD_VARIABLE] = str(write_end)
    fds = [write_end]
    if lifeline is not None:
        env[LIFELINE_FD_VARIABLE] = str(lifeline)
        fds.append(lifeline)
    document = stdin if isinstance(stdin, bytes) else None
    child = subprocess.Popen(
        background_command(argv),
        stdin=subprocess.PIPE if isinstance(stdin, bytes) else stdin,
        stderr=stderr,
        pass_fds=fds,
        env=env,
        start_new_session=True,
    )
    os.close(write_end)
    if document is not None and child.stdin is not None:
        with contextlib.suppress(BrokenPipeError):  # the child stopped before reading it
            child.stdin.write(document)
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.readline()  # the message, or EOF once the child is gone
    return child, message == READY_MESSAGE


def run_in_background(argv: Sequence[str], stdin_refs: bool = False) -> int:
    """Start the daemon as a child in its own session; return once it is mounted or failed.

    With ``stdin_refs`` (REFS ``-``) the child reads the reference document from our stdin.
    """
    child, ready = launch(argv, stdin=None if stdin_refs else subprocess.DEVNULL)
    return EXIT_OK if ready else child.wait() or EXIT_FAILURE
