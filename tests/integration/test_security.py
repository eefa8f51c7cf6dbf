"""Who may read what: local roots on shared mounts, owner and mode options, per-host
credentials, template sandboxing, and no shell anywhere in the package."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import refmount
from refmount.cli import background
from refmount.errors import ReferenceFormatError
from refmount.formats import LoadOptions, load
from tests.fakes import LocalSource
from tests.support.datasets import target_bytes, zarray
from tests.support.mounting import (
    is_mounted,
    mounted,
    read_errno,
    refmount_command,
    requires_fuse,
)
from tests.support.servers import RangeHTTPServer

DATA = target_bytes(4_000, 41)


def write_json(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def run_foreground(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``refmount -f``; for a refused set it exits before anything is mounted."""
    return subprocess.run(
        refmount_command("-f", *args), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A root with a target in it, a secret outside it, and a link from the root to the secret."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "data.bin").write_bytes(DATA)
    secret = tmp_path / "private" / "secret.bin"
    secret.parent.mkdir()
    secret.write_bytes(b"SECRET" * 10)
    (root / "escape.bin").symlink_to(secret)
    return {"root": root, "data": root / "data.bin", "secret": secret, "tmp": tmp_path}


# ------------------------------------------------------------------ local roots


@requires_fuse
@pytest.mark.fuse
@pytest.mark.parametrize(
    ("sharing", "target"),
    [
        ("allow_other", "{secret}"),
        ("allow_root", "file://{secret}"),
        ("allow_other", "local://{secret}"),
        ("allow_other", "{root}/../private/secret.bin"),
        ("allow_other", "{root}/escape.bin"),
        ("allow_other", "simplecache::file://{secret}"),
    ],
)
def test_a_shared_mount_refuses_local_targets_outside_the_roots(
    layout: dict[str, Path], mount_dir: Path, sharing: str, target: str
) -> None:
    url = target.format(**layout)
    refs = write_json(
        layout["tmp"] / "refs.json",
        {"inline": "x", "inside": [str(layout["data"]), 0, 10], "stolen": [url, 0, 6]},
    )
    result = run_foreground(
        "-o", sharing, "--local-root", str(layout["root"]), str(refs), str(mount_dir)
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("refmount: error:")
    assert "'stolen'" in lines[0]
    assert url in lines[0] or os.path.normpath(url) in lines[0]  # resolved like every path
    assert "--local-root" in lines[0]
    assert not is_mounted(mount_dir)


@requires_fuse
@pytest.mark.fuse
def test_a_shared_mount_reads_targets_under_its_roots(
    layout: dict[str, Path], tmp_path: Path
) -> None:
    other_root = tmp_path / "other"
    other_root.mkdir()
    (other_root / "b.bin").write_bytes(b"bbbb")
    refs = write_json(
        tmp_path / "refs.json",
        {
            "a": [str(layout["data"]), 100, 50],
            "b": [f"file://{other_root}/b.bin"],
            "inline": "base64:AAEC",
            "data": ["data:application/octet-stream;base64,AAEC"],
        },
    )
    roots = f"local_root={layout['root']}:{other_root}"
    with mounted(refs, tmp_path / "mnt", "-o", f"allow_other,{roots}") as mount:
        assert (mount.path / "a").read_bytes() == DATA[100:150]
        assert (mount.path / "b").read_bytes() == b"bbbb"
        assert (mount.path / "inline").read_bytes() == b"\x00\x01\x02"
        assert (mount.path / "data").read_bytes() == b"\x00\x01\x02"


@requires_fuse
@pytest.mark.fuse
def test_without_sharing_local_targets_are_not_restricted(
    layout: dict[str, Path], tmp_path: Path
) -> None:
    refs = write_json(tmp_path / "refs.json", {"secret": [str(layout["secret"]), 0, 6]})
    with mounted(refs, tmp_path / "mnt") as mount:
        assert (mount.path / "secret").read_bytes() == b"SECRET"


@requires_fuse
@pytest.mark.fuse
def test_a_link_swapped_after_loading_is_refused_at_read_time(
    layout: dict[str, Path], tmp_path: Path
) -> None:
    link = layout["root"] / "moving.bin"
    link.symlink_to(layout["data"])
    refs = write_json(tmp_path / "refs.json", {"a": [str(link), 0, 6], "b": [str(link), 6, 6]})
    option = f"allow_other,local_root={layout['root']},no_pin"
    with mounted(refs, tmp_path / "mnt", "-o", option) as mount:
        assert (mount.path / "a").read_bytes() == DATA[:6]
        link.unlink()
        link.symlink_to(layout["secret"])
        assert read_errno(mount.path / "b") == errno.EACCES
    log = mount.log_text()
    line = next(line for line in log.splitlines() if "'b'" in line and "ERROR" in line)
    assert str(link) in line
    assert str(layout["secret"]) in line


@requires_fuse
@pytest.mark.fuse
@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
def test_parquet_chunks_outside_the_roots_are_eacces_when_read(
    layout: dict[str, Path], tmp_path: Path
) -> None:
    refs_to_dataframe = pytest.importorskip("kerchunk.df").refs_to_dataframe
    directory = tmp_path / "pq"
    directory.mkdir()
    refs = {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "x/.zarray": json.dumps(zarray([3], [1])),
        "x/0": [str(layout["data"]), 0, 6],
        "x/1": [str(layout["secret"]), 0, 6],
        "x/2": [str(layout["root"] / "escape.bin"), 6, 6],
    }
    refs_to_dataframe(refs, str(directory / "refs.parq"), record_size=2)
    option = f"allow_other,local_root={layout['root']}"
    with mounted(directory / "refs.parq", tmp_path / "mnt", "-o", option) as mount:
        assert (mount.path / "x/0").read_bytes() == DATA[:6]
        assert sorted(os.listdir(mount.path / "x")) == [".zarray", "0", "1", "2"]
        assert read_errno(mount.path / "x/1") == errno.EACCES
        assert read_errno(mount.path / "x/2") == errno.EACCES
        assert (mount.path / "x/0").read_bytes() == DATA[:6]
    log = mount.log_text()
    assert any("'x/1'" in line and str(layout["secret"]) in line for line in log.splitlines())


# ------------------------------------------------------------------ owner and modes


@requires_fuse
@pytest.mark.fuse
def test_uid_gid_and_umask_apply_to_every_node(tmp_path: Path) -> None:
    refs = write_json(tmp_path / "refs.json", {"a/b": "x", "c": "y"})
    option = "uid=1234,gid=5678,umask=027"
    with mounted(refs, tmp_path / "mnt", "-o", option) as mount:
        for path, mode in (
            (mount.path, stat.S_IFDIR | 0o550),
            (mount.path / "a", stat.S_IFDIR | 0o550),
            (mount.path / "a" / "b", stat.S_IFREG | 0o440),
            (mount.path / "c", stat.S_IFREG | 0o440),
        ):
            status = path.stat()
            assert (status.st_mode, status.st_uid, status.st_gid) == (mode, 1234, 5678), path
        with open("/proc/mounts") as mounts:
            line = next(m for m in mounts if m.split()[1] == str(mount.path))
        assert "default_permissions" in line


@requires_fuse
@pytest.mark.fuse
def test_owner_flags(tmp_path: Path) -> None:
    refs = write_json(tmp_path / "refs.json", {"c": "y"})
    args = ("--uid", "4321", "--gid", "8765", "--umask", "077")
    with mounted(refs, tmp_path / "mnt", *args) as mount:
        status = (mount.path / "c").stat()
        assert (status.st_mode, status.st_uid, status.st_gid) == (
            stat.S_IFREG | 0o400,
            4321,
            8765,
        )


# ------------------------------------------------------------------ per-host credentials


class _HeaderRecorder(BaseHTTPRequestHandler):
    """Answers every GET/HEAD with ranges of DATA and records the headers it was sent, names
    in lower case (HTTP header names are case-insensitive; clients differ)."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def _answer(self) -> None:
        type(self).seen.append({name.lower(): value for name, value in self.headers.items()})
        match = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
        body, status = DATA, 200
        if match:
            start, end = int(match[1]), int(match[2]) + 1
            body, status = DATA[start:end], 206
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(DATA)}")
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)


@pytest.fixture
def recording_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A tiny HTTP server of our own on 127.0.0.1; yields its URL and the headers it saw."""

    class Recorder(_HeaderRecorder):
        seen: list[dict[str, str]] = []  # noqa: RUF012 - one list per fixture use

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Recorder.seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def authorizations(server: RangeHTTPServer) -> set[str | None]:
    return {request.header("Authorization") for request in server.requests}


@requires_fuse
@pytest.mark.fuse
@pytest.mark.http
def test_credentials_for_one_host_are_never_sent_to_another(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    with RangeHTTPServer() as attacker:
        mine = http_server.add("data.bin", DATA)
        theirs = attacker.add("exfiltrate.bin", DATA)
        refs = write_json(
            tmp_path / "refs.json",
            {"mine": [mine, 0, 100], "whole": [mine], "theirs": [theirs, 0, 100]},
        )
        options = {
            "http": {"headers": {"User-Agent": "refmount-test"}},
            http_server.url: {"headers": {"Authorization": "Bearer secret-token"}},
        }
        with mounted(refs, tmp_path / "mnt", "--remote-options", json.dumps(options)) as mount:
            assert (mount.path / "mine").read_bytes() == DATA[:100]
            assert (mount.path / "whole").read_bytes() == DATA
            assert (mount.path / "theirs").read_bytes() == DATA[:100]
        assert http_server.requests
        assert authorizations(http_server) == {"Bearer secret-token"}
        assert attacker.requests
        assert authorizations(attacker) == {None}
        assert {r.header("User-Agent") for r in attacker.requests} == {"refmount-test"}
        assert attacker.errors == []


@requires_fuse
@pytest.mark.fuse
@pytest.mark.http
def test_protocol_level_options_go_to_every_host_of_the_protocol(
    tmp_path: Path, recording_server: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = recording_server
    refs = write_json(tmp_path / "refs.json", {"a": [f"{url}/a.bin", 0, 10]})
    options = {"http": {"headers": {"Authorization": "Bearer everywhere"}}}
    with mounted(refs, tmp_path / "mnt", "--remote-options", json.dumps(options)) as mount:
        assert (mount.path / "a").read_bytes() == DATA[:10]
    assert seen
    assert {headers.get("authorization") for headers in seen} == {"Bearer everywhere"}


# ------------------------------------------------------------------ template sandbox

INJECTIONS = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ().__class__.__bases__[0].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{{ joiner.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{{ namespace.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{{ lipsum.__globals__['os'].popen('touch MARKER').read() }}",
    "{{ lipsum.__globals__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.popen('touch MARKER') }}",
    "{{ config }}",
    "{{ config.__class__.__init__.__globals__['os'].popen('touch MARKER') }}",
    "{{ request }}",
    "{{ request.application.__globals__.__builtins__.__import__('os').popen('touch MARKER') }}",
    "{{ url_for.__globals__.os.popen('touch MARKER') }}",
    "{{ ''|attr('__class__') }}",
    "{{ '{0.__class__}'.format('') }}",
    "{% for c in [].__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    "{% set x = ''.__class__ %}{{ x }}",
    "{{ [].pop.__self__.__class__ }}",
    "{{ 'x' * 100000000 }}",
]


def placements(payload: str) -> dict[str, dict[str, Any]]:
    """The places of a Version 1 file where text is rendered."""
    gen = {"key": "g/{{ i }}", "url": "u", "dimensions": {"i": [1]}}
    return {
        "refs-url": {"version": 1, "refs": {"k": [payload, 0, 1]}},
        "template": {
            "version": 1,
            "templates": {"f": payload},
            "refs": {"k": ["{{ f(x=1) }}", 0, 1]},
        },
        "gen-url": {"version": 1, "gen": [{**gen, "url": payload}], "refs": {}},
        "gen-key": {"version": 1, "gen": [{**gen, "key": payload + "{{ i }}"}], "refs": {}},
        "gen-offset": {
            "version": 1,
            "gen": [{**gen, "offset": payload, "length": "1"}],
            "refs": {},
        },
    }


@pytest.mark.parametrize("payload", INJECTIONS)
def test_template_injection_is_refused_and_runs_nothing(tmp_path: Path, payload: str) -> None:
    marker = tmp_path / "marker"
    payload = payload.replace("MARKER", str(marker))
    for place, document in placements(payload).items():
        refs = write_json(tmp_path / place / "refs.json", document)
        with pytest.raises(ReferenceFormatError) as caught:
            load(LocalSource(refs), LoadOptions())
        message = str(caught.value)
        assert message.startswith(str(refs)), message
        assert "\n" not in message
        assert not marker.exists(), (place, payload)


@requires_fuse
@pytest.mark.fuse
def test_template_injection_exits_2_with_one_line(tmp_path: Path, mount_dir: Path) -> None:
    marker = tmp_path / "marker"
    payload = f"{{{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}}}"
    refs = write_json(tmp_path / "refs.json", {"version": 1, "refs": {"k": [payload, 0, 1]}})
    result = run_foreground(str(refs), str(mount_dir))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"refmount: error: {refs}")
    assert "'k'" in lines[0]
    assert not marker.exists()
    assert not is_mounted(mount_dir)


# ------------------------------------------------------------------ no shell

SHELL_PATTERNS = re.compile(
    r"\bsubprocess\b|\bos\.system\b|\bos\.popen\b|shell\s*=\s*True|\bpopen\("
)


def test_nothing_runs_a_shell() -> None:
    package = Path(refmount.__file__).parent
    uses: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for line in path.read_text().splitlines():
            code = line.split("#", 1)[0]
            if SHELL_PATTERNS.search(code):
                uses.setdefault(path.relative_to(package).as_posix(), []).append(code.strip())
    # The launcher; the Python API (the launcher, and fusermount3 for a daemon that would not
    # stop); the Dask plugin (the refmount command, fusermount3). Always an argument list.
    assert set(uses) == {"cli/background.py", "api.py", "dask.py"}, uses
    assert sorted(uses["cli/background.py"]) == sorted(
        [
            "import subprocess",
            "stdin: int | bytes | None = subprocess.DEVNULL,",
            ") -> tuple[subprocess.Popen[bytes], bool]:",
            "child = subprocess.Popen(",
            "stdin=subprocess.PIPE if isinstance(stdin, bytes) else stdin,",
            "child, ready = launch(argv, stdin=None if stdin_refs else subprocess.DEVNULL)",
        ]
    ), uses
    for lines in uses.values():
        assert not [line for line in lines if re.search(r"shell|os\.system|popen\(", line)]
    launcher = (package / "cli" / "background.py").read_text()
    call = launcher[launcher.index("subprocess.Popen(") :]
    call = call[: call.index("\n    )")]
    assert "background_command(argv)" in call
    # a list: no shell parses it
    assert background.background_command(["r", "m"])[0] == sys.executable
    assert "shell" not in call
