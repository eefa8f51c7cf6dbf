"""The readers compared and how each reaches a target: refmount and fsspec.fuse mounts, fsspec
``cat`` in process, the raw reader, the pyfuse3 floor, the C floor (single- and
multi-threaded) and the plain local files."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec

from bench.mounts import FSSPEC_FUSE_CHILD, Mount, fresh_mountpoint, fusepy_shim, mount_child
from bench.processes import process_cpu_seconds
from bench.raw import RawReader


class Tool(enum.StrEnum):
    """A reader compared in the read sections; its value is its key in the JSON figures."""

    REFMOUNT = "refmount"
    CAT = "cat"
    FUSE = "fuse"
    RAW = "raw"
    FLOOR = "floor"
    CFLOOR = "cfloor"
    CFLOOR_MT = "cfloor_mt"
    PLAIN = "plain"
    """The chunks as plain local files (no FUSE), read by the same loop as the mounts."""


BASELINES = (Tool.CAT, Tool.FUSE, Tool.RAW, Tool.FLOOR, Tool.CFLOOR)
"""The tools refmount is compared with: the table's "x ..." columns."""


def refmount_mount(
    workdir: Path, name: str, refs: Path, options: Sequence[str], env: dict[str, str]
) -> contextlib.AbstractContextManager[Mount]:
    """Mount ``refs`` with the real ``refmount -f`` command and ``options`` in a child
    process, on a mountpoint of its own (a cold page cache and a cold daemon)."""
    command = [sys.executable, "-m", "refmount", "-f", *options]
    mountpoint = fresh_mountpoint(workdir, f"refmount-{name}")
    return mount_child([*command, str(refs), str(mountpoint)], mountpoint, env)


@dataclass
class Target:
    """How refmount, fsspec and the raw readers reach one kind of target."""

    name: str
    protocol: str
    refs: dict[str, Path]
    refmount_options: list[str]
    remote_options: dict[str, Any]
    env: dict[str, str]
    raw_reader: RawReader
    server_pids: Callable[[], list[int]] = field(default=list)
    """The server's processes (none for local files, or a server inside the benchmark)."""

    def refmount(
        self, workdir: Path, refs: Path, *options: str
    ) -> contextlib.AbstractContextManager[Mount]:
        """Mount ``refs`` with the real ``refmount`` command in a child process."""
        options = (*self.refmount_options, *options)
        return refmount_mount(workdir, self.name, refs, options, self.env)

    def fsspec_fuse(
        self, workdir: Path, refs: Path, root: str
    ) -> contextlib.AbstractContextManager[Mount]:
        """Mount ``root`` of ``refs`` with ``fsspec.fuse`` in a child process."""
        shim = fusepy_shim(workdir)
        if shim is None:
            raise RuntimeError("fusepy is not installed (Debian package python3-fusepy)")
        mountpoint = fresh_mountpoint(workdir, f"fsspec-fuse-{self.name}")
        config = {
            "refs": str(refs),
            "protocol": self.protocol,
            "options": self.remote_options,
            "root": root,
            "mountpoint": str(mountpoint),
        }
        env = dict(self.env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [shim, env.get("PYTHONPATH", "")]))
        command = [sys.executable, "-c", FSSPEC_FUSE_CHILD, json.dumps(config)]
        return mount_child(command, mountpoint, env)

    def server_cpu_seconds(self) -> float | None:
        """The CPU time the server's processes have used so far (None without any)."""
        pids = self.server_pids()
        return sum(map(process_cpu_seconds, pids)) if pids else None

    def reference_fs(self, refs: Path) -> Any:
        """An in-process fsspec ``ReferenceFileSystem`` of ``refs``."""
        return fsspec.filesystem(
            "reference",
            fo=str(refs),
            remote_protocol=self.protocol,
            remote_options=self.remote_options,
            skip_instance_cache=True,
        )
