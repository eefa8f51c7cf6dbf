"""The disk cache's hard cases on real mounts, each served right: an entry whose data file
and log were truncated is fetched again, then kept again; a cache directory on a full
filesystem (a tmpfs of 512 KiB) keeps the mount serving every file with one warning; the
directory stays within its size plus the documented hundredth under many targets read at
once; a daemon killed (SIGKILL) while it writes leaves nothing that the next mount serves
wrong. HTTP targets on the local range server."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from refmount.store.disk_entry import LOG_START, PIECE, RECORD_SIZE
from tests.support.datasets import target_bytes
from tests.support.mounting import mounted, requires_fuse
from tests.support.servers import RangeHTTPServer

pytestmark = [pytest.mark.fuse, pytest.mark.http, requires_fuse]

WAIT = 60.0
"""Seconds a test waits at most for the cache to be written (a bound, not a measure)."""


def serve(server: RangeHTTPServer, count: int, size: int) -> dict[str, bytes]:
    """Serve ``count`` targets of ``size`` bytes; return each one's bytes by key."""
    return {f"t{index}": target_bytes(size, 100 + index) for index in range(count)}


def write_set(tmp_path: Path, server: RangeHTTPServer, targets: dict[str, bytes]) -> Path:
    """A set with one key per target, the whole target (an explicit range)."""
    refs = {key: [server.add(f"{key}.bin", data), 0, len(data)] for key, data in targets.items()}
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(refs))
    return path


def read_all(mountpoint: Path, keys: list[str]) -> dict[str, bytes]:
    return {key: (mountpoint / key).read_bytes() for key in keys}


def ranged_gets(server: RangeHTTPServer) -> int:
    return sum(1 for r in server.requests if r.method == "GET" and r.header("Range"))


def disk_figures(mountpoint: Path) -> dict[str, int]:
    figures: dict[str, int] = json.loads((mountpoint / ".refmount-stats").read_bytes())[
        "disk_cache"
    ]
    return figures


def allocated(directory: Path) -> int:
    """Bytes the directory's files take on disk (what the bound is about)."""
    return sum(path.lstat().st_blocks * 512 for path in directory.iterdir())


def test_a_truncated_entry_is_fetched_again_and_kept_again(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    targets = serve(http_server, 1, 300_000)
    refs = write_set(tmp_path, http_server, targets)
    cache = tmp_path / "cache"
    with mounted(refs, tmp_path / "first", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path, ["t0"]) == targets
    (data_file,) = cache.glob("*.data")
    (log_file,) = cache.glob("*.log")
    os.truncate(data_file, 100_000)  # pieces 2 to 4 gone, piece 1 cut
    assert log_file.stat().st_size >= LOG_START + 2 * RECORD_SIZE
    os.truncate(log_file, LOG_START + RECORD_SIZE + RECORD_SIZE // 2)  # a record torn
    http_server.clear_requests()
    with mounted(refs, tmp_path / "second", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path, ["t0"]) == targets
    assert ranged_gets(http_server) > 0  # what was lost is fetched again
    http_server.clear_requests()
    with mounted(refs, tmp_path / "third", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path, ["t0"]) == targets
        assert disk_figures(mount.path)["misses"] == 0
    assert ranged_gets(http_server) == 0, http_server.requests  # and kept again


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path``, ``0700`` and this user's; always unmounted."""
    path.mkdir()
    options = f"size={size},mode=0700,uid={os.geteuid()},gid={os.getegid()}"
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_disk_keeps_the_mount_serving_with_one_warning(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    targets = serve(http_server, 8, 300_000)  # 2.4 MB for 512 KiB
    refs = write_set(tmp_path, http_server, targets)
    with (
        small_tmpfs(tmp_path / "cache", "512k") as cache,
        mounted(
            refs, tmp_path / "mnt", "--cache-dir", str(cache), "--cache-dir-size", "1G"
        ) as mount,
    ):
        assert read_all(mount.path, list(targets)) == targets
        figures = disk_figures(mount.path)
        http_server.clear_requests()
        assert read_all(mount.path, list(targets)) == targets  # again, some from the disk
        warnings = [line for line in mount.log_text().splitlines() if "disk cache" in line]
    assert figures["errors"] > 0
    assert len(warnings) == 1, warnings
    assert "No space left on device" in warnings[0]


def test_the_directory_stays_within_its_size_under_many_targets(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    size = 2 * 1024 * 1024
    targets = serve(http_server, 48, 200_000)  # 9.6 MB through a 2 MiB cache
    refs = write_set(tmp_path, http_server, targets)
    cache = tmp_path / "cache"
    keys = list(targets)
    failures: list[str] = []

    def reader(start: int) -> None:
        for key in keys[start:] + keys[:start]:
            if (mount.path / key).read_bytes() != targets[key]:
                failures.append(key)

    with mounted(
        refs, tmp_path / "mnt", "--cache-dir", str(cache), "-o", f"cache_dir_size={size}"
    ) as mount:
        for _ in range(2):  # the second pass reads targets evicted meanwhile
            threads = [threading.Thread(target=reader, args=(n * 12,)) for n in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        figures = disk_figures(mount.path)
    assert failures == []
    assert figures["evictions"] > 0
    assert figures["bytes_written"] > 4 * size
    assert 0 < allocated(cache) <= size + size // 100


def records(directory: Path) -> list[int]:
    """How many records each entry's log holds (torn ones counted down)."""
    return [
        max(0, path.stat().st_size - LOG_START) // RECORD_SIZE for path in directory.glob("*.log")
    ]


def test_a_daemon_killed_while_writing_leaves_nothing_served_wrong(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    targets = serve(http_server, 16, 4_000_000)
    refs = write_set(tmp_path, http_server, targets)
    cache = tmp_path / "cache"
    keys = list(targets)
    whole = -(-4_000_000 // PIECE)

    def reader(key: str) -> None:
        with contextlib.suppress(OSError):  # the daemon is killed under it
            (mount.path / key).read_bytes()

    with mounted(refs, tmp_path / "first", "--cache-dir", str(cache)) as mount:
        threads = [threading.Thread(target=reader, args=(key,)) for key in keys]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + WAIT
        while not any(records(cache)) and time.monotonic() < deadline:
            time.sleep(0.002)
        mount.process.send_signal(signal.SIGKILL)
        mount.process.wait()
        for thread in threads:
            thread.join()
    kept = records(cache)
    assert any(kept)
    assert sum(1 for count in kept if count == whole) < len(keys)  # killed while writing
    with mounted(refs, tmp_path / "second", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path, keys) == targets
        figures = disk_figures(mount.path)
    assert figures["bytes_read"] > 0, figures  # what the killed daemon kept was used
