"""Pins for a cluster on real targets: ``refmount pin`` records every target's version, a
mount made later with ``--pins`` serves those versions or EIO (never the target's new bytes),
and ``refmount check --pins`` names what changed. HTTP and local targets."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.datasets import target_bytes
from tests.support.mounting import mounted, read_errno, refmount_command, requires_fuse
from tests.support.servers import RangeHTTPServer, etag_of

pytestmark = [pytest.mark.http]

OLD = target_bytes(50_000, 61)
NEW = target_bytes(50_000, 62)


def make_set(tmp_path: Path, http_server: RangeHTTPServer) -> tuple[Path, Path, str]:
    """Write a set of two HTTP targets and one local one; return it, the local file, a URL."""
    local = tmp_path / "local.bin"
    local.write_bytes(OLD)
    os.utime(local, ns=(1_700_000_000_000_000_000,) * 2)
    first = http_server.add("a.bin", OLD)
    second = http_server.add("b.bin", OLD)
    refs: dict[str, Any] = {
        "a": [first, 0, 1000],
        "b": [second, 1000, 1000],
        "l": [str(local), 2000, 1000],
    }
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(refs))
    return path, local, first


def refmount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        refmount_command(*args), capture_output=True, text=True, timeout=60, check=False
    )


def pin(refs: Path, destination: Path) -> dict[str, Any]:
    done = refmount("pin", str(refs))
    assert done.returncode == 0, done.stderr
    destination.write_text(done.stdout)
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_pin_records_what_a_mount_would_pin_and_the_same_bytes_twice(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    refs, local, first = make_set(tmp_path, http_server)
    document = pin(refs, tmp_path / "pins.json")
    assert document["refmount_pins"] == 1
    assert document["refs"] == str(refs)
    targets = document["targets"]
    assert targets[first]["etag"] == etag_of(OLD)
    assert targets[first]["size"] == len(OLD)
    assert targets[str(local)] == {
        "etag": None,
        "modified": "1700000000000000000ns",
        "size": len(OLD),
    }
    assert len(targets) == 3
    assert refmount("pin", str(refs)).stdout == (tmp_path / "pins.json").read_text()


def test_pin_names_a_target_it_cannot_ask_and_fails(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    refs, _, _ = make_set(tmp_path, http_server)
    http_server.remove("b.bin")
    done = refmount("pin", str(refs))
    assert done.returncode == 2
    assert set(json.loads(done.stdout)["targets"]) == {
        http_server.url_for("a.bin"),
        str(refs.parent / "local.bin"),
    }
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "key 'b'" in lines[0]
    assert "b.bin" in lines[0]


def test_check_pins_names_each_target_changed_since(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    refs, local, first = make_set(tmp_path, http_server)
    pins = tmp_path / "pins.json"
    pin(refs, pins)
    same = refmount("check", "--pins", str(pins), str(refs))
    assert same.returncode == 0, same.stdout + same.stderr
    http_server.add("a.bin", NEW)
    local.write_bytes(NEW)
    changed = refmount("check", "--pins", str(pins), str(refs))
    assert changed.returncode == 2
    assert f"{first} changed since {pins} was recorded" in changed.stdout
    assert f"{local} changed since {pins} was recorded" in changed.stdout
    assert "b.bin changed" not in changed.stdout


@pytest.mark.fuse
@requires_fuse
def test_a_mount_with_pins_serves_the_recorded_versions_or_eio(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    refs, local, first = make_set(tmp_path, http_server)
    pins = tmp_path / "pins.json"
    pin(refs, pins)
    with mounted(refs, tmp_path / "before", "--pins", str(pins)) as mount:
        assert (mount.path / "a").read_bytes() == OLD[:1000]
        assert (mount.path / "l").read_bytes() == OLD[2000:3000]
    # the targets change; a mount made now (another node, later) must not serve them
    http_server.add("a.bin", NEW)
    local.write_bytes(NEW)
    with mounted(refs, tmp_path / "after", "-o", f"pins={pins}") as mount:
        assert read_errno(mount.path / "a") == errno.EIO
        assert read_errno(mount.path / "l") == errno.EIO
        assert (mount.path / "b").read_bytes() == OLD[1000:2000]  # unchanged: served
        failures = [
            line for line in mount.log_text().splitlines() if f"since {pins} was recorded" in line
        ]
        assert any("'a'" in line and first in line and etag_of(NEW) in line for line in failures)
        assert any("'l'" in line and str(local) in line for line in failures)
    # without the pins, a new mount pins what it meets first: the new versions
    with mounted(refs, tmp_path / "unpinned") as mount:
        assert (mount.path / "a").read_bytes() == NEW[:1000]


@pytest.mark.fuse
@requires_fuse
def test_a_target_missing_from_the_pins_is_pinned_at_first_use_with_one_warning(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    refs, _, first = make_set(tmp_path, http_server)
    pins = tmp_path / "pins.json"
    document = pin(refs, pins)
    del document["targets"][first]
    del document["targets"][http_server.url_for("b.bin")]
    pins.write_text(json.dumps(document))
    with mounted(refs, tmp_path / "mnt", "--pins", str(pins)) as mount:
        assert (mount.path / "a").read_bytes() == OLD[:1000]
        assert (mount.path / "b").read_bytes() == OLD[1000:2000]
        warnings = [
            line for line in mount.log_text().splitlines() if "not in the pins file" in line
        ]
        assert len(warnings) == 1, mount.log_text()


def test_a_malformed_pins_file_stops_the_mount_in_one_line(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"a": "inline"}))
    pins = tmp_path / "pins.json"
    pins.write_text('{"refmount_pins": 1, "targets": {"u": {"size": "big"}}}')
    (tmp_path / "mnt").mkdir()
    done = refmount("-f", "--pins", str(pins), str(refs), str(tmp_path / "mnt"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"refmount: error: {pins}: target u: size must be a non-negative integer or null"
    ]
    both = refmount("-f", "--pins", str(pins), "--no-pin", str(refs), str(tmp_path / "mnt"))
    assert both.returncode == 2
    assert "--pins and --no-pin exclude each other" in both.stderr
