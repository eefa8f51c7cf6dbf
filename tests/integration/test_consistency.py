"""Version pinning on real mounts: a target that changes while mounted gives EIO, never a mix
of two versions; HTTP, S3 and local targets, and ``--no-pin``."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from refmount.store.store import PIN_RECHECK_SECONDS
from tests.support.datasets import target_bytes
from tests.support.mounting import Mount, mounted, read_errno, requires_fuse
from tests.support.servers import RangeHTTPServer, S3Bucket, etag_of

pytestmark = [pytest.mark.fuse, requires_fuse]

OLD = target_bytes(50_000, 51)
NEW = target_bytes(50_000, 52)


def write_refs(path: Path, refs: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(refs))
    return path


def two_keys(url: str) -> dict[str, Any]:
    """Two keys on one target, read separately (each is fetched by its own request)."""
    return {"first": [url, 0, 1000], "second": [url, 20_000, 1000], "whole": [url]}


def changed_lines(mount: Mount, key: str) -> list[str]:
    return [
        line
        for line in mount.log_text().splitlines()
        if "ERROR" in line and f"'{key}'" in line and "changed since its first use" in line
    ]


@pytest.mark.http
def test_an_http_target_that_changes_gives_eio_not_a_mix(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_refs(tmp_path / "refs.json", two_keys(url))
    with mounted(refs, tmp_path / "mnt") as mount:
        assert (mount.path / "whole").stat().st_size == len(OLD)
        assert (mount.path / "first").read_bytes() == OLD[:1000]
        # the size and the version came from one HEAD; the read carried the version
        assert http_server.count("HEAD") == 1, http_server.requests
        gets = [r for r in http_server.requests if r.method == "GET"]
        assert {r.header("If-Match") for r in gets} == {etag_of(OLD)}
        http_server.add("t.bin", NEW)
        assert read_errno(mount.path / "second") == errno.EIO
        assert read_errno(mount.path / "second") == errno.EIO  # stays refused: no retry, no mix
        assert (mount.path / "first").read_bytes() == OLD[:1000]  # already read: old version
    lines = changed_lines(mount, "second")
    assert lines, mount.log_text()[-3000:]
    assert url in lines[0]
    assert etag_of(OLD) in lines[0]
    assert etag_of(NEW) in lines[0]
    assert "attempts" not in lines[0]
    assert not [line for line in mount.log_text().splitlines() if "retrying" in line]


@pytest.mark.http
def test_no_pin_sends_no_conditions_and_serves_the_new_bytes(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    url = http_server.add("t.bin", OLD)
    refs = write_refs(tmp_path / "refs.json", {"first": [url, 0, 1000], "second": [url, 20_000, 9]})
    with mounted(refs, tmp_path / "mnt", "--no-pin") as mount:
        assert (mount.path / "first").read_bytes() == OLD[:1000]
        http_server.add("t.bin", NEW)
        assert (mount.path / "second").read_bytes() == NEW[20_000:20_009]
    assert http_server.count("HEAD") == 0  # ranges only: nothing asked besides the reads
    assert all(r.header("If-Match") is None for r in http_server.requests)


def test_a_local_target_that_changes_gives_eio(tmp_path: Path) -> None:
    target = tmp_path / "t.bin"
    target.write_bytes(OLD)
    os.utime(target, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    refs = write_refs(tmp_path / "refs.json", two_keys(str(target)))
    with mounted(refs, tmp_path / "mnt") as mount:
        assert (mount.path / "first").read_bytes() == OLD[:1000]
        target.write_bytes(NEW)  # same size, new mtime
        assert read_errno(mount.path / "second") == errno.EIO
    lines = changed_lines(mount, "second")
    assert lines, mount.log_text()[-3000:]
    assert str(target) in lines[0]
    assert "1600000000000000000ns" in lines[0]


def test_a_local_target_with_no_pin_is_not_checked(tmp_path: Path) -> None:
    target = tmp_path / "t.bin"
    target.write_bytes(OLD)
    refs = write_refs(tmp_path / "refs.json", two_keys(str(target)))
    with mounted(refs, tmp_path / "mnt", "-o", "no_pin") as mount:
        assert (mount.path / "first").read_bytes() == OLD[:1000]
        target.write_bytes(NEW)
        assert (mount.path / "second").read_bytes() == NEW[20_000:21_000]


@pytest.mark.s3
@pytest.mark.slow
def test_an_s3_target_that_changes_gives_eio_after_the_recheck_interval(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    url = s3_bucket.put("t.bin", OLD)
    refs = write_refs(
        tmp_path / "refs.json",
        {"first": [url, 0, 1000], "second": [url, 20_000, 1000], "third": [url, 40_000, 10]},
    )
    option = f"s3_endpoint_url={s3_bucket.endpoint_url}"
    with mounted(refs, tmp_path / "mnt", "-o", option) as mount:
        assert (mount.path / "first").read_bytes() == OLD[:1000]
        s3_bucket.put("t.bin", NEW)
        time.sleep(PIN_RECHECK_SECONDS + 0.5)
        assert read_errno(mount.path / "second") == errno.EIO
        assert read_errno(mount.path / "third") == errno.EIO
    lines = changed_lines(mount, "second")
    assert lines, mount.log_text()[-3000:]
    assert url in lines[0]
    assert "ETag" in lines[0]
