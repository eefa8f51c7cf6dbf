"""The Python API: ``refmount.mount()`` runs the ``refmount`` command's daemon in a child
process and returns a handle on the mount.

Nothing here wires a mount: the keywords become the command line of ``refmount`` (the same
parser, checks and composition root), started by the launcher the command uses to go into
the background. Two pipes tie the child to the caller: one reports readiness (or its end,
failure), the other ends when the caller exits, normally or by a signal, which makes the
daemon unmount. An in-memory reference set travels over the child's standard input (REFS
``-``), so it never lands in a file another process could read.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from refmount import cli
from refmount.config import STDIN_REFS
from refmount.errors import BadInputError, StartError

FUSE_OPTIONS_KEYWORD = "fuse_options"
"""The keyword for ``-o``: a list of mount options (``["allow_other", "auto_unmount"]``)."""

NOT_KEYWORDS = frozenset({"help", "version", "foreground", "refs", "mountpoint", "options"})
"""Command-line options with no keyword: the daemon always runs in the child's foreground."""

STOP_TIMEOUT = 30.0
"""Seconds ``unmount`` waits for the daemon to unmount and exit before it is stopped."""

ERROR_PREFIX = "refmount: error: "


def option_keywords() -> dict[str, argparse.Action]:
    """Return the long command-line options of ``refmount``, by keyword (``--cache-size``
    is ``cache_size``), as the command's own parser declares them."""
    keywords: dict[str, argparse.Action] = {}
    for action in cli.build_parser()._actions:
        long = [text for text in action.option_strings if text.startswith("--")]
        if long and action.dest not in NOT_KEYWORDS:
            keywords[long[0].removeprefix("--").replace("-", "_")] = action
    return keywords


def build_argv(refs: str, mountpoint: str, options: Mapping[str, object]) -> list[str]:
    """Return the ``refmount`` arguments that ``refs``, ``mountpoint`` and the keyword
    ``options`` stand for; raise ``TypeError`` for a keyword that is no option.

    A switch is given as True (False and None leave it out); a JSON option takes a dict; a
    repeatable option (``local_root``) takes a list; anything else is written with ``str``.
    """
    keywords = option_keywords()
    argv: list[str] = []
    for name, value in options.items():
        if name == FUSE_OPTIONS_KEYWORD:
            argv += [word for option in _strings(name, value) for word in ("-o", option)]
            continue
        action = keywords.get(name)
        if action is None:
            raise TypeError(f"mount() got an unexpected keyword argument {name!r}")
        flag = action.option_strings[-1]
        if value is None or value is False:
            continue
        if action.nargs == 0:  # a switch
            if value is not True:
                raise TypeError(f"mount() keyword {name!r} is a switch: True or False")
            argv.append(flag)
        elif isinstance(action, argparse._AppendAction):
            argv += [word for item in _strings(name, value) for word in (flag, item)]
        elif isinstance(value, Mapping):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return [*argv, "--", refs, mountpoint]


def _strings(name: str, value: object) -> list[str]:
    if isinstance(value, str | os.PathLike):
        return [os.fspath(value)]
    if isinstance(value, Sequence):
        return [os.fspath(item) for item in value]
    raise TypeError(f"mount() keyword {name!r} takes a list of strings")


def encode_references(references: Mapping[str, Any]) -> bytes:
    """Return an in-memory reference set (Version 0 or 1) as the JSON document the daemon
    reads; ``bytes`` values (as kerchunk may leave inline data) become text when they are
    UTF-8, else ``base64:``."""

    def inline(value: object) -> str:
        if not isinstance(value, bytes):
            raise TypeError(f"cannot put a {type(value).__name__} in a reference set")
        with contextlib.suppress(UnicodeDecodeError):
            text = value.decode()
            if not text.startswith("base64:"):
                return text
        return "base64:" + base64.b64encode(value).decode()

    return json.dumps(references, default=inline).encode()


