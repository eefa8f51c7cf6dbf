"""A Dask ``distributed`` nanny plugin that mounts a reference set once on every host.

The mount belongs to the host, not to a nanny: it is made by the ``refmount`` command, whose
daemon detaches, so it outlives the nanny that started it. Nannies on one host coordinate
through two lock files named after the mountpoint:

- ``*.lock``, held exclusively around attaching and detaching, so only one nanny at a time
  decides whether to mount (it looks at the mount table) or to unmount;
- ``*.users``, on which every nanny using the mount holds a shared ``flock`` for as long as
  it runs. The kernel drops it when the nanny exits, even by SIGKILL, so the nanny that
  leaves last, whose exclusive lock on it succeeds, unmounts.

``pins=`` (a pins file that ``refmount pin`` wrote, or its parsed document) travels with the
plugin: every host mounts with the same record (``--pins``), so every node serves the same
version of each target or fails.

Installed with ``pip install 'refmount[dask]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import NannyPlugin

from refmount import cli
from refmount.api import build_argv, encode_references, start_error
from refmount.config import STDIN_REFS
from refmount.daemon import mounts_on
from refmount.store.pin_file import loads_pins, parse_pins

MOUNT_FSTYPE = "fuse.refmount"
"""How the mount table names a refmount mount."""

UNMOUNT_TIMEOUT = 30.0
"""Seconds to wait for the mount to leave the mount table once unmounted."""


def lock_paths(mountpoint: Path, directory: Path | None = None) -> tuple[Path, Path]:
    """Return the attach lock and the users' lock of ``mountpoint`` (in the temporary
    directory, per user, named after the resolved mountpoint)."""
    resolved = os.path.realpath(mountpoint)
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:16]
    stem = (directory or Path(tempfile.gettempdir())) / f"refmount-{os.getuid()}-{digest}"
    return stem.with_suffix(".lock"), stem.with_suffix(".users")


def is_mounted(mountpoint: Path) -> bool:
    """Return True when a refmount is mounted on ``mountpoint``."""
    return any(entry.fstype == MOUNT_FSTYPE for entry in mounts_on(mountpoint))


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (waiting for it) for the ``with`` block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class RefmountPlugin(NannyPlugin):
    """Mount ``refs`` on ``mountpoint`` on every host of the cluster, once per host.

    ``refs`` and the keyword ``options`` are those of ``refmount.mount()`` (a path, URL or
    in-memory set, or an Icechunk repository with ``branch=``, ``tag=`` or ``snapshot=`` and
    ``authorize_container=[...]``; ``cache_size=``, ``remote_options=``, ...; an unknown
    keyword is a ``TypeError`` here, on the client). Register it with
    ``client.register_plugin(...)``: nannies that exist mount at once, new ones before they
    start their worker. A worker's restart leaves the mount alone; the mount goes when the
    host's last nanny closes.

    ``pins`` is a pins file (read here, on the client) or its parsed document: each host
    writes it to a private file for its mount's ``--pins``.
    """

    idempotent = True

    def __init__(
        self,
        refs: str | os.PathLike[str] | Mapping[str, Any],
        mountpoint: str | os.PathLike[str],
        *,
        pins: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self._pins = None if pins is None else pins_document(pins)
        if isinstance(refs, Mapping):
            self._document: bytes | None = encode_references(refs)
            self._refs = STDIN_REFS
        else:
            self._document, self._refs = None, os.fspath(refs)
        self.mountpoint = Path(os.path.abspath(os.fspath(mountpoint)))
        self._argv = build_argv(self._refs, str(self.mountpoint), options)  # TypeError now
        self.name = f"refmount {self.mountpoint}"
        self._held: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_held"] = None  # a lock held here means nothing elsewhere
        return state

    async def setup(self, nanny: Any) -> None:
        """Mount unless this host has the mount already; hold a share of it."""
        await asyncio.to_thread(self.attach)

    async def teardown(self, nanny: Any) -> None:
        """Let go of the mount; unmount it if no other nanny of this host holds it."""
        await asyncio.to_thread(self.detach)

    def attach(self) -> None:
        """Mount if need be and take a shared lock on the users' file (again: nothing)."""
        if self._held is not None:
            return
        attach_lock, users = lock_paths(self.mountpoint)
        with _exclusive(attach_lock):
            if not self._usable():
                self._mount()
            held = os.open(users, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(held, fcntl.LOCK_SH)
            self._held = held

    def detach(self) -> None:
        """Drop this nanny's share; the last one to leave unmounts (again: nothing)."""
        if self._held is None:
            return
        attach_lock, users = lock_paths(self.mountpoint)
        with _exclusive(attach_lock):
            os.close(self._held)
            self._held = None
            probe = os.open(users, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another nanny of this host still uses the mount
            finally:
                os.close(probe)
            if is_mounted(self.mountpoint):
                self._unmount()

    def _usable(self) -> bool:
        """Return True when the mount is there and answers; clear a stale one."""
        if not is_mounted(self.mountpoint):
            return False
        try:
            os.statvfs(self.mountpoint)
        except OSError as error:
            if error.errno != errno.ENOTCONN:
                raise
            _fusermount(self.mountpoint, "-u", "-z")  # its daemon died: mount afresh
            return False
        return True

    def _mount(self) -> None:
        """Run the ``refmount`` command, which returns once its detached daemon answers."""
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, *cli.BACKGROUND_INTERPRETER_FLAGS, "-m", "refmount"]
        with tempfile.TemporaryFile() as said, _pins_file(self._pins) as pins:
            if pins is not None:  # read by the daemon before it reports it is ready
                command += ["--pins", pins]
            if self._document is None:
                status = subprocess.call(
                    [*command, *self._argv],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=said,
                )
            else:
                status = subprocess.run(
                    [*command, *self._argv],
                    input=self._document,
                    stdout=subprocess.DEVNULL,
                    stderr=said,
                    check=False,
                ).returncode
            if status != 0:
                raise start_error(status, said)

    def _unmount(self) -> None:
        """Unmount (lazily if it is busy) and wait until the mount table says it is gone."""
        if _fusermount(self.mountpoint, "-u") != 0:
            _fusermount(self.mountpoint, "-u", "-z")
        deadline = time.monotonic() + UNMOUNT_TIMEOUT
        while is_mounted(self.mountpoint) and time.monotonic() < deadline:
            time.sleep(0.05)


def pins_document(pins: str | os.PathLike[str] | Mapping[str, Any]) -> bytes:
    """Return the pins file's bytes for ``pins`` (a path, or a parsed pins document),
    checked here so a malformed one fails on the client (``ReferenceFormatError``)."""
    if isinstance(pins, Mapping):
        parse_pins("pins", pins)
        return json.dumps(pins).encode()
    path = os.fspath(pins)
    data = Path(path).read_bytes()
    loads_pins(path, data)
    return data


@contextlib.contextmanager
def _pins_file(document: bytes | None) -> Iterator[str | None]:
    """Write ``document`` to a file only this user may read, for as long as the mount
    command runs; yield its path (None when there are no pins)."""
    if document is None:
        yield None
        return
    with tempfile.NamedTemporaryFile(prefix="refmount-pins-", suffix=".json") as file:
        file.write(document)
        file.flush()
        yield file.name


def _fusermount(mountpoint: Path, *flags: str) -> int:
    command = shutil.which("fusermount3") or "fusermount3"
    done = subprocess.run([command, *flags, str(mountpoint)], check=False, capture_output=True)
    return done.returncode
