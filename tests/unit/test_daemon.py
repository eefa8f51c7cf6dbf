"""Tests of the daemon's pure helpers (no mounting)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pyfuse3
import pytest
import trio

from refmount.config import MountConfig
from refmount.daemon import (
    DEFAULT_FUSE_OPTIONS,
    HEAP_CHECK,
    HEAP_CHECK_MAX,
    _keep_resident_within,
    _stop_when_detached,
    check_local_targets,
    check_mountpoint,
    fuse_options,
    fuse_options_problem,
    load_references,
    mounts_on,
    prepare_targets,
)
from refmount.errors import MountError, ReferenceFormatError
from refmount.fuse.adapter import InFlight
from refmount.model import Inline, Range, Whole
from refmount.store.roots import LocalRoots
from refmount.store.store import Store
from tests.fakes import DictReferences


def test_fuse_options_add_the_users_to_the_defaults(tmp_path: Path) -> None:
    config = MountConfig("refs.json", tmp_path, fuse_options=("allow_other", "nosuid"))
    assert fuse_options(config) == {*DEFAULT_FUSE_OPTIONS, "allow_other", "nosuid"}


def test_rw_never_reaches_the_kernel(tmp_path: Path) -> None:
    # mount(8) passes "rw" unless told "ro"; with both in the set the winner would be arbitrary.
    config = MountConfig("refs.json", tmp_path, fuse_options=("rw", "dev", "suid"))
    options = fuse_options(config)
    assert "rw" not in options
    assert {"ro", "dev", "suid"} <= options


def test_check_mountpoint(tmp_path: Path) -> None:
    check_mountpoint(tmp_path)
    with pytest.raises(MountError, match="does not exist"):
        check_mountpoint(tmp_path / "absent")
    (tmp_path / "file").write_text("")
    with pytest.raises(MountError, match="not a directory"):
        check_mountpoint(tmp_path / "file")


def mountinfo_line(mountpoint: str, fstype: str, source: str) -> str:
    escaped = mountpoint.replace("\\", "\\134").replace(" ", "\\040")
    return f"36 35 0:42 / {escaped} rw,nosuid shared:1 - {fstype} {source} rw\n"


def test_mounts_on_reads_mountinfo_with_its_escapes(tmp_path: Path) -> None:
    mountpoint = tmp_path / "with space\\and slash"
    mountpoint.mkdir()
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        mountinfo_line("/", "ext4", "/dev/sda1")
        + mountinfo_line(str(mountpoint), "autofs", "systemd-1")
        + mountinfo_line(str(mountpoint) + "x", "fuse.other", "other")
        + mountinfo_line(str(mountpoint), "fuse.refmount", "refmount")
    )
    found = mounts_on(mountpoint, mountinfo)
    assert [(entry.fstype, entry.source) for entry in found] == [
        ("autofs", "systemd-1"),
        ("fuse.refmount", "refmount"),
    ]
    assert [entry.is_fuse for entry in found] == [False, True]
    assert mounts_on(mountpoint, tmp_path / "no-proc") == []


@pytest.mark.parametrize("fstype", ["fuse", "fuseblk", "fuse.sshfs", "fuse.refmount"])
def test_a_fuse_mount_there_is_refused(tmp_path: Path, fstype: str) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    mountinfo.write_text(mountinfo_line(str(mountpoint), fstype, "somefs"))
    with pytest.raises(MountError, match=rf"already has a FUSE filesystem .*{fstype} from somefs"):
        check_mountpoint(mountpoint, nonempty=True, mountinfo=mountinfo)


@pytest.mark.parametrize("fstype", ["autofs", "ext4", "tmpfs"])
def test_automount_and_bind_mounts_are_fine(tmp_path: Path, fstype: str) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    mountinfo.write_text(mountinfo_line(str(mountpoint), fstype, "/dev/sda1"))
    check_mountpoint(mountpoint, mountinfo=mountinfo)


def test_a_non_empty_mountpoint_needs_nonempty(tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    (mountpoint / ".hidden").write_text("x")
    with pytest.raises(MountError, match=r"is not empty: .* give -o nonempty"):
        check_mountpoint(mountpoint)
    check_mountpoint(mountpoint, nonempty=True)
    mountinfo = tmp_path / "mountinfo"  # an automount point's own entries are its business
    mountinfo.write_text(mountinfo_line(str(mountpoint), "autofs", "systemd-1"))
    check_mountpoint(mountpoint, mountinfo=mountinfo)


def test_local_targets_outside_the_roots_refuse_the_set(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.nc").write_bytes(b"a")
    (root / "escape").symlink_to("/etc/shadow")
    roots = LocalRoots([str(root)])
    fine = DictReferences(
        explicit={
            "inline": Inline(b"x"),
            "inside": Range(str(root / "a.nc"), 0, 1),
            "whole": Whole(f"file://{root}/a.nc"),
            "remote": Range("https://host/etc/shadow", 0, 1),
        }
    )
    check_local_targets(fine, roots)
    for key, url in (("z", "/etc/shadow"), ("link", str(root / "escape"))):
        refs = DictReferences(explicit={**fine.explicit, key: Range(url, 0, 1)})
        with pytest.raises(ReferenceFormatError) as caught:
            check_local_targets(refs, roots)
        assert caught.value.key == key
        message = str(caught.value)
        assert url in message
        assert "--local-root" in message
        assert "\n" not in message


def test_shared_mounts_check_targets_at_load_time(tmp_path: Path) -> None:
    (tmp_path / "refs.json").write_text(json.dumps({"k": ["/etc/shadow", 0, 4]}))
    refs = str(tmp_path / "refs.json")
    assert load_references(MountConfig(refs, tmp_path)).references.get("k") is not None
    shared = MountConfig(refs, tmp_path, fuse_options=("allow_root",), local_roots=(str(tmp_path),))
    with pytest.raises(ReferenceFormatError, match=r"'k'.*/etc/shadow"):
        load_references(shared)


def test_the_targets_of_the_first_keys_are_prepared(monkeypatch: pytest.MonkeyPatch) -> None:
    refs = DictReferences(
        explicit={
            ".zgroup": Inline(b"{}"),
            "a/0": Range("s3://bucket/a.nc", 0, 10),
            "a/1": Range("s3://bucket/a.nc", 10, 10),
            "b/0": Whole("http://127.0.0.1:1/b.bin"),
            "c/0": Range("s3://bucket/c.nc", 0, 10),
        }
    )
    store = Store()
    asked: list[set[str]] = []
    monkeypatch.setattr(store, "prepare", lambda urls: asked.append(set(urls)))
    prepare_targets(store, refs)
    assert asked == [{"s3://bucket/a.nc", "http://127.0.0.1:1/b.bin", "s3://bucket/c.nc"}]
    prepare_targets(store, refs, most=3)  # a sample: only the first keys
    assert asked[1] == {"s3://bucket/a.nc"}


@pytest.mark.parametrize(
    "options",
    [
        set(DEFAULT_FUSE_OPTIONS),
        {*DEFAULT_FUSE_OPTIONS, "allow_other", "auto_unmount", "noatime", "max_read=131072"},
    ],
)
def test_libfuse_accepts_what_it_knows(options: set[str]) -> None:
    assert fuse_options_problem(options) is None


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ("bogus", "unknown option(s): `-o bogus'"),
        ("nonempty", "unknown option(s): `-o nonempty'"),  # why refmount takes it out
        ("max_read=abc", "invalid parameter in option `max_read=abc'"),
        ("fsname=é", "not ASCII: fsname=é"),
    ],
)
def test_libfuse_refuses_what_it_does_not_know(option: str, words: str) -> None:
    assert fuse_options_problem({*DEFAULT_FUSE_OPTIONS, option}) == words


async def test_a_detached_mount_stops_serving_after_answering_what_is_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device = os.makedev(0, 4242)
    line = "77 1 0:4242 / /mnt rw,nosuid - fuse.refmount refmount ro\n"
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n" + line)
    terminated: list[int] = []
    requests = InFlight()
    monkeypatch.setattr(pyfuse3, "terminate", lambda: terminated.append(len(requests)))
    errnos: list[int] = []

    async def in_flight() -> None:
        try:
            await requests.run(trio.sleep_forever)
        except pyfuse3.FUSEError as error:
            errnos.append(error.errno)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(in_flight)
            nursery.start_soon(_stop_when_detached, device, requests, mountinfo, 0.01)
            await trio.sleep(0.1)
            assert not terminated  # still mounted: serving goes on
            mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    assert errnos == [errno.EIO]
    assert terminated == [0]  # after the request in flight was answered


class OverBound:
    """A resident bound that records when it is looked at and says whether it trimmed."""

    def __init__(self, clock: trio.testing.MockClock, answers: list[bool]) -> None:
        self.clock = clock
        self.answers = answers
        self.times: list[float] = []

    def enforce(self) -> bool:  # called in a worker thread
        self.times.append(self.clock.current_time())
        return self.answers.pop(0) if self.answers else False


async def test_the_resident_set_is_looked_at_less_often_while_trimming_does_not_help(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0.05  # real seconds: a worker thread's call ends first
    bound = OverBound(mock_clock, [True] * 6 + [False, False])
    with trio.move_on_after(HEAP_CHECK * (1 + 2 + 4 + 8 + 16) + 2 * HEAP_CHECK_MAX + 1):
        await _keep_resident_within(bound)  # type: ignore[arg-type]
    gaps = [round(b - a, 3) for a, b in zip(bound.times, bound.times[1:], strict=False)]
    # 0.5 s apart at first; doubled after each trim, up to 8 s; back to 0.5 s when under
    assert bound.times[0] == HEAP_CHECK
    assert gaps[:7] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 0.5]
