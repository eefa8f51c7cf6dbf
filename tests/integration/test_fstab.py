"""mount(8) and fstab: ``mount -t fuse.refmount`` and ``mount -T FSTAB`` run refmount for real.

util-linux mount runs ``/sbin/mount.fuse3 SRC MNT -o OPTS -t fuse.refmount``, which runs
``/bin/sh -c 'refmount' 'SRC' 'MNT' '-o' 'OPTS'``. mount(8) clears ``PATH`` first, so the
shell finds ``refmount`` on its built-in path (``/usr/local/sbin:/usr/local/bin:...``), never
in a virtualenv. Each test therefore runs in a private mount namespace (``unshare -m``) where
a shim that starts this environment's refmount is bind-mounted over ``/usr/local/sbin``:
nothing of it, and no FUSE mount, is ever visible outside that namespace.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.datasets import Dataset, json_v0
from tests.support.mounting import requires_fuse

ROOT = Path(__file__).parents[2]
SHIM_DIRECTORY = "/usr/local/sbin"
"""First on the path that ``/bin/sh`` uses without ``PATH``; usually empty."""

KEYS = ("text", "b64", "whole", "relative_dot", "x/deep/nested/c3")


def _mount_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "mount -t/-T for a FUSE type needs root (users need entries in /etc/fstab)"
    for tool in ("mount", "umount", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not any(os.path.exists(f"/sbin/mount.{name}") for name in ("fuse", "fuse3")):
        return "no /sbin/mount.fuse (Debian package fuse3)"
    if not os.path.isdir(SHIM_DIRECTORY):
        return f"no {SHIM_DIRECTORY} to put a refmount shim on"
    probe = ["unshare", "--mount", "--propagation", "private", "true"]
    if subprocess.run(probe, capture_output=True, check=False, timeout=30).returncode != 0:
        return "cannot create a mount namespace (unshare -m)"
    return None


_reason = _mount_unavailable()
pytestmark = [
    pytest.mark.fuse,
    requires_fuse,
    pytest.mark.skipif(_reason is not None, reason=_reason or ""),
]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _mount_line(mountpoint: str) -> str | None:
    with open("/proc/mounts") as mounts:
        return next((line for line in mounts if line.split()[1] == mountpoint), None)


def _daemons(mountpoint: str) -> list[int]:
    """PIDs of the refmount processes serving ``mountpoint`` (its path is in their argv)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"refmount" in argv and mountpoint.encode() in argv:
                found.append(int(entry))
    return found


def _run(command: list[str]) -> dict[str, Any]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    return {"status": result.returncode, "output": result.stdout + result.stderr}


def inside_namespace(request_file: str) -> None:
    """Run in the private namespace: shim, mount, read, unmount; write what happened."""
    request = json.loads(Path(request_file).read_text())
    mountpoint: str = request["mountpoint"]
    result: dict[str, Any] = {}
    subprocess.run(["mount", "--bind", request["shim"], SHIM_DIRECTORY], check=True)
    for installed in ("/usr/local/bin/refmount", "/usr/bin/refmount"):
        if os.path.exists(installed):  # never run an installed refmount instead of this one
            shim = os.path.join(request["shim"], "refmount")
            subprocess.run(["mount", "--bind", shim, installed], check=True)
    try:
        result["mount"] = _run(request["mount"])
        result["mount_line"] = _mount_line(mountpoint)
        if result["mount_line"] is not None:
            result["daemons"] = _daemons(mountpoint)
            result["listing"] = sorted(os.listdir(mountpoint))
            result["digests"] = {
                key: _digest(Path(mountpoint, key).read_bytes()) for key in request["keys"]
            }
            result["umount"] = _run(["umount", mountpoint])
            result["mounted_after_umount"] = _mount_line(mountpoint) is not None
            deadline = time.monotonic() + 15
            while _daemons(mountpoint) and time.monotonic() < deadline:
                time.sleep(0.05)
            result["daemons_left"] = _daemons(mountpoint)
    finally:
        if _mount_line(mountpoint) is not None:
            subprocess.run(["fusermount3", "-u", "-z", mountpoint], check=False)
        for pid in _daemons(mountpoint):  # ours: started by the mount above
            os.kill(pid, signal.SIGKILL)
        Path(request["result"]).write_text(json.dumps(result))


