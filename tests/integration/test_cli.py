"""End-to-end behaviour of the ``refmount`` command: readiness, exit codes, signals, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.datasets import json_v0
from tests.support.mounting import is_mounted, mounted, refmount_command, requires_fuse, unmount

pytestmark = [pytest.mark.fuse, requires_fuse]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        refmount_command(*args), capture_output=True, text=True, timeout=timeout, check=False
    )


def wait_until_unmounted(path: Path, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while is_mounted(path):
        assert time.monotonic() < deadline, f"{path} is still mounted"
        time.sleep(0.05)


def test_background_mount_answers_as_soon_as_the_command_returns(
    tmp_path: Path, mount_dir: Path
) -> None:
    dataset = json_v0(tmp_path / "v0")
    result = run(str(dataset.refs), str(mount_dir))
    try:
        assert result.returncode == 0, result.stderr
        assert is_mounted(mount_dir)
        assert (mount_dir / "text").read_bytes() == dataset.expected["text"]
    finally:
        unmount(mount_dir)
    wait_until_unmounted(mount_dir)


def test_refs_from_standard_input_in_the_background(tmp_path: Path, mount_dir: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    base = str(dataset.refs.parent)
    document = dataset.refs.read_bytes()
    result = subprocess.run(
        refmount_command("--base", base, "-", str(mount_dir)),
        input=document,
        capture_output=True,
        timeout=60,
        check=False,
    )
    try:
        assert result.returncode == 0, result.stderr
        assert (mount_dir / "text").read_bytes() == dataset.expected["text"]
        assert (mount_dir / "whole").read_bytes() == dataset.expected["whole"]
    finally:
        unmount(mount_dir)
    wait_until_unmounted(mount_dir)
    refused = subprocess.run(
        refmount_command("-", str(mount_dir)), input=document, capture_output=True, check=False
    )
    assert refused.returncode == 2
    assert b"relative target path" in refused.stderr.splitlines()[-1]
    assert not is_mounted(mount_dir)


def test_sigterm_and_sigint_unmount_cleanly(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    for signum in (signal.SIGTERM, signal.SIGINT):
        mountpoint = tmp_path / f"mnt-{signum}"
        with mounted(dataset.refs, mountpoint) as mount:
            mount.process.send_signal(signum)
            assert mount.process.wait(timeout=15) == 0
            assert not is_mounted(mountpoint)
        assert "unmounting" in mount.log_text()


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"version": 2, "refs": {}}', "version"),
        (b'{"k": "base64:!!!x"}', "base64"),
        (b'{"version": 1, "templates": {"u": "a"}, "refs": {"k": ["{{u", 0, 1]}}', "k"),
        (b'{"k": ["data.bin", "1", 2]}', "offset"),
        (b'{"k": ["data.bin", 0, -5]}', "length"),
        (b'{"a//b": "x"}', "empty path component"),
    ],
)
def test_malformed_reference_file_exits_2_with_one_line(
    tmp_path: Path, mount_dir: Path, content: bytes, fragment: str
) -> None:
    refs = tmp_path / "bad.json"
    refs.write_bytes(content)
    result = run(str(refs), str(mount_dir))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("refmount: error: ")
    assert str(refs) in lines[0]
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr
    assert not is_mounted(mount_dir)


def test_debug_log_level_shows_the_traceback(tmp_path: Path, mount_dir: Path) -> None:
    refs = tmp_path / "bad.json"
    refs.write_text('{"version": 7}')
    result = run("--log-level", "debug", str(refs), str(mount_dir))
    assert result.returncode == 2
    assert "Traceback" in result.stderr


def test_missing_parquet_metadata_exits_2(tmp_path: Path, mount_dir: Path) -> None:
    refs = tmp_path / "refs.parq"
    (refs / "x").mkdir(parents=True)
    result = run(str(refs), str(mount_dir))
    assert result.returncode == 2
    assert ".zmetadata" in result.stderr


def test_missing_reference_file_and_mountpoint(tmp_path: Path, mount_dir: Path) -> None:
    result = run(str(tmp_path / "absent.json"), str(mount_dir))
    assert result.returncode == 2
    assert "absent.json" in result.stderr
    dataset = json_v0(tmp_path / "v0")
    result = run(str(dataset.refs), str(tmp_path / "no-such-dir"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"refmount: error: mountpoint {tmp_path / 'no-such-dir'} does not exist"
    ]  # checked before the set is loaded: no "loaded ..." line first


def test_skip_invalid_mounts_the_rest(tmp_path: Path) -> None:
    directory = tmp_path / "skip"
    directory.mkdir()
    (directory / "refs.json").write_text(json.dumps({"ok": "fine", "a//b": "x", "n": 5}))
    with mounted(directory / "refs.json", tmp_path / "mnt", "--skip-invalid") as mount:
        assert os.listdir(mount.path) == ["ok"]
    log = mount.log_text()
    assert "'a//b'" in log
    assert "'n'" in log


def test_stale_mountpoint_is_explained(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    mountpoint = tmp_path / "mnt"
    with mounted(dataset.refs, mountpoint) as mount:
        mount.process.send_signal(signal.SIGKILL)
        mount.process.wait(timeout=15)
        result = run(str(dataset.refs), str(mountpoint))
        assert result.returncode == 1
        assert "Transport endpoint is not connected" in result.stderr
        assert f"fusermount3 -u {mountpoint}" in result.stderr
        assert "-o auto_unmount" in result.stderr


def test_help_and_version() -> None:
    result = run("--help")
    assert result.returncode == 0
    for text in ("REFS", "MOUNTPOINT", "--cache-size", "allow_other", "exit status"):
        assert text in result.stdout
    version = run("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("refmount ")


def test_fuse_options_pass_through(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(
        dataset.refs,
        tmp_path / "mnt",
        "-o",
        f"allow_other,cache_size=64M,defaults,local_root={tmp_path / 'v0'}",
    ) as mount:
        with open("/proc/mounts") as mounts:
            line = next(m for m in mounts if m.split()[1] == str(mount.path))
        assert "fuse.refmount" in line
        assert "allow_other" in line
        assert " ro," in line


HOSTILE_CODE = """\
import pathlib
pathlib.Path(__file__).resolve().parent.joinpath("{marker}").write_text("imported")
raise SystemExit(99)
"""


def console_script() -> Path:
    """Return the installed ``refmount`` command of this environment (as a user runs it)."""
    script = Path(sys.executable).parent / "refmount"
    if not script.exists():
        pytest.skip("no refmount console script next to the interpreter")
    return script


@pytest.mark.parametrize("layout", ["module", "package"])
def test_the_background_daemon_never_imports_from_the_current_directory(
    tmp_path: Path, mount_dir: Path, layout: str
) -> None:
    dataset = json_v0(tmp_path / "v0")
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    marker = "imported-from-the-current-directory"
    if layout == "module":
        (hostile / "refmount.py").write_text(HOSTILE_CODE.format(marker=marker))
        markers = [hostile / marker]
    else:
        package = hostile / "refmount"
        (package / "cli").mkdir(parents=True)
        for name in ("__init__.py", "__main__.py", "cli/__init__.py", "cli/command.py"):
            (package / name).write_text(HOSTILE_CODE.format(marker=marker))
        markers = [hostile / marker, package / marker, package / "cli" / marker]
    try:
        result = subprocess.run(
            [str(console_script()), str(dataset.refs), str(mount_dir)],
            cwd=hostile,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert (mount_dir / "text").read_bytes() == dataset.expected["text"]
        assert not any(path.exists() for path in markers)
    finally:
        unmount(mount_dir)
    wait_until_unmounted(mount_dir)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("bogus_option", "unknown option(s): `-o bogus_option'"),
        ("uid=4294967295", "uid 4294967295 is out of range"),
        ("timeout=0", "timeout must be more than 0"),
    ],
)
def test_bad_options_stop_the_command_before_anything_is_read(
    tmp_path: Path, mount_dir: Path, options: str, words: str
) -> None:
    dataset = json_v0(tmp_path / "v0")
    for foreground in ((), ("-f",)):
        result = run(*foreground, "-o", options, str(dataset.refs), str(mount_dir))
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr  # no "loaded", no traceback
        assert lines[0].startswith("refmount: error: ")
        assert words in lines[0]
        assert not is_mounted(mount_dir)
