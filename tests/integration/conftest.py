"""Fixtures shared by the integration tests."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import mounting
from tests.support.mounting import MOUNT_TIMEOUT, is_mounted, unmount
from tests.support.servers import (
    AWS_VARIABLES_TO_CLEAR,
    DUMMY_AWS_ENVIRONMENT,
    FaultProxy,
    RangeHTTPServer,
    S3Bucket,
    create_bucket,
    moto_s3,
)


@pytest.fixture
def mount_dir(tmp_path: Path) -> Path:
    """Return an empty directory to mount on."""
    path = tmp_path / "mnt"
    path.mkdir()
    return path


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Put dummy AWS credentials in the environment (refmount children inherit it).

    Anything that could point botocore at a real account, profile or endpoint is removed,
    and the instance metadata service is disabled.
    """
    for name in AWS_VARIABLES_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    for name, value in DUMMY_AWS_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    return dict(DUMMY_AWS_ENVIRONMENT)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """Run moto's S3 on 127.0.0.1 for the whole session; yield its endpoint URL."""
    with moto_s3() as endpoint:
        yield endpoint


@pytest.fixture
def s3_bucket(aws_env: dict[str, str], s3_endpoint: str) -> S3Bucket:
    """Return a new, empty bucket on the local S3 server."""
    return create_bucket(s3_endpoint, f"refmount-{uuid.uuid4().hex[:16]}")


@pytest.fixture
def http_server() -> Iterator[RangeHTTPServer]:
    """Run an HTTP range server on 127.0.0.1 (add files with ``add``)."""
    with RangeHTTPServer() as server:
        yield server
    assert server.errors == []


@pytest.fixture
def fault_proxy(http_server: RangeHTTPServer) -> Iterator[FaultProxy]:
    """Run a fault proxy on 127.0.0.1 in front of ``http_server``, passing everything."""
    with FaultProxy(http_server.url, stall_seconds=30.0, seed=20240601) as proxy:
        yield proxy
    assert proxy.errors == []


@pytest.fixture
def stuck_target(tmp_path: Path) -> Iterator[Path]:
    """Mount ``tests.stuckfs`` and yield the path of its file whose reads never answer."""
    mountpoint = tmp_path / "stuckfs"
    mountpoint.mkdir()
    log = tmp_path / "stuckfs.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.stuckfs", str(mountpoint)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(mountpoint):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the stuck filesystem did not mount"
            time.sleep(0.02)
        yield mountpoint / "stuck.bin"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        unmount(mountpoint)


@pytest.fixture(params=["auto", "fsspec"])
def each_fetcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Mount with ``--fetcher auto`` (obstore for HTTP and S3), then with ``--fetcher fsspec``:
    a module that uses this fixture runs each of its tests on both engines."""
    fetcher = str(request.param)
    monkeypatch.setattr(mounting, "ENGINE_OPTIONS", ("--fetcher", fetcher))
    return fetcher