class Mount:
    """A reference set mounted by ``mount()``: a context manager that unmounts on exit.

    ``path`` is the mountpoint. ``stats()`` returns the counters that ``refmount stats
    --json`` prints; ``unmount()`` unmounts (again: nothing happens).
    """

    def __init__(
        self, path: Path, process: subprocess.Popen[bytes], lifeline: int, made: bool
    ) -> None:
        self.path = path
        self._process = process
        self._lifeline: int | None = lifeline
        self._made = made
        self._lock = threading.Lock()

    @property
    def mounted(self) -> bool:
        """Return True until ``unmount()`` (or the daemon's own exit)."""
        return self._lifeline is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        """Return the process id of the daemon."""
        return self._process.pid

    def stats(self) -> dict[str, Any]:
        """Return the mount's statistics snapshot (``refmount stats --json``)."""
        return cli.read_snapshot(self.path)

    def unmount(self, timeout: float = STOP_TIMEOUT) -> None:
        """Unmount and wait for the daemon to exit; remove a mountpoint ``mount()`` made.

        The daemon is told by the end of its lifeline pipe; one that does not exit within
        ``timeout`` seconds is terminated, then killed and the mount detached lazily.
        """
        with self._lock:
            lifeline, self._lifeline = self._lifeline, None
            if lifeline is None:
                return
            _LIVE.discard(self)
            os.close(lifeline)  # the daemon unmounts when this pipe ends
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._stop()
            if self._made:
                with contextlib.suppress(OSError):
                    self.path.rmdir()

    def _stop(self) -> None:
        """Stop a daemon that did not unmount when told: SIGTERM, then SIGKILL and a lazy
        unmount."""
        self._process.terminate()
        try:
            self._process.wait(5.0)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            fusermount = shutil.which("fusermount3") or "fusermount3"
            subprocess.run(
                [fusermount, "-u", "-z", str(self.path)], check=False, capture_output=True
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.unmount()

    def __repr__(self) -> str:
        state = "mounted" if self.mounted else "unmounted"
        return f"<refmount.Mount {str(self.path)!r} {state}, daemon pid {self._process.pid}>"


_LIVE: set[Mount] = set()
"""Mounts not unmounted yet: ``atexit`` unmounts them (a killed process relies on the
lifeline pipe instead)."""


@atexit.register
def _unmount_all() -> None:
    for live in list(_LIVE):
        live.unmount()


def mount(
    refs: str | os.PathLike[str] | Mapping[str, Any],
    mountpoint: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Mount:
    """Mount a reference set read-only; return once the mount answers.

    ``refs`` is a reference file or Parquet directory, local or at an fsspec URL, or an
    in-memory reference set: a dict in Version 0 or 1 form (e.g. kerchunk's ``translate()``
    or VirtualiZarr's ``vds.vz.to_kerchunk(format="dict")``). A dict has no directory:
    relative target paths are refused unless ``base=`` gives the directory or URL they are
    relative to; every node's mtime is the time of the mount.

    ``refs`` may also be an Icechunk repository (a local directory, or an ``s3://`` URL),
    mounted at the snapshot that ``branch=`` (default ``"main"``), ``tag=`` or ``snapshot=``
    resolves to at mount time; ``authorize_container=[...]`` lists the prefixes of the
    virtual chunk containers it may read (``["all"]``: every one it declares).

    ``mountpoint`` is an empty directory; None makes a private temporary one, removed after
    unmounting. The keyword ``options`` are the command's long options, with ``_`` for ``-``
    (``cache_size="2G"``, ``remote_options={"anon": True}``, ``timeout="10s"``,
    ``retries=2``, ``skip_invalid=True``, ...), plus ``fuse_options=[...]`` for ``-o``; an
    unknown keyword is a ``TypeError``.

    The daemon runs in a child process (this process reads the mount, so it must not serve
    it) and unmounts when ``unmount()`` is called, when a ``with`` block ends, or when this
    process exits, normally (``atexit``) or killed by any signal. Its log goes where the
    ``refmount`` command's goes once in the background (``log_file=`` chooses a file).

    Raises ``BadInputError`` (a malformed set, a bad option value) or ``StartError`` (the
    mountpoint cannot be used, FUSE refuses) carrying the line the command prints.
    """
    if isinstance(refs, Mapping):
        document: bytes | None = encode_references(refs)
        argument = STDIN_REFS
    else:
        document, argument = None, os.fspath(refs)
    build_argv(argument, "", options)  # an unknown keyword: TypeError before anything is made
    made = mountpoint is None
    if mountpoint is None:
        path = Path(tempfile.mkdtemp(prefix="refmount-"))
    else:
        path = Path(os.fspath(mountpoint))
    argv = build_argv(argument, str(path), options)
    lifeline, keep = os.pipe()  # our end is not inherited by anything we start later
    try:
        with tempfile.TemporaryFile() as said:  # unlinked: only the child and we see it
            child, ready = cli.launch(
                argv,
                stdin=subprocess.DEVNULL if document is None else document,
                stderr=said,
                lifeline=lifeline,
            )
            if not ready:
                raise start_error(child.wait(), said)
    except BaseException:
        os.close(keep)
        if made:
            with contextlib.suppress(OSError):
                path.rmdir()
        raise
    finally:
        os.close(lifeline)
    handle = Mount(path, child, keep, made)
    _LIVE.add(handle)
    return handle


def start_error(status: int, said: IO[bytes]) -> StartError:
    """Return the error for a ``refmount`` that exited with ``status``, from what it printed
    (``said``: its stderr, kept in a file)."""
    said.seek(0)
    lines = said.read().decode(errors="replace").splitlines()
    errors = [line.removeprefix(ERROR_PREFIX) for line in lines if line.startswith(ERROR_PREFIX)]
    if errors:
        message = errors[-1]
    else:
        shown = "; ".join(line.strip() for line in lines[-3:] if line.strip())
        message = f"refmount exited with status {status} without mounting" + (
            f": {shown}" if shown else ""
        )
    kind = BadInputError if status == cli.EXIT_BAD_INPUT else StartError
    return kind(message, status)
