"""End-to-end: the real CLI mounts generated reference sets; listings, sizes and bytes through
the kernel equal what fsspec (or the source data) says."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import fsspec
import pytest

from tests.support.datasets import Dataset, json_v0, json_v1, target_bytes, zarray
from tests.support.mounting import (
    Mount,
    mounted,
    refmount_command,
    requires_fuse,
    unmount,
)

pytestmark = [pytest.mark.fuse, requires_fuse]


def tree_of(root: Path) -> dict[str, bytes]:
    """Read every file below ``root`` through ordinary system calls."""
    found: dict[str, bytes] = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def check_sizes_match_bytes(mount: Mount, dataset: Dataset) -> None:
    for key, data in dataset.expected.items():
        assert (mount.path / key).stat().st_size == len(data), key


def test_json_v0_every_value_kind(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        assert tree_of(mount.path) == dataset.expected
        check_sizes_match_bytes(mount, dataset)
        assert sorted(os.listdir(mount.path / "x")) == [".zarray", "deep"]


def test_json_v0_bytes_equal_fsspec_cat(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    fs = fsspec.filesystem("reference", fo=str(dataset.refs), remote_protocol="file")
    # fsspec resolves relative URLs against the working directory; run it from the refs dir
    cwd = os.getcwd()
    os.chdir(dataset.refs.parent)
    try:
        with mounted(dataset.refs, tmp_path / "mnt") as mount:
            for key in dataset.expected:
                if key in (".zgroup", ".zattrs", "x/.zarray"):
                    continue  # fsspec re-serialises JSON objects with ujson when installed
                assert (mount.path / key).read_bytes() == fs.cat(key), key
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_json_v1_templates_and_gen(tmp_path: Path, compress: bool) -> None:
    dataset = json_v1(tmp_path / "v1", compress=compress)
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        assert tree_of(mount.path) == dataset.expected
        check_sizes_match_bytes(mount, dataset)


def test_pread_at_odd_offsets_and_past_the_end(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    whole = dataset.expected["whole"]
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        fd = os.open(mount.path / "whole", os.O_RDONLY)
        try:
            for offset, size in [(0, 1), (1, 4095), (4097, 131_073), (299_990, 100), (123, 0)]:
                assert os.pread(fd, size, offset) == whole[offset : offset + size]
            assert os.pread(fd, 10, len(whole)) == b""
            assert os.pread(fd, 10, len(whole) + 12345) == b""
        finally:
            os.close(fd)
        with open(mount.path / "absolute", "rb") as handle:
            handle.seek(4000)
            assert handle.read() == dataset.expected["absolute"][4000:]


def test_writes_are_refused_with_erofs(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:

        def open_for(name: str, flags: int) -> None:
            os.close(os.open(mount.path / name, flags, 0o644))

        attempts: list[Callable[[], object]] = [
            lambda: open_for("text", os.O_WRONLY),
            lambda: open_for("text", os.O_RDWR | os.O_APPEND),
            lambda: open_for("new", os.O_WRONLY | os.O_CREAT),
            lambda: os.mkdir(mount.path / "newdir"),
            lambda: os.unlink(mount.path / "text"),
            lambda: os.rename(mount.path / "text", mount.path / "t2"),
            lambda: os.chmod(mount.path / "text", 0o666),
            lambda: os.truncate(mount.path / "text", 0),
            lambda: os.symlink("text", mount.path / "link"),
            lambda: os.setxattr(mount.path / "text", "user.x", b"1"),
        ]
        for attempt in attempts:
            with pytest.raises(OSError, match="Read-only file system") as caught:
                attempt()
            assert caught.value.errno == errno.EROFS
        assert (mount.path / "text").read_bytes() == dataset.expected["text"]


def test_missing_names_are_enoent_and_stay_so(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        for _ in range(2):
            with pytest.raises(FileNotFoundError):
                (mount.path / "nope").stat()
        with pytest.raises(NotADirectoryError):
            (mount.path / "text" / "x").stat()


def test_extended_attributes_say_where_bytes_live(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt", "-o", "xattr") as mount:
        path = mount.path / "absolute"
        assert sorted(os.listxattr(path)) == [
            "user.refmount.kind",
            "user.refmount.length",
            "user.refmount.offset",
            "user.refmount.url",
        ]
        assert os.getxattr(path, "user.refmount.kind") == b"range"
        url = str(dataset.refs.parent / "data.bin").encode()
        assert os.getxattr(path, "user.refmount.url") == url
        assert os.getxattr(path, "user.refmount.offset") == b"1000"
        assert os.getxattr(path, "user.refmount.length") == b"4096"
        assert os.getxattr(mount.path / "whole", "user.refmount.kind") == b"whole"
        assert os.getxattr(mount.path / "text", "user.refmount.kind") == b"inline"


def test_without_xattrs_ls_l_asks_the_daemon_no_attribute_questions(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        for _ in range(2):
            listing = subprocess.run(
                ["ls", "-lR", str(mount.path)], capture_output=True, text=True, check=True
            )
            assert "absolute" in listing.stdout
        for name, error in (
            ("user.refmount.kind", errno.EOPNOTSUPP),
            ("security.selinux", errno.EOPNOTSUPP),
            ("system.posix_acl_access", errno.ENODATA),  # the kernel's ACL code: no ACL
        ):
            with pytest.raises(OSError, match=os.strerror(error)) as raised:
                os.getxattr(mount.path / "absolute", name)
            assert raised.value.errno == error, name
        with pytest.raises(OSError, match="not supported") as raised:
            os.listxattr(mount.path / "absolute")
        assert raised.value.errno == errno.EOPNOTSUPP
        for _ in range(3):
            with (mount.path / "text").open("rb") as file:
                assert file.read() == dataset.expected["text"]
        operations = json.loads((mount.path / ".refmount-stats").read_bytes())["operations"]
        # ENOSYS, once each: the kernel never sends them again on this connection
        assert operations["getxattr"]["count"] == 1
        assert operations["listxattr"]["count"] == 1
        assert operations["flush"]["count"] == 1


def test_stat_is_stable(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    mtime = dataset.refs.stat().st_mtime
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        first = {k: (mount.path / k).stat() for k in dataset.expected}
        inodes = {k: s.st_ino for k, s in first.items()}
        assert len(set(inodes.values())) == len(inodes)
        assert all(s.st_mtime == pytest.approx(mtime) for s in first.values())
        assert all(s.st_mode & 0o777 == 0o444 for s in first.values())
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        assert {k: (mount.path / k).stat().st_ino for k in dataset.expected} == inodes


def test_a_listing_gives_every_entry_its_own_attributes(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    sizes = {f"d/{n}": n * 700 for n in range(1, 40)}
    target = tmp_path / "t.bin"
    target.write_bytes(bytes(sum(sizes.values())))
    entries: dict[str, object] = {"d/sub/.zgroup": "{}"}
    offset = 0
    for key, size in sizes.items():
        entries[key] = [str(target), offset, size]
        offset += size
    refs.write_text(json.dumps({"version": 1, "refs": entries}))
    with mounted(refs, tmp_path / "mnt") as mount:
        # a fresh listing: the kernel takes each entry's attributes from READDIRPLUS
        listed = {entry.name: entry.stat() for entry in os.scandir(mount.path / "d")}
        assert stat.S_ISDIR(listed.pop("sub").st_mode)
        assert {f"d/{name}": s.st_size for name, s in listed.items()} == sizes
        assert all(stat.S_ISREG(s.st_mode) and s.st_nlink == 1 for s in listed.values())
        assert len({s.st_ino for s in listed.values()}) == len(sizes)
        assert all(s.st_blocks == (s.st_size + 511) // 512 for s in listed.values())


def test_target_shorter_than_declared_is_eio_and_the_mount_survives(tmp_path: Path) -> None:
    directory = tmp_path / "short"
    directory.mkdir()
    (directory / "small.bin").write_bytes(b"0123456789")
    refs = {"ok": ["small.bin", 0, 4], "short": ["small.bin", 5, 100], "gone": ["nope.bin", 0, 1]}
    (directory / "refs.json").write_text(json.dumps(refs))
    with mounted(directory / "refs.json", tmp_path / "mnt") as mount:
        assert (mount.path / "short").stat().st_size == 100
        for name in ("short", "gone"):
            with pytest.raises(OSError, match="Input/output error") as caught:
                (mount.path / name).read_bytes()
            assert caught.value.errno == errno.EIO
        assert (mount.path / "ok").read_bytes() == b"0123"
    log = mount.log_text()
    assert "'short'" in log
    assert "returned 5 bytes, expected 100" in log
    assert str(directory / "nope.bin") in log


@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
def test_parquet_set_written_by_kerchunk(tmp_path: Path) -> None:
    refs_to_dataframe = pytest.importorskip("kerchunk.df").refs_to_dataframe
    directory = tmp_path / "pq"
    directory.mkdir()
    data = target_bytes(10_000, 3)
    (directory / "data.bin").write_bytes(data)
    target = str(directory / "data.bin")
    refs = {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "x/.zarray": json.dumps(zarray([4, 6], [2, 3])),
        "x/0.0": [target, 0, 6],
        "x/0.1": [target, 6, 6],
        "x/1.0": [target, 100, 6],
        "z/.zarray": json.dumps(zarray([5], [1])),
        "z/0": base64_ref(b"\x00\x01"),
        "z/1": "rawtext",
        "z/2": [target, 12, 4],
        "z/4": [target, 1, 2],
    }
    refs_to_dataframe(refs, str(directory / "refs.parq"), record_size=3)
    with mounted(directory / "refs.parq", tmp_path / "mnt") as mount:
        assert sorted(os.listdir(mount.path)) == [".zgroup", ".zmetadata", "x", "z"]
        assert sorted(os.listdir(mount.path / "x")) == [".zarray", "0.0", "0.1", "1.0"]
        assert sorted(os.listdir(mount.path / "z")) == [".zarray", "0", "1", "2", "4"]
        assert (mount.path / "x/0.1").read_bytes() == data[6:12]
        assert (mount.path / "x/1.0").read_bytes() == data[100:106]
        assert (mount.path / "z/0").read_bytes() == b"\x00\x01"
        assert (mount.path / "z/1").read_bytes() == b"rawtext"
        assert (mount.path / "z/1").stat().st_size == 7
        assert (mount.path / "z/2").read_bytes() == data[12:16]
        for absent in ("x/1.1", "z/3", "z/5", "x/0.2", "x/0.0.0"):
            assert not (mount.path / absent).exists(), absent
        array = json.loads((mount.path / "x/.zarray").read_bytes())
        assert array["chunks"] == [2, 3]


def base64_ref(data: bytes) -> str:
    import base64

    return "base64:" + base64.b64encode(data).decode()


# ---------------------------------------------------------------------- the mountpoint


def mounts_at(path: Path) -> list[str]:
    """Return the filesystem types mounted on ``path``, from /proc/self/mountinfo."""
    with open("/proc/self/mountinfo") as mountinfo:
        lines = [line.split(" - ", 1) for line in mountinfo]
    return [tail.split()[0] for head, tail in lines if head.split()[4] == str(path)]


def daemon_pid(mountpoint: Path) -> int:
    """Return the PID of the background daemon this test started for ``mountpoint``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--foreground" in words and str(mountpoint).encode() in words:
            return int(entry.name)
    raise AssertionError(f"no refmount daemon for {mountpoint}")