def mount_in_namespace(tmp_path: Path, mount: list[str], mountpoint: Path) -> dict[str, Any]:
    """Run ``mount`` (a mount(8) command line) in a private mount namespace and report."""
    shim = tmp_path / "shim"
    shim.mkdir()
    script = shim / "refmount"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -m refmount "$@"\n')
    script.chmod(0o755)
    request = tmp_path / "request.json"
    outcome = tmp_path / "result.json"
    request.write_text(
        json.dumps(
            {
                "shim": str(shim),
                "mount": mount,
                "mountpoint": str(mountpoint),
                "keys": KEYS,
                "result": str(outcome),
            }
        )
    )
    code = (
        "import sys; from tests.integration.test_fstab import inside_namespace; "
        "inside_namespace(sys.argv[1])"
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = ["unshare", "--mount", "--propagation", "private"]
    command += [sys.executable, "-c", code, str(request)]
    child = subprocess.run(
        command, capture_output=True, text=True, timeout=180, cwd=ROOT, env=environment
    )
    assert child.returncode == 0, child.stdout + child.stderr
    result: dict[str, Any] = json.loads(outcome.read_text())
    return result


def assert_served_and_unmounted(result: dict[str, Any], dataset: Dataset, log: Path) -> None:
    details = f"{result}\n{log.read_text() if log.exists() else 'no log'}"
    assert result["mount"]["status"] == 0, details
    line = result["mount_line"]
    assert line is not None, details
    source, _, fstype, options, *_ = line.split()
    assert (source, fstype) == ("refmount", "fuse.refmount")
    assert "ro" in options.split(",")
    assert "allow_other" in options.split(",")
    assert len(result["daemons"]) == 1, details
    assert ".zgroup" in result["listing"]
    assert result["digests"] == {key: _digest(dataset.expected[key]) for key in KEYS}
    assert result["umount"]["status"] == 0, details
    assert not result["mounted_after_umount"]
    assert result["daemons_left"] == [], details


def test_mount_t_fuse_refmount(tmp_path: Path, mount_dir: Path) -> None:
    # No "ro": mount(8) then passes "rw,dev,suid"; refmount ignores them and stays read-only,
    # nosuid and nodev (libfuse's defaults).
    dataset = json_v0(tmp_path / "v0")
    log = tmp_path / "daemon.log"
    options = (
        f"allow_other,local_root={dataset.refs.parent},cache_size=64M,timeout=5s,"
        f"log_level=debug,log_file={log}"
    )
    mount = ["mount", "-t", "fuse.refmount", str(dataset.refs), str(mount_dir), "-o", options]
    result = mount_in_namespace(tmp_path, mount, mount_dir)
    assert_served_and_unmounted(result, dataset, log)
    kernel_options = result["mount_line"].split()[3].split(",")
    assert "rw" not in kernel_options
    assert {"nosuid", "nodev"} <= set(kernel_options)


def test_fstab_line(tmp_path: Path, mount_dir: Path) -> None:
    dataset = json_v0(tmp_path / "refs dir")  # a space: written \040 in fstab
    refs = json.loads(dataset.refs.read_text())
    refs["bad//key"] = "x"  # mounts only because skip_invalid reaches refmount
    dataset.refs.write_text(json.dumps(refs))
    log = tmp_path / "daemon.log"
    source = str(dataset.refs).replace(" ", "\\040")
    options = [
        "ro",
        "allow_other",
        "local_root=" + str(dataset.refs.parent).replace(" ", "\\040"),
        "cache_size=64M",
        "skip_invalid",
        f"log_file={log}",
        "noauto",
        "nofail",
        "_netdev",
        "x-systemd.automount",
        "x-systemd.after=network-online.target",
        "comment=refmount",
        "nosuid",
        "nodev",
    ]
    fstab = tmp_path / "fstab"
    fstab.write_text(f"# test\n{source} {mount_dir} fuse.refmount {','.join(options)} 0 0\n")
    result = mount_in_namespace(tmp_path, ["mount", "-T", str(fstab), str(mount_dir)], mount_dir)
    assert_served_and_unmounted(result, dataset, log)
    kernel_options = result["mount_line"].split()[3].split(",")
    assert {"nosuid", "nodev"} <= set(kernel_options)
    assert "'bad//key'" in result["mount"]["output"]  # warned before going to the background
