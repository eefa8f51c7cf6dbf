"""The container image: deploy/Containerfile and scripts/image, built and run for real.

The quick tests always run: the build script is valid shell and agrees with the
Containerfile. Building takes minutes and downloads Debian packages and wheels, so the build
and run test runs only when ``REFMOUNT_IMAGE_TESTS=1`` asks for it; it then builds the
image, runs it with podman the way the Containerfile says (the user refmount, /dev/fuse,
CAP_SYS_ADMIN, the mountpoint's directory shared with the host), reads the bundled example
from the host through shared mount propagation, and stops it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import fsspec
import pytest

from tests.support.mounting import MOUNT_TIMEOUT, is_mounted, requires_fuse, unmount

ROOT = Path(__file__).parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
SCRIPT = ROOT / "scripts" / "image"
EXAMPLE = ROOT / "examples" / "air"
BUILD_VARIABLE = "REFMOUNT_IMAGE_TESTS"
STOP_TIMEOUT = 60.0
PODMAN_NPROC = 32768
"""The process limit podman gives conmon (read from its /proc/PID/limits)."""
IMAGE = f"localhost/refmount:test-{uuid.uuid4().hex[:8]}"
LAST_PROBE: list[str] = []
"""Why each podman probe run failed, in order."""


def script_settings() -> dict[str, str]:
    """Return the ``NAME=value`` settings at the top of scripts/image."""
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", SCRIPT.read_text(), flags=re.MULTILINE))


def instructions() -> list[tuple[str, str]]:
    """Return the Containerfile's instructions as ``(KEYWORD, arguments)``, lines joined."""
    text = re.sub(r"\\\n\s*", " ", CONTAINERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    pairs = [line.split(maxsplit=1) for line in lines if line and not line.startswith("#")]
    return [(keyword.upper(), rest) for keyword, rest in pairs]


def instruction(keyword: str) -> str:
    (found,) = [rest for key, rest in instructions() if key == keyword]
    return found


# ------------------------------------------------------------------ always


def test_build_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    assert os.access(SCRIPT, os.X_OK)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_build_script_passes_shellcheck() -> None:
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_containerfile_needs_no_runtime_and_no_base_image() -> None:
    keywords = [keyword for keyword, _ in instructions()]
    assert keywords[0] == "FROM"
    assert instruction("FROM") == "scratch"
    assert "RUN" not in keywords


def test_containerfile_agrees_with_the_build_script() -> None:
    settings = script_settings()
    assert instruction("ADD") == f"{settings['ROOTFS']} /"
    assert instruction("USER") == f"{settings['USER_ID']}:{settings['USER_ID']}"
    assert int(settings["USER_ID"]) != 0
    path = re.search(r"\bPATH=(\S+)", instruction("ENV"))
    assert path is not None
    assert path.group(1).split(":")[0] == f"{settings['VENV']}/bin"
    assert json.loads(instruction("ENTRYPOINT")) == ["refmount", "-f"]
    assert {"fuse3", "python3"} <= set(settings["PACKAGES"].split(","))


def test_build_script_adds_the_user_it_declares() -> None:
    assert script_settings()["USER_NAME"] == "refmount"
    text = SCRIPT.read_text()
    assert "$USER_NAME:x:$USER_ID:$USER_ID:" in text
    assert "user_allow_other" in text, "a non-root mount must be readable by the host's users"


# ------------------------------------------------------------------ built and run


def podman_run_options() -> list[str] | None:
    """Return options with which podman starts a container here, or None if none does.

    Podman's defaults come first. Where this process may not raise its resource limits (no
    CAP_SYS_RESOURCE), podman's defaults (more open files and processes than the hard
    limits) make the runtime's setrlimit fail; podman's own helper conmon also runs with at
    most PODMAN_NPROC processes, and crun refuses a hybrid cgroup hierarchy with a
    controller in the unified one. Then runc with limits no higher than those is tried.
    """
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], PODMAN_NPROC)
    candidates: list[list[str]] = [[]]
    if shutil.which("runc") is not None:
        limits = [f"--ulimit=nofile={nofile}:{nofile}", f"--ulimit=nproc={nproc}:{nproc}"]
        candidates.append(["--runtime=runc", *limits])
    for options in candidates:
        probe = subprocess.run(
            ["podman", "run", "--rm", *options, "--entrypoint", "refmount", IMAGE, "--version"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0:
            return options
        LAST_PROBE.append(probe.stderr.strip())
    return None


@dataclass
class Built:
    """The image built for this module, and how long building took."""

    tag: str
    seconds: float
    size: int
    run_options: list[str]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """Build the image with scripts/image; skip when podman cannot start it here."""
    if os.environ.get(BUILD_VARIABLE) != "1":
        pytest.skip(f"builds for minutes and downloads: set {BUILD_VARIABLE}=1 to run it")
    missing = [tool for tool in ("podman", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    if os.geteuid() != 0:
        pytest.skip("mmdebstrap and a shared bind mount need root")
    work = tmp_path_factory.mktemp("image")
    started = time.monotonic()
    subprocess.run(
        [str(SCRIPT), IMAGE], check=True, env={**os.environ, "REFMOUNT_IMAGE_WORK": str(work)}
    )
    seconds = time.monotonic() - started
    try:
        inspect = ["podman", "image", "inspect", "--format", "{{.Size}}", IMAGE]
        size = int(subprocess.run(inspect, check=True, capture_output=True).stdout)
        options = podman_run_options()
        if options is None:
            pytest.skip(f"podman cannot start a container here: {LAST_PROBE[-1]}")
        yield Built(IMAGE, seconds, size, options)
    finally:
        subprocess.run(["podman", "rmi", "-f", IMAGE], check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def shared_dir(tmp_path: Path) -> Iterator[Path]:
    """Return a directory that is a shared mount, so mounts made under it reach its peers."""
    path = tmp_path / "shared"
    path.mkdir()
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    try:
        subprocess.run(["mount", "--make-shared", str(path)], check=True)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def fuse_device(tmp_path: Path) -> Path:
    """Return a FUSE device node the image's user may open.

    Debian's udev rules give /dev/fuse mode 0666; where the host's is stricter, a node of
    the same device with mode 0666 stands in for it (podman copies the node's mode).
    """
    if os.stat("/dev/fuse").st_mode & 0o666 == 0o666:
        return Path("/dev/fuse")
    node = tmp_path / "fuse"
    subprocess.run(["mknod", "-m", "666", str(node), "c", "10", "229"], check=True)
    return node


def expected_bytes() -> dict[str, bytes]:
    """Return what fsspec's ReferenceFileSystem serves for every key of the example."""
    refs = json.loads((EXAMPLE / "refs.json").read_text())
    for key, value in refs["refs"].items():
        if isinstance(value, list):
            refs["refs"][key] = [str(EXAMPLE / value[0]), *value[1:]]
    fs = fsspec.filesystem("reference", fo=refs, remote_protocol="file")
    return {key: fs.cat_file(key) for key in refs["refs"]}


def wait_for_ready(mountpoint: Path, container: str) -> None:
    """Wait until the host sees the mount answer, or fail with the container's log."""
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not (is_mounted(mountpoint) and (mountpoint / ".refmount-stats").exists()):
        state = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Running}}", container],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if state != "true" or time.monotonic() > deadline:
            logs = subprocess.run(["podman", "logs", container], capture_output=True, text=True)
            raise AssertionError(f"no mount (running: {state}):\n{logs.stdout}{logs.stderr}")
        time.sleep(0.05)


def mount_options(mountpoint: Path) -> tuple[str, str]:
    """Return the filesystem type and super options of the mount on ``mountpoint``."""
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            if fields[4] == str(mountpoint):
                after = fields[fields.index("-") + 1 :]
                return after[0], after[2]
    raise AssertionError(f"{mountpoint} is not mounted")


@pytest.mark.slow
@pytest.mark.fuse
@requires_fuse
def assert_decoded(mountpoint: Path) -> None:
    """The image's decode extra works: chunks are served decoded, equal to the original."""
    import netCDF4
    import numpy as np

    meta = json.loads((mountpoint / "air" / ".zarray").read_bytes())
    assert meta["compressor"] is None
    assert meta["filters"] is None
    with netCDF4.Dataset(EXAMPLE / "air.nc") as original:
        original.set_auto_maskandscale(False)
        for step in range(4):
            served = np.frombuffer((mountpoint / "air" / f"{step}.0.0").read_bytes(), "<f4")
            np.testing.assert_array_equal(served, original["air"][step].ravel())


@pytest.mark.parametrize("decode", [False, True], ids=["as-stored", "decode"])
def test_image_mounts_the_example_for_the_host(
    built: Built, shared_dir: Path, fuse_device: Path, decode: bool
) -> None:
    mountpoint = shared_dir / "air"
    mountpoint.mkdir()
    os.chown(mountpoint, 10001, 10001)
    name = f"refmount-test-{uuid.uuid4().hex[:8]}"
    command = [
        "podman", "run", "-d", "--name", name, *built.run_options,
        "--device", f"{fuse_device}:/dev/fuse", "--cap-add", "SYS_ADMIN",
        "-v", f"{EXAMPLE}:/refs:ro", "-v", f"{shared_dir}:/mnt/refmount:rshared",
        built.tag, "-o", "allow_other", "--local-root", "/refs",
        *(["--decode"] if decode else []), "/refs/refs.json", "/mnt/refmount/air",
    ]  # fmt: skip
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True)
    try:
        wait_for_ready(mountpoint, name)
        ready = time.monotonic() - started
        fstype, options = mount_options(mountpoint)
        assert fstype == "fuse.refmount"
        assert "user_id=10001" in options.split(","), "the image's user made the mount"
        if decode:
            assert_decoded(mountpoint)
        else:
            for key, content in expected_bytes().items():
                assert (mountpoint / key).read_bytes() == content, key
        subprocess.run(["podman", "stop", "-t", str(int(STOP_TIMEOUT)), name], check=True)
        code = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.ExitCode}}", name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert code == "0"
        assert not is_mounted(mountpoint), "stopping the container unmounts"
        print(
            f"\nimage {built.tag}: {built.size / 1e6:.0f} MB, built in {built.seconds:.0f} s; "
            f"run options {built.run_options or 'defaults'}; "
            f"podman run to a ready mount on the host: {ready:.2f} s"
        )
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], check=False, capture_output=True)
        unmount(mountpoint)