def run_refmount(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command (in the background unless told -f); a generous deadline: no hang."""
    return subprocess.run(
        refmount_command(*args), capture_output=True, text=True, timeout=60, check=False
    )


WATCHER_ATTEMPTS = 3
"""fusermount3's watcher (libfuse 3.14) unmounts only if opening the mountpoint fails with
ENOTCONN; when it opens it while the kernel is still aborting the dead daemon's requests it
gets ECONNABORTED and leaves the mount (seen about once in 15 kills). A new mount and kill
is tried then; a mount left every time fails the test."""


def mount_and_kill_with_auto_unmount(refs: Path, mountpoint: Path, expected: bytes) -> bool:
    """Mount in the background with auto_unmount, read, SIGKILL the daemon; True if the mount
    went away (within a generous deadline)."""
    result = run_refmount("-o", "auto_unmount", str(refs), str(mountpoint))
    assert result.returncode == 0, result.stderr  # returned at all: the pipe is not held
    assert (mountpoint / "text").read_bytes() == expected
    os.kill(daemon_pid(mountpoint), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while mounts_at(mountpoint):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_auto_unmount_returns_and_a_killed_daemon_leaves_no_mount(
    tmp_path: Path, mount_dir: Path
) -> None:
    dataset = json_v0(tmp_path / "v0")
    try:
        for _ in range(WATCHER_ATTEMPTS):
            if mount_and_kill_with_auto_unmount(dataset.refs, mount_dir, dataset.expected["text"]):
                break
            unmount(mount_dir)  # the watcher's race: clear the stale mount, try again
        else:
            raise AssertionError(f"the mount outlived its daemon {WATCHER_ATTEMPTS} times")
    finally:
        unmount(mount_dir)


def test_a_second_mount_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        result = run_refmount("-f", str(dataset.refs), str(mount.path))
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"refmount: error: mountpoint {mount.path} already has a FUSE")
        assert "fuse.refmount from refmount" in lines[0]
        assert mounts_at(mount.path) == ["fuse.refmount"]
        assert "loaded" not in result.stderr  # refused before the set is read


def test_a_bind_mount_is_a_fine_mountpoint(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    source, target = tmp_path / "source", tmp_path / "bind"
    source.mkdir()
    target.mkdir()
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
    bind = mounts_at(target)
    try:
        assert len(bind) == 1
        result = run_refmount(str(dataset.refs), str(target))
        assert result.returncode == 0, result.stderr
        assert mounts_at(target)[-1] == "fuse.refmount"
        assert (target / "text").read_bytes() == dataset.expected["text"]
        subprocess.run(["fusermount3", "-u", str(target)], check=True)
        assert mounts_at(target) == bind  # the bind mount is left
    finally:
        if mounts_at(target)[-1] == "fuse.refmount":
            subprocess.run(["fusermount3", "-u", "-z", str(target)], check=False)
        subprocess.run(["umount", str(target)], check=True)


def test_a_non_empty_mountpoint_needs_nonempty(tmp_path: Path, mount_dir: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    (mount_dir / "hidden.txt").write_text("mine")
    result = run_refmount("-f", str(dataset.refs), str(mount_dir))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"refmount: error: mountpoint {mount_dir} is not empty: the mount would hide its "
        "files; give -o nonempty to mount over them anyway"
    ]
    assert mounts_at(mount_dir) == []
    with mounted(dataset.refs, mount_dir, "-o", "nonempty") as mount:
        assert (mount.path / "text").read_bytes() == dataset.expected["text"]
        assert not (mount.path / "hidden.txt").exists()
    assert (mount_dir / "hidden.txt").read_text() == "mine"


def test_gen_keys_kept_as_grids_read_and_list_as_fsspec_says(tmp_path: Path) -> None:
    target = tmp_path / "t.bin"
    target.write_bytes(os.urandom(4096))
    item = {
        "key": "nested/{{i}}/{{j}}",
        "url": "{{u}}",
        "offset": "{{ i * 700 + j * 13 }}",  # jinja: one offset kept per key
        "length": "{{j}}",  # plain substitution: computed when read
        "dimensions": {"i": {"stop": 5}, "j": {"stop": 6}},
    }
    flat = {**item, "key": "flat/{{i}}.{{j}}", "url": str(target), "offset": "{{i}}{{j}}"}
    document = {
        "version": 1,
        "templates": {"u": str(target)},
        "refs": {"flat/1.2": "replaced by gen", "flat/.zarray": "{}", "r": "x"},
        "gen": [item, flat],
    }
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps(document))
    fs = fsspec.filesystem("reference", fo=str(refs), simple_templates=False)
    expected = {key: fs.cat(key) for key in fs.references}
    assert expected["flat/1.2"] == target.read_bytes()[12:14]
    with mounted(refs, tmp_path / "mnt") as mount:
        assert tree_of(mount.path) == expected
        sizes = {e.name: e.stat().st_size for e in os.scandir(mount.path / "nested" / "4")}
        assert sizes == {str(j): j for j in range(6)}
