"""The DaemonSet's container, run for real on this host with the checkout's refmount.

Its start script must clear a stale mount left by a killed container and mount; its
readiness probe must fail until the mount answers and pass after; its ``preStop`` must
unmount, after which refmount exits with status 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.mounting import (
    MOUNT_TIMEOUT,
    is_mounted,
    read_errno,
    refmount_command,
    requires_fuse,
    unmount,
)

pytestmark = [pytest.mark.fuse, requires_fuse]

ROOT = Path(__file__).parents[2]
DAEMONSET = ROOT / "deploy" / "kubernetes" / "daemonset.yaml"
EXAMPLE = ROOT / "examples" / "air"
REFS_IN_POD = "/etc/refmount/refs.json"


def container() -> dict[str, Any]:
    """Return the DaemonSet's one container."""
    manifest = yaml.safe_load(DAEMONSET.read_text())
    containers: list[dict[str, Any]] = manifest["spec"]["template"]["spec"]["containers"]
    (found,) = containers
    return found


def on_host(command: list[str], mountpoint: Path) -> list[str]:
    """Return ``command`` with the pod's mountpoint replaced by ``mountpoint``."""
    (variable,) = [e for e in container()["env"] if e["name"] == "MOUNTPOINT"]
    return [str(mountpoint) if word == variable["value"] else word for word in command]


def host_environment(mountpoint: Path) -> dict[str, str]:
    """Return the environment in which ``refmount`` is this checkout's, as in the image."""
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "MOUNTPOINT": str(mountpoint)}


def host_script() -> str:
    """Return the container's start script reading the example instead of the ConfigMap.

    The example's target is a local file, which ``allow_other`` accepts only under a
    ``--local-root``; the ConfigMap's target is remote and needs none.
    """
    args: list[str] = container()["args"]
    (script,) = args
    assert REFS_IN_POD in script
    script = script.replace(REFS_IN_POD, str(EXAMPLE / "refs.json"))
    script = script.replace("exec refmount -f", f"exec refmount -f --local-root {EXAMPLE}")
    return script


def probe(mountpoint: Path) -> int:
    command = on_host(container()["readinessProbe"]["exec"]["command"], mountpoint)
    env = host_environment(mountpoint)
    return subprocess.run(command, env=env, capture_output=True, timeout=30).returncode


def leave_stale_mount(mountpoint: Path) -> None:
    """Mount the example on ``mountpoint`` and SIGKILL the daemon, as the OOM killer would."""
    mountpoint.mkdir(parents=True)
    refs = str(EXAMPLE / "refs.json")
    daemon = subprocess.Popen(
        refmount_command("-f", refs, str(mountpoint)), stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not is_mounted(mountpoint):
        assert daemon.poll() is None, "refmount exited before mounting"
        assert time.monotonic() < deadline, "refmount did not mount in time"
        time.sleep(0.02)
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()


def test_daemonset_container_clears_a_stale_mount_is_ready_and_unmounts(
    tmp_path: Path,
) -> None:
    mountpoint = tmp_path / "refmount" / "air"
    log = tmp_path / "daemon.log"
    leave_stale_mount(mountpoint)
    process: subprocess.Popen[bytes] | None = None
    try:
        assert read_errno(mountpoint / ".zgroup") is not None, "the mount is stale"
        assert probe(mountpoint) != 0, "a stale mount is not ready"
        with open(log, "wb") as log_file:
            process = subprocess.Popen(
                ["/bin/sh", "-c", host_script()],
                env=host_environment(mountpoint),
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while probe(mountpoint) != 0:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.1)
        assert (mountpoint / ".zgroup").read_bytes() == b'{"zarr_format":2}'
        pre_stop = on_host(container()["lifecycle"]["preStop"]["exec"]["command"], mountpoint)
        subprocess.run(pre_stop, check=True, timeout=30)
        assert not is_mounted(mountpoint)
        assert process.wait(timeout=30) == 0
        assert probe(mountpoint) != 0
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        unmount(mountpoint)
