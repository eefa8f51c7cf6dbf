"""The servers the remote sections read from, on 127.0.0.1 only: nginx for HTTP, s3rver (or moto
when it is not installed) for S3, the generated files served by each, and the environment that
gives S3 clients dummy credentials."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import fsspec

from bench.common import BENCH, log
from bench.datasets import DataSet
from bench.processes import children_of, free_port, stop_process, wait_for_port
from tests.support.servers import (
    AWS_VARIABLES_TO_CLEAR,
    DUMMY_AWS_ENVIRONMENT,
    create_bucket,
    moto_s3,
)

NGINX_TEMPLATE = BENCH / "nginx.conf.template"
S3RVER = BENCH / "node" / "node_modules" / ".bin" / "s3rver"
S3RVER_KEY = "S3RVER"
"""s3rver's fixed dummy access key and secret."""
MOTO_NOTE = (
    "s3rver not installed (npm ci --prefix bench/node): fell back to moto, which reads the"
    " whole object for every ranged GET, so the S3 rows measure moto"
)


@dataclass
class Server:
    """A running server: its base URL or endpoint and the processes that do its work."""

    url: str
    name: str
    pids: Callable[[], list[int]]
    """The PIDs whose CPU time is the server's (empty when it runs inside the benchmark)."""
    directory: Path | None = None
    """Where an S3 server stores its objects, when it stores them as files."""
    note: str | None = None


@contextlib.contextmanager
def nginx(root: Path, workdir: Path) -> Iterator[Server]:
    """Debian's nginx serving ``root`` on 127.0.0.1."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(binary):
        raise RuntimeError("nginx is not installed (Debian package nginx-light)")
    tmp = workdir / "nginx"
    tmp.mkdir(exist_ok=True)
    port = free_port()
    config = (
        NGINX_TEMPLATE.read_text()
        .replace("@PORT@", str(port))
        .replace("@ROOT@", str(root))
        .replace("@TMP@", str(tmp))
    )
    (tmp / "nginx.conf").write_text(config)
    process = subprocess.Popen(
        [binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "error.log")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, tmp / "error.log")
        yield Server(f"http://127.0.0.1:{port}", "nginx", lambda: children_of(process.pid))
    finally:
        stop_process(process, signal.SIGQUIT)


@contextlib.contextmanager
def nginx_serving(data: DataSet, workdir: Path) -> Iterator[tuple[Server, dict[str, str]]]:
    """nginx serving the generated target files; yield it and the URL of each ("big", "many")."""
    os.chmod(workdir, 0o755)  # nginx's workers may run as another user
    for path in (data.directory / "data", data.big_file, data.many_file):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    with nginx(data.directory / "data", workdir) as server:
        yield server, {"big": f"{server.url}/big.bin", "many": f"{server.url}/many.bin"}


@contextlib.contextmanager
def s3_server(workdir: Path) -> Iterator[Server]:
    """s3rver (streams ranges) on 127.0.0.1 with a bucket "bench", or moto when s3rver is not
    installed."""
    node = shutil.which("node")
    if not (S3RVER.exists() and node):
        log(MOTO_NOTE)
        with moto_s3() as endpoint:
            create_bucket(endpoint, "bench")
            yield Server(endpoint, "moto", list, note=MOTO_NOTE)
        return
    directory = workdir / "s3rver"
    directory.mkdir(exist_ok=True)
    port = free_port()
    log_path = workdir / "s3rver.log"
    command = [node, str(S3RVER), "-d", str(directory), "-a", "127.0.0.1", "-p", str(port)]
    command += ["--silent", "--configure-bucket", "bench"]
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        )
    try:
        wait_for_port(port, process, log_path)
        yield Server(f"http://127.0.0.1:{port}", "s3rver", lambda: [process.pid], directory)
    finally:
        stop_process(process)


def s3_upload(
    server: Server, data: DataSet, names: tuple[str, ...] = ("big", "many")
) -> dict[str, str]:
    """Upload the generated target files ``names`` to ``server``'s bucket "bench"; return the
    URL of each ("big", "many")."""
    fs = fsspec.filesystem("s3", skip_instance_cache=True, **s3_options(server))
    paths = {"big": data.big_file, "many": data.many_file}
    files = {name: paths[name] for name in names}
    for path in files.values():
        fs.put_file(str(path), f"bench/{path.name}")
    return {name: f"s3://bench/{path.name}" for name, path in files.items()}


def s3_options(server: Server) -> dict[str, str]:
    """The s3fs options that reach ``server``: its endpoint, and the key and secret it accepts."""
    key = s3_key(server)
    return {"endpoint_url": server.url, "key": key, "secret": key}


def s3_environment(key: str) -> dict[str, str]:
    """This environment without real AWS settings, with ``key`` as access key and secret."""
    env = {k: v for k, v in os.environ.items() if k not in AWS_VARIABLES_TO_CLEAR}
    env.update(DUMMY_AWS_ENVIRONMENT)
    env["AWS_ACCESS_KEY_ID"] = env["AWS_SECRET_ACCESS_KEY"] = key
    return env


def s3_key(server: Server) -> str:
    """The access key (and secret) ``server`` accepts."""
    return S3RVER_KEY if server.name == "s3rver" else DUMMY_AWS_ENVIRONMENT["AWS_ACCESS_KEY_ID"]


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` in this process (the in-process fsspec and s3fs see it) and restore it."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
