"""The disk cache on real mounts: a second mount (a new daemon) with the same ``--cache-dir``
reads every file with no ranged GET and the right bytes; two mounts share the directory at
once; a target rewritten between mounts is fetched again, never served stale; a corrupted
entry is fetched again; a directory that fails keeps the mount serving; stats count it.
HTTP targets on the local range server, and S3 targets on the local S3 server."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.datasets import target_bytes
from tests.support.mounting import mounted, refmount_command, requires_fuse
from tests.support.servers import RangeHTTPServer, S3Bucket

pytestmark = [pytest.mark.fuse, requires_fuse]

OLD = target_bytes(300_000, 71)
NEW = target_bytes(300_000, 72)
KEYS = {"a": (0, 1000), "b": (70_000, 5000), "c": (150_000, 140_000), "d": (299_000, 1000)}


def write_set(tmp_path: Path, url: str) -> Path:
    refs = tmp_path / "refs.json"
    refs.write_text(
        json.dumps({key: [url, start, length] for key, (start, length) in KEYS.items()})
    )
    return refs


def read_all(mountpoint: Path) -> dict[str, bytes]:
    return {key: (mountpoint / key).read_bytes() for key in KEYS}


def expected(data: bytes) -> dict[str, bytes]:
    return {key: data[start : start + length] for key, (start, length) in KEYS.items()}


def ranged_gets(server: RangeHTTPServer) -> int:
    return sum(1 for r in server.requests if r.method == "GET" and r.header("Range"))


@pytest.mark.http
def test_a_second_mount_reads_everything_from_the_disk(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_set(tmp_path, url)
    cache = tmp_path / "cache"
    with mounted(refs, tmp_path / "first", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path) == expected(OLD)
    assert ranged_gets(http_server) > 0
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in cache.iterdir())
    http_server.clear_requests()
    with mounted(refs, tmp_path / "second", "-o", f"cache_dir={cache}") as mount:
        assert read_all(mount.path) == expected(OLD)
        figures = json.loads((mount.path / ".refmount-stats").read_bytes())["disk_cache"]
        stats = subprocess.run(
            refmount_command("stats", str(mount.path)), capture_output=True, text=True, check=True
        ).stdout
    assert ranged_gets(http_server) == 0, http_server.requests  # the version asked, no data
    assert figures["hits"] >= len(KEYS)
    assert figures["misses"] == 0
    assert "disk hits" in stats


@pytest.mark.http
def test_a_target_rewritten_between_mounts_is_fetched_again(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_set(tmp_path, url)
    cache = tmp_path / "cache"
    with mounted(refs, tmp_path / "first", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path) == expected(OLD)
    http_server.add("t.bin", NEW)  # a new ETag and Last-Modified
    with mounted(refs, tmp_path / "second", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path) == expected(NEW)


@pytest.mark.http
def test_two_mounts_share_the_directory_at_once(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_set(tmp_path, url)
    cache = tmp_path / "cache"
    with (
        mounted(refs, tmp_path / "one", "--cache-dir", str(cache)) as one,
        mounted(refs, tmp_path / "two", "--cache-dir", str(cache)) as two,
    ):
        assert read_all(one.path) == expected(OLD)
        http_server.clear_requests()
        assert read_all(two.path) == expected(OLD)  # what the other mount wrote
        assert ranged_gets(http_server) == 0, http_server.requests


@pytest.mark.http
def test_a_corrupted_entry_is_fetched_again(tmp_path: Path, http_server: RangeHTTPServer) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_set(tmp_path, url)
    cache = tmp_path / "cache"
    with mounted(refs, tmp_path / "first", "--cache-dir", str(cache)) as mount:
        read_all(mount.path)
    (data_file,) = cache.glob("*.data")
    with open(data_file, "r+b") as file:
        file.seek(150_000)
        file.write(b"\xff" * 1000)
    (log_file,) = cache.glob("*.log")
    with open(log_file, "ab") as file:
        file.write(b"garbage that is no record")
    with mounted(refs, tmp_path / "second", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path) == expected(OLD)


@pytest.mark.http
def test_a_directory_that_fails_keeps_the_mount_serving(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_set(tmp_path, url)
    cache = tmp_path / "cache"
    with mounted(refs, tmp_path / "mnt", "--cache-dir", str(cache)) as mount:
        for entry in cache.iterdir():
            entry.unlink()
        cache.rmdir()  # vanished
        (tmp_path / "cache").write_bytes(b"")  # and something else in its place
        assert read_all(mount.path) == expected(OLD)
        warnings = [line for line in mount.log_text().splitlines() if "disk cache" in line]
        assert len(warnings) == 1, mount.log_text()


def test_a_directory_open_to_others_or_without_pins_is_refused(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"a": "inline"}))
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    (tmp_path / "mnt").mkdir()
    done = subprocess.run(
        refmount_command("-f", "--cache-dir", str(shared), str(refs), str(tmp_path / "mnt")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"refmount: error: --cache-dir: cache directory {shared}: others may use it "
        "(mode 777; chmod 700 it)"
    ]
    both = subprocess.run(
        refmount_command("--cache-dir", str(tmp_path / "c"), "--no-pin", str(refs), "m"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert both.returncode == 2
    assert "--cache-dir needs pinning" in both.stderr


@pytest.mark.s3
def test_s3_targets_are_read_from_the_disk_by_the_next_mount(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    url = s3_bucket.put("t.bin", OLD)
    refs = write_set(tmp_path, url)
    cache = tmp_path / "cache"
    options = ("-o", f"s3_endpoint_url={s3_bucket.endpoint_url}", "--cache-dir", str(cache))
    with mounted(refs, tmp_path / "first", *options) as mount:
        assert read_all(mount.path) == expected(OLD)
    with mounted(refs, tmp_path / "second", *options) as mount:
        assert read_all(mount.path) == expected(OLD)
        figures = json.loads((mount.path / ".refmount-stats").read_bytes())["disk_cache"]
    assert figures["hits"] >= len(KEYS)  # every read from the disk: no data asked of S3
    assert figures["misses"] == 0
    assert figures["bytes_written"] == 0


def refmount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        refmount_command(*args), capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.http
def test_a_warmed_cache_serves_a_mount_with_no_data_request(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_set(tmp_path, url)
    cache = tmp_path / "cache"
    some = refmount("cache", "warm", "--cache-dir", str(cache), str(refs), "a", "b")
    assert some.returncode == 0, some.stderr
    assert some.stdout.startswith("2 references, 6,000 bytes")
    every = refmount("cache", "warm", "--cache-dir", str(cache), str(refs))
    assert every.returncode == 0, every.stderr
    assert every.stdout.startswith("4 references, 147,000 bytes")
    http_server.clear_requests()
    with mounted(refs, tmp_path / "mnt", "--cache-dir", str(cache)) as mount:
        assert read_all(mount.path) == expected(OLD)
    assert ranged_gets(http_server) == 0, http_server.requests


@pytest.mark.http
def test_clearing_the_cache_under_a_mount_keeps_it_serving(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_set(tmp_path, url)
    cache = tmp_path / "cache"
    with mounted(refs, tmp_path / "mnt", "--cache-dir", str(cache)) as mount:
        assert (mount.path / "a").read_bytes() == expected(OLD)["a"]
        cleared = refmount("cache", "clear", str(cache))
        assert cleared.returncode == 0, cleared.stderr
        assert cleared.stdout.startswith("removed 1 cached targets")
        assert list(cache.iterdir()) == []
        assert read_all(mount.path) == expected(OLD)  # read from the network, kept anew
    assert len(list(cache.glob("*.data"))) == 1
    refused = refmount("cache", "clear", str(tmp_path / "missing"))
    assert refused.returncode == 1
    assert "No such file or directory" in refused.stderr
