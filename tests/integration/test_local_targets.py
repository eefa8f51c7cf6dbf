"""Local targets that could hang a mount: special files, the mount itself, a hung filesystem.

A hung filesystem is ``tests.stuckfs``, a real FUSE filesystem whose reads never answer
(the ``stuck_target`` fixture).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Any

import pytest

from tests.support.mounting import mounted, read_errno, requires_fuse

pytestmark = [pytest.mark.fuse, requires_fuse]

DEADLINE = 15.0
"""Seconds within which something that must not hang has to be over (a loaded machine)."""

DATA = bytes(range(256)) * 16


def write_set(path: Path, refs: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({".zgroup": {"zarr_format": 2}, **refs}))
    return path


def timed_errno(path: Path) -> tuple[int | None, float]:
    started = time.monotonic()
    return read_errno(path), time.monotonic() - started


def test_targets_that_are_not_regular_files_are_eio_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "sock"))
        listener.listen()
        specials = {
            "fifo": str(fifo),
            "zero": "/dev/zero",
            "urandom": "/dev/urandom",
            "dir": str(tmp_path / "dir"),
            "sock": str(tmp_path / "sock"),
        }
        refs: dict[str, Any] = {}
        for name, path in specials.items():
            refs[f"whole/{name}"] = [path]
            refs[f"range/{name}"] = [path, 0, 10]
        refs["fine"] = [str(tmp_path / "fine.bin"), 0, 10]
        (tmp_path / "fine.bin").write_bytes(DATA)
        refs_path = write_set(tmp_path / "set" / "refs.json", refs)
        with mounted(refs_path, tmp_path / "mnt", "--timeout", "2s", "--retries", "1") as mount:
            for key in refs:
                if key == "fine":
                    continue
                failure, took = timed_errno(mount.path / key)
                assert failure == errno.EIO, key
                assert took < DEADLINE, key
                if key.startswith("whole/"):  # no size at all rather than a bogus 0
                    with pytest.raises(OSError, match="Input/output error") as caught:
                        os.stat(mount.path / key)
                    assert caught.value.errno == errno.EIO
            assert (mount.path / "fine").read_bytes() == DATA[:10]
            text = mount.log_text()
    for name, path in specials.items():
        if name != "sock":  # a socket cannot even be opened: the system says ENXIO
            assert (
                f"'range/{name}' ({path}): read failed: OSError: [Errno 22] not a regular file"
                in text
            )
        assert f"'range/{name}'" in text, name


def test_a_target_inside_the_mount_itself_is_refused(tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    (tmp_path / "alias").symlink_to(mountpoint)
    refs = {
        "inline": "hello",
        "direct": [str(mountpoint / "inline")],
        "link": [str(tmp_path / "alias" / "inline"), 0, 2],
        "relative": ["../mnt/inline", 0, 2],
        "loop": [str(mountpoint / "loop")],
    }
    refs_path = write_set(tmp_path / "set" / "refs.json", refs)
    with mounted(refs_path, mountpoint) as mount:
        for key in ("direct", "link", "relative", "loop"):
            failure, took = timed_errno(mount.path / key)
            assert failure == errno.EIO, key
            assert took < DEADLINE, key
        assert (mount.path / "inline").read_bytes() == b"hello"
        text = mount.log_text()
    assert text.count("inside the mount itself") >= 4


def test_a_hung_target_gives_eio_at_the_deadline_and_other_targets_still_read(
    tmp_path: Path, stuck_target: Path
) -> None:
    fine = tmp_path / "fine.bin"
    fine.write_bytes(DATA)
    stuck_keys = [f"stuck/{i}" for i in range(12)]  # more readers than one target's threads
    refs: dict[str, Any] = {
        key: [str(stuck_target), i * 8192, 4096] for i, key in enumerate(stuck_keys)
    }
    refs.update({f"fine/{i}": [str(fine), i * 256, 256] for i in range(16)})
    refs_path = write_set(tmp_path / "set" / "refs.json", refs)
    timeout, retries = 1.0, 1
    options = ("--timeout", f"{timeout:g}s", "--retries", str(retries))
    with mounted(refs_path, tmp_path / "mnt", *options) as mount:
        with ThreadPool(len(stuck_keys)) as pool:
            stuck = pool.map_async(timed_errno, [mount.path / key for key in stuck_keys])
            time.sleep(0.5)  # the stuck reads have taken their threads
            for i in range(16):  # other targets are read meanwhile
                started = time.monotonic()
                assert (mount.path / f"fine/{i}").read_bytes() == DATA[i * 256 : (i + 1) * 256]
                assert time.monotonic() - started < DEADLINE
            results = stuck.get(timeout=DEADLINE * 4)
        for key, (failure, took) in zip(stuck_keys, results, strict=True):
            assert failure == errno.EIO, key
            assert took < timeout * (retries + 1) + 4.0 + DEADLINE, key
        assert mount.process.poll() is None
        text = mount.log_text()
    assert f"key 'stuck/0' ({stuck_target})" in text
    assert mount.process.returncode == 0
