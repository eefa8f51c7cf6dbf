"""A corpus of malformed reference sets: exit status 2 with one line, or skipped with a warning."""

from __future__ import annotations

import bz2
import errno
import gzip
import json
import logging
import lzma
import os
import subprocess
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from refmount import cli, daemon
from tests.support.bounded import Bounded, run_bounded
from tests.support.datasets import zarray as uncompressed_zarray
from tests.support.mounting import (
    Mount,
    is_mounted,
    mounted,
    refmount_command,
    requires_fuse,
    unmount,
)
from tests.support.servers import RangeHTTPServer

pytestmark = [pytest.mark.fuse, requires_fuse]

DATA = bytes(range(256)) * 4
"""The target every reference of the corpus points into (``data.bin`` beside the refs)."""

OK = ["data.bin", 2, 10]
"""A valid reference that every JSON case carries, so that only the bad part is at fault."""


# ----------------------------------------------------------------------------- the corpus


@dataclass(frozen=True)
class Case:
    """One malformed reference set and what the error line must say about it.

    ``write`` creates the set in a directory and returns its path. ``key`` is the key the
    line must name (``key 'k'``), ``problem`` a fragment of the problem. ``bad`` holds the
    entries of a key-level case: they go into the ``--skip-invalid`` mount, which must leave
    out exactly those keys. ``real`` cases run the real command in a child process
    (background mode); the others call ``cli.main`` in-process (what that child runs).
    """

    id: str
    write: Callable[[Path], Path]
    problem: str
    key: str | None = None
    bad: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    real: bool = False


def _json_file(content: bytes, name: str = "refs.json") -> Callable[[Path], Path]:
    def write(directory: Path) -> Path:
        (directory / "data.bin").write_bytes(DATA)
        path = directory / name
        path.write_bytes(content)
        return path

    return write


def raw(case_id: str, content: bytes, problem: str, name: str = "refs.json") -> Case:
    """A file-level case whose bytes are given as they are."""
    return Case(case_id, _json_file(content, name), problem)


def document(case_id: str, value: object, problem: str, key: str | None = None) -> Case:
    """A file-level case: a JSON document that cannot be mounted, not even in part."""
    return Case(case_id, _json_file(json.dumps(value).encode()), problem, key)


def v0(case_id: str, bad: dict[str, Any], problem: str, key: str | None = None) -> Case:
    """A key-level Version 0 case: a valid key plus ``bad`` (the first bad key is named)."""
    content = json.dumps({"ok": OK, **bad}).encode()
    return Case(case_id, _json_file(content), problem, key or next(iter(bad)), bad)


V1_TEMPLATES = {"u": "data.bin"}


def v1(case_id: str, bad: dict[str, Any], problem: str) -> Case:
    """A key-level Version 1 case: bad ``refs`` values (template errors in URLs)."""
    value = {"version": 1, "templates": V1_TEMPLATES, "refs": {"ok": ["{{u}}", 2, 10], **bad}}
    content = json.dumps(value).encode()
    return Case(case_id, _json_file(content), problem, next(iter(bad)), bad, version=1)


def gen(case_id: str, item: dict[str, Any], problem: str, key: str | None = None) -> Case:
    """A file-level Version 1 case: one broken ``gen`` item (never skipped)."""
    value = {
        "version": 1,
        "templates": V1_TEMPLATES,
        "refs": {"ok": OK},
        "gen": [{"key": "g/{{i}}", "url": "{{u}}", "dimensions": {"i": [0, 1]}, **item}],
    }
    return document(case_id, value, problem, key)


def _compressed(how: str, damage: str) -> bytes:
    data = json.dumps({"ok": OK}).encode()
    compressors: dict[str, Callable[[bytes], bytes]] = {
        "gzip": gzip.compress,
        "bz2": bz2.compress,
        "xz": lzma.compress,
        "zstd": zstandard.ZstdCompressor().compress,
    }
    packed = compressors[how](data)
    if damage == "truncated":
        return packed[: len(packed) // 2]
    middle = len(packed) // 2
    return packed[:8] + bytes(b ^ 0x5A for b in packed[8:middle]) + packed[middle:]


JSON_CASES = [
    raw("truncated-json", b'{"ok": ["data.bin", 2, 10], "b": [', "not valid JSON"),
    raw("trailing-comma", b'{"ok": "x",}', "not valid JSON"),
    raw("empty-file", b"", "not valid JSON"),
    raw("not-utf8", b'{"ok": "\xff\xfe"}', "not valid UTF-8"),
    document("top-level-list", [["data.bin", 0, 1]], "the top level must be a JSON object"),
    document("top-level-number", 42, "the top level must be a JSON object"),
    document("top-level-string", "refs", "the top level must be a JSON object"),
    document("top-level-null", None, "the top level must be a JSON object"),
    document("v1-refs-a-list", {"version": 1, "refs": [OK]}, "'refs' must be an object"),
    document("v1-templates-a-list", {"version": 1, "templates": ["u"]}, "'templates' must be"),
    document("v1-template-not-text", {"version": 1, "templates": {"u": 5}}, "template 'u'"),
    document("v1-gen-an-object", {"version": 1, "gen": {"key": "k"}}, "'gen' must be a list"),
    document("v1-gen-item-a-number", {"version": 1, "gen": [5]}, "gen item 0: must be an object"),
    gen("gen-dimension-a-number", {"dimensions": {"i": 5}}, "dimension 'i' must be a list"),
    gen("gen-dimension-start-text", {"dimensions": {"i": {"start": "0", "stop": 2}}}, "'start'"),
    gen("gen-dimensions-a-list", {"dimensions": [0, 1]}, "'dimensions' must be an object"),
    gen("gen-key-a-number", {"key": 7}, "'key' must be a string"),
    document("version-0", {"version": 0, "ok": OK}, "unknown version 0"),
    document("version-2", {"version": 2, "refs": {}}, "unknown version 2"),
    document("version-string", {"version": "1", "refs": {}}, 'unknown version "1"'),
    document("version-null", {"version": None, "refs": {}}, "unknown version null"),
    document("version-true", {"version": True, "refs": {}}, "unknown version true"),
    v0("base64-bad-padding", {"b64pad": "base64:QUJDRA="}, "bad base64"),
    v0("base64-alphabet-leaves-bad-padding", {"b64alpha": "base64:!!!x"}, "bad base64"),
    v0("base64-outside-alphabet", {"b64under": "base64:_"}, "bad base64"),
    v0("text-lone-surrogate", {"surrogate": "\ud800"}, "not valid Unicode"),
    v1("v1-refs-template-syntax-error", {"syntax": ["{{u", 0, 1]}, "template syntax error"),
    v1("v1-refs-undefined-name", {"undefined": ["{{ nope }}/x", 0, 1]}, "undefined name"),
    gen("gen-url-syntax-error", {"url": "{{u"}, "template syntax error"),
    gen("gen-url-undefined-name", {"url": "{{ nope }}"}, "undefined name", key="g/0"),
    gen("gen-dimension-named-like-template", {"dimensions": {"u": [0]}}, "name of a template"),
    gen("gen-missing-stop", {"dimensions": {"i": {"start": 0}}}, "has no 'stop'"),
    gen("gen-step-zero", {"dimensions": {"i": {"stop": 3, "step": 0}}}, "'step' must not be 0"),
    gen("gen-offset-without-length", {"offset": 0}, "give both 'offset' and 'length'"),
    gen(
        "gen-offset-not-an-integer",
        {"offset": "{{i}}x", "length": "4"},
        "offset '0x' is not an integer",
        key="g/0",
    ),
    gen("gen-length-negative", {"offset": "0", "length": "-{{i}}1"}, "negative length", "g/0"),
    gen(
        "gen-too-many-keys",
        {"key": "g{{i}}", "dimensions": {"i": {"stop": 10**12}}},
        "more than 100,000,000",
    ),
    gen("gen-offset-a-float", {"offset": 1.5, "length": 2}, "'offset' must be a string"),
    v0("offset-negative", {"negoff": ["data.bin", -1, 5]}, "negative offset -1"),
    v0("length-negative", {"neglen": ["data.bin", 0, -5]}, "negative length -5"),
    v0("offset-float", {"floatoff": ["data.bin", 1.5, 5]}, "offset must be an integer"),
    v0("length-float", {"floatlen": ["data.bin", 0, 5.0]}, "length must be an integer"),
    v0("offset-string", {"stroff": ["data.bin", "1", 2]}, "offset must be an integer"),
    v0("length-bool", {"boollen": ["data.bin", 0, True]}, "length must be an integer"),
    v0("offset-enormous", {"hugeoff": ["data.bin", 2**63, 1]}, "beyond 2**63 - 1"),
    v0("length-enormous", {"hugelen": ["data.bin", 0, 2**64]}, "beyond 2**63 - 1"),
    v0("range-end-enormous", {"hugeend": ["data.bin", 2**62, 2**62]}, "beyond 2**63 - 1"),
    v0("url-empty", {"emptyurl": ["", 0, 1]}, "empty URL"),
    v0("url-a-number", {"numurl": [5, 0, 1]}, "URL must be a string or null"),
    v0("url-a-list", {"listurl": [["data.bin"]]}, "URL must be a string or null"),
    v0("url-null-without-target", {"nullurl": [None, 0, 1]}, "null URL and no --target"),
    v0("list-of-two", {"two": ["data.bin", 0]}, "not 2 items"),
    v0("list-of-four", {"four": ["data.bin", 0, 1, 2]}, "not 4 items"),
    v0("value-a-number", {"number": 5}, "a reference must be a string"),
    v0("value-null", {"null": None}, "not null"),
    v0("name-256-bytes", {"n" * 256: "x"}, "256 bytes long"),
    v0("name-256-bytes-utf8", {"long/" + "é" * 128: "x"}, "256 bytes long"),
    v0("name-with-nul", {"nul\x00byte": "x"}, "NUL character"),
    v0("name-leading-slash", {"/lead": "x"}, "starts with '/'"),
    v0("name-trailing-slash", {"trail/": "x"}, "ends with '/'"),
    v0("name-double-slash", {"dbl//slash": "x"}, "empty path component"),
    v0("name-dot", {"dot/./x": "x"}, "'.' path component"),
    v0("name-dotdot", {"dotdot/../x": "x"}, "'..' path component"),
    v0("name-empty", {"": "x"}, "empty key"),
    v0("file-and-directory", {"fd": "x", "fd/inner": "y"}, "both a file and a directory", "fd"),
    raw("gzip-corrupt", _compressed("gzip", "flipped"), "corrupt gzip-compressed data"),
    raw("gzip-truncated", _compressed("gzip", "truncated"), "corrupt gzip-compressed data"),
    raw("zstd-truncated", _compressed("zstd", "truncated"), "corrupt zstd-compressed data"),
    raw("bz2-corrupt", _compressed("bz2", "flipped"), "corrupt bzip2-compressed data"),
    raw("xz-truncated", _compressed("xz", "truncated"), "corrupt xz-compressed data"),
    raw("gz-name-not-gzip", b"\x00\x01garbage", "the name says gzip", name="refs.json.gz"),
    raw("parquet-file-as-json", b"PAR1\x00\x00PAR1", "this is a Parquet file, not JSON"),
]


# Parquet reference sets


def zarray(shape: list[int], chunks: list[int]) -> dict[str, Any]:
    return uncompressed_zarray(shape, chunks, dtype="|u1")


def record_table(
    rows: list[tuple[str | None, int, int]], **replace: pa.Array[Any] | None
) -> pa.Table:
    """A record file's table: path/offset/size/raw, with columns replaced or dropped."""
    columns: dict[str, pa.Array[Any] | None] = {
        "path": pa.array([path for path, _, _ in rows], pa.string()),
        "offset": pa.array([offset for _, offset, _ in rows], pa.int64()),
        "size": pa.array([size for _, _, size in rows], pa.int64()),
        "raw": pa.array([None] * len(rows), pa.binary()),
    }
    columns.update(replace)
    return pa.table({name: array for name, array in columns.items() if array is not None})


def write_record(directory: Path, array: str, content: pa.Table | bytes) -> None:
    path = directory / array / "refs.0.parq"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        pq.write_table(content, str(path))


def good_rows(directory: Path) -> list[tuple[str | None, int, int]]:
    target = str(directory / "data.bin")
    return [(target, 0, 10), (target, 10, 10)]


def parquet_set(
    directory: Path,
    zmetadata: object,
    records: dict[str, pa.Table | bytes] | None = None,
) -> Path:
    """Write ``refs.parq`` in ``directory``: ``.zmetadata`` (unless None) and record files."""
    (directory / "data.bin").write_bytes(DATA)
    root = directory / "refs.parq"
    root.mkdir()
    if zmetadata is not None:
        text = zmetadata if isinstance(zmetadata, bytes) else json.dumps(zmetadata).encode()
        (root / ".zmetadata").write_bytes(text)
    for array, content in (records or {}).items():
        write_record(root, array, content)
    return root


def metadata(**arrays: Any) -> dict[str, Any]:
    """A ``.zmetadata`` document with record size 2 and the given ``<name>/.zarray`` entries."""
    entries: dict[str, Any] = {".zgroup": {"zarr_format": 2}}
    for name, value in arrays.items():
        entries[f"{name}/.zarray"] = value
    return {"metadata": entries, "record_size": 2}


def pq_case(
    case_id: str,
    zmetadata: Callable[[Path], object],
    problem: str,
    key: str | None = None,
    records: Callable[[Path], dict[str, pa.Table | bytes]] | None = None,
    bad_array: str | None = None,
) -> Case:
    def write(directory: Path) -> Path:
        return parquet_set(
            directory, zmetadata(directory), None if records is None else records(directory)
        )

    bad = {} if bad_array is None else {f"{bad_array}/.zarray": None}
    return Case(case_id, write, problem, key, bad, version=-1)


def _good(directory: Path) -> dict[str, pa.Table | bytes]:
    return {"good": record_table(good_rows(directory))}


GOOD = zarray([4], [2])

BAD_ARRAYS: dict[str, Any] = {
    "mismatch": zarray([4, 4], [2]),
    "chunkszero": zarray([4], [0]),
    "shapeneg": zarray([-4], [2]),
    "notjson": "{not json",
}

PARQUET_CASES = [
    pq_case("pq-missing-zmetadata", lambda d: None, "missing .zmetadata"),
    pq_case("pq-zmetadata-not-json", lambda d: b"{not json", "not valid JSON"),
    pq_case("pq-zmetadata-not-utf8", lambda d: b'{"metadata": "\xff"}', "not valid JSON"),
    pq_case("pq-zmetadata-a-list", lambda d: [1, 2], "must be a JSON object"),
    pq_case("pq-no-record-size", lambda d: {"metadata": {}}, "missing", key="record_size"),
    pq_case(
        "pq-record-size-zero",
        lambda d: {"metadata": {}, "record_size": 0},
        "must be a positive integer, not 0",
        key="record_size",
    ),
    pq_case(
        "pq-record-size-negative",
        lambda d: {"metadata": {}, "record_size": -3},
        "must be a positive integer, not -3",
        key="record_size",
    ),
    pq_case(
        "pq-record-size-string",
        lambda d: {"metadata": {}, "record_size": "10"},
        "must be a positive integer, not '10'",
        key="record_size",
    ),
    pq_case(
        "pq-metadata-a-list",
        lambda d: {"metadata": [], "record_size": 2},
        "must be a JSON object",
        key="metadata",
    ),
    pq_case("pq-metadata-missing", lambda d: {"record_size": 2}, "missing", key="metadata"),
    pq_case(
        "pq-zarray-shape-chunks-mismatch",
        lambda d: metadata(good=GOOD, mismatch=BAD_ARRAYS["mismatch"]),
        "shape has 2 dimensions but chunks has 1",
        key="mismatch/.zarray",
        records=_good,
        bad_array="mismatch",
    ),
    pq_case(
        "pq-zarray-chunks-zero",
        lambda d: metadata(good=GOOD, chunkszero=BAD_ARRAYS["chunkszero"]),
        "chunks must hold positive integers",
        key="chunkszero/.zarray",
        records=_good,
        bad_array="chunkszero",
    ),
    pq_case(
        "pq-zarray-shape-negative",
        lambda d: metadata(good=GOOD, shapeneg=BAD_ARRAYS["shapeneg"]),
        "shape must hold non-negative integers",
        key="shapeneg/.zarray",
        records=_good,
        bad_array="shapeneg",
    ),
    pq_case(
        "pq-zarray-not-json",
        lambda d: metadata(good=GOOD, notjson=BAD_ARRAYS["notjson"]),
        "not valid JSON",
        key="notjson/.zarray",
        records=_good,
        bad_array="notjson",
    ),
    # Caught at load: the schema probe reads the footer of the first record file of the first
    # array (in sorted order) that has chunks.
    pq_case(
        "pq-probed-record-garbage",
        lambda d: metadata(a=GOOD),
        "not a readable Parquet file",
        records=lambda d: {"a": b"this is not parquet at all"},
    ),
    pq_case(
        "pq-probed-record-missing-columns",
        lambda d: metadata(a=GOOD),
        "columns are ['offset', 'path']",
        records=lambda d: {"a": record_table(good_rows(d), size=None, raw=None)},
    ),
    pq_case(
        "pq-probed-record-offset-string",
        lambda d: metadata(a=GOOD),
        "column 'offset' has type string",
        records=lambda d: {"a": record_table(good_rows(d), offset=pa.array(["0", "10"]))},
    ),
]

CASES = [
    *(
        Case(c.id, c.write, c.problem, c.key, c.bad, c.version, real=n % 3 == 0)
        for n, c in enumerate(JSON_CASES)
    ),
    *(
        Case(c.id, c.write, c.problem, c.key, c.bad, c.version, real=n % 2 == 0)
        for n, c in enumerate(PARQUET_CASES)
    ),
]


def test_the_corpus_is_big_and_varied() -> None:
    ids = [case.id for case in CASES]
    assert len(set(ids)) == len(ids)
    assert len(CASES) >= 50
    assert sum(case.real for case in CASES) >= 12
    assert sum(bool(case.bad) for case in CASES) >= 20


# ----------------------------------------------------------------------------- exit status 2


@dataclass
class Outcome:
    refs: Path
    status: int
    stderr: str
    was_mounted: bool


def run_real(case: Case, directory: Path) -> Outcome:
    """Run ``refmount REFS MNT`` (background mode) in a child process."""
    directory.mkdir(parents=True)
    refs = case.write(directory)
    mountpoint = directory / "mnt"
    mountpoint.mkdir()
    result = subprocess.run(
        refmount_command(str(refs), str(mountpoint)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    was_mounted = is_mounted(mountpoint)
    unmount(mountpoint)
    return Outcome(refs, result.returncode, result.stderr, was_mounted)


@pytest.fixture(scope="module")
def real_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Run every ``real`` case as a child process, a few at a time."""
    root = tmp_path_factory.mktemp("malformed")
    real = [case for case in CASES if case.real]
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = pool.map(lambda case: run_real(case, root / case.id), real)
        return {case.id: outcome for case, outcome in zip(real, outcomes, strict=True)}


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put back the root logger that ``cli.main`` reconfigures."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def run_in_process(
    case: Case, directory: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Outcome:
    """Run ``cli.main(["-f", REFS, MNT])`` here: what the background child runs."""

    def must_not_mount(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"{case.id} was about to mount")

    monkeypatch.setattr(daemon, "mount_and_serve", must_not_mount)
    refs = case.write(directory)
    mountpoint = directory / "mnt"
    mountpoint.mkdir()
    capsys.readouterr()
    status = cli.main(["-f", str(refs), str(mountpoint)])
    return Outcome(refs, status, capsys.readouterr().err, is_mounted(mountpoint))


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
@pytest.mark.usefixtures("restore_logging")
def test_malformed_set_exits_2_with_one_line(
    case: Case,
    tmp_path: Path,
    real_outcomes: dict[str, Outcome],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if case.real:
        outcome = real_outcomes[case.id]
    else:
        outcome = run_in_process(case, tmp_path, capsys, monkeypatch)
    assert outcome.status == 2, outcome.stderr
    assert "Traceback" not in outcome.stderr
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    line = lines[0]
    assert line.startswith("refmount: error: "), line
    assert str(outcome.refs) in line
    if case.key is not None:
        assert f"key {case.key!r}" in line
    assert case.problem in line
    assert not outcome.was_mounted


# ----------------------------------------------------------------------------- --skip-invalid


@dataclass
class Skipped:
    """A ``--skip-invalid`` mount of many bad keys, read while it was mounted."""

    files: dict[str, bytes]
    log: str

    def warnings(self) -> list[str]:
        return [line for line in self.log.splitlines() if " WARNING " in line]


def mounted_files(mount: Mount) -> dict[str, bytes]:
    """Return every file of the mount (its path relative to the mount) with its bytes."""
    files: dict[str, bytes] = {}
    for directory, _, names in os.walk(mount.path):
        for name in names:
            path = Path(directory) / name
            files[str(path.relative_to(mount.path))] = path.read_bytes()
    return files


def json_skip_cases(version: int) -> list[Case]:
    return [case for case in CASES if case.bad and case.version == version]


def mount_skipping(refs: Path, mountpoint: Path) -> Skipped:
    with mounted(refs, mountpoint, "--skip-invalid") as mount:
        files = mounted_files(mount)
    return Skipped(files, mount.log_text())


@pytest.fixture(scope="module")
def skipped_v0(tmp_path_factory: pytest.TempPathFactory) -> Skipped:
    """Mount one Version 0 file holding the bad keys of every key-level case."""
    directory = tmp_path_factory.mktemp("skip-v0")
    (directory / "data.bin").write_bytes(DATA)
    refs: dict[str, Any] = {"ok": OK, "text": "fine"}
    for case in json_skip_cases(0):
        refs.update(case.bad)
    (directory / "refs.json").write_text(json.dumps(refs))
    return mount_skipping(directory / "refs.json", directory / "mnt")


@pytest.fixture(scope="module")
def skipped_v1(tmp_path_factory: pytest.TempPathFactory) -> Skipped:
    """Mount one Version 1 file holding the bad ``refs`` of every key-level v1 case."""
    directory = tmp_path_factory.mktemp("skip-v1")
    (directory / "data.bin").write_bytes(DATA)
    refs: dict[str, Any] = {"ok": ["{{u}}", 2, 10]}
    for case in json_skip_cases(1):
        refs.update(case.bad)
    value = {"version": 1, "templates": V1_TEMPLATES, "refs": refs}
    (directory / "refs.json").write_text(json.dumps(value))
    return mount_skipping(directory / "refs.json", directory / "mnt")


@pytest.fixture(scope="module")
def skipped_parquet(tmp_path_factory: pytest.TempPathFactory) -> Skipped:
    """Mount one Parquet set holding every malformed array next to a good one."""
    directory = tmp_path_factory.mktemp("skip-parquet")
    root = parquet_set(directory, metadata(good=GOOD, **BAD_ARRAYS), _good(directory))
    return mount_skipping(root, directory / "mnt")


def test_skip_invalid_mounts_the_valid_remainder(
    skipped_v0: Skipped, skipped_v1: Skipped, skipped_parquet: Skipped
) -> None:
    assert skipped_v0.files == {
        "ok": DATA[2:12],
        "text": b"fine",
        "fd/inner": b"y",  # the directory half of the file-and-directory case
    }
    bad_v0 = [key for case in json_skip_cases(0) for key in case.bad if key != "fd/inner"]
    assert len(skipped_v0.warnings()) == len(bad_v0), skipped_v0.log
    assert skipped_v1.files == {"ok": DATA[2:12]}
    assert len(skipped_v1.warnings()) == len(json_skip_cases(1)), skipped_v1.log
    assert skipped_parquet.files == {
        ".zmetadata": skipped_parquet.files[".zmetadata"],
        ".zgroup": json.dumps({"zarr_format": 2}).encode(),
        "good/.zarray": json.dumps(GOOD).encode(),
        "good/0": DATA[0:10],
        "good/1": DATA[10:20],
    }
    assert len(skipped_parquet.warnings()) == len(json_skip_cases(-1)), skipped_parquet.log


SKIP_CASES = [case for case in CASES if case.bad]


@pytest.mark.parametrize("case", SKIP_CASES, ids=[case.id for case in SKIP_CASES])
def test_skip_invalid_leaves_out_the_bad_key_with_one_warning(
    case: Case, skipped_v0: Skipped, skipped_v1: Skipped, skipped_parquet: Skipped
) -> None:
    skipped = {0: skipped_v0, 1: skipped_v1, -1: skipped_parquet}[case.version]
    assert case.key is not None
    assert case.key not in skipped.files
    named = [line for line in skipped.warnings() if f"{case.key!r}" in line]
    assert len(named) == 1, skipped.log
    assert case.problem in named[0]


# ----------------------------------------------------------------------------- Parquet, lazily

LAZY: dict[str, tuple[str, str, str, tuple[str, bytes] | None]] = {
    # array: (case, what the log says, the chunk that fails, a chunk that reads and its bytes)
    "b": ("garbage", "not a readable Parquet file", "b/0", None),
    "c": ("missing-columns", "columns are ['offset', 'path']", "c/0", None),
    "d": ("offset-string", "column 'offset' has type string", "d/0", None),
    "e": ("negative-offset-row", "offset is negative (-5)", "e/0", ("e/1", DATA[30:40])),
    "f": ("too-few-rows", "record has 1 rows, chunk needs row 1", "f/1", ("f/0", DATA[40:50])),
}


def lazy_records(directory: Path) -> dict[str, pa.Table | bytes]:
    rows = good_rows(directory)
    target = str(directory / "data.bin")
    return {
        "a": record_table(rows),
        "b": b"PAR1 garbage that is not a parquet file PAR1",
        "c": record_table(rows, size=None, raw=None),
        "d": record_table(rows, offset=pa.array(["0", "10"])),
        "e": record_table([(target, -5, 10), (target, 30, 10)]),
        "f": record_table([(target, 40, 10)]),
    }


@pytest.fixture(scope="module")
def lazy_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    """Mount a Parquet set whose record files, other than the probed one, are malformed."""
    directory = tmp_path_factory.mktemp("lazy")
    arrays = dict.fromkeys(["a", *LAZY], GOOD)
    root = parquet_set(directory, metadata(**arrays), lazy_records(directory))
    with mounted(root, directory / "mnt") as mount:
        yield mount


def test_only_the_probed_record_is_checked_at_load(lazy_mount: Mount) -> None:
    # "a" sorts first and has chunks: its record file is the one the load probes
    assert (lazy_mount.path / "a" / "0").read_bytes() == DATA[0:10]
    assert (lazy_mount.path / "a" / "1").read_bytes() == DATA[10:20]


@pytest.mark.parametrize("array", sorted(LAZY), ids=[LAZY[a][0] for a in sorted(LAZY)])
def test_bad_record_file_is_eio_for_its_chunk_and_the_rest_serves(
    lazy_mount: Mount, array: str
) -> None:
    _, problem, failing, working = LAZY[array]
    with pytest.raises(OSError, match="Input/output error") as caught:
        (lazy_mount.path / failing).read_bytes()
    assert caught.value.errno == errno.EIO
    record = str(lazy_mount.path.parent / "refs.parq" / array / "refs.0.parq")
    named = [line for line in lazy_mount.log_text().splitlines() if record in line]
    assert named, lazy_mount.log_text()
    assert any(problem in line for line in named), named
    if working is not None:
        name, expected = working
        assert (lazy_mount.path / name).read_bytes() == expected
    assert (lazy_mount.path / "a" / "1").read_bytes() == DATA[10:20]
    assert os.listdir(lazy_mount.path / "a") == [".zarray", "0", "1"]


# ----------------------------------------------------------------------------- hostile input

PEAK_KIB = 200 * 1024
"""The most RSS a child may reach on hostile input (an idle load takes about 40 MiB)."""

BOMB = 256 << 20
"""What each bomb inflates to: far past the caps the tests set."""


def assert_refused(outcome: Bounded, refs: Path, problem: str, key: str | None = None) -> None:
    """Exit status 2, one line naming the file (and the key) and the problem, bounded RSS."""
    assert outcome.status == 2, outcome.stderr
    # (a load that takes seconds shows its progress first, on lines of its own)
    lines = [line for line in outcome.stderr.splitlines() if not line.startswith("loading ")]
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("refmount: error: "), lines[0]
    assert str(refs) in lines[0]
    if key is not None:
        assert f"key {key!r}" in lines[0], lines[0]
    assert problem in lines[0], lines[0]
    assert outcome.peak_kib < PEAK_KIB, outcome.peak_kib


def _gzip_bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\x00" * (1 << 20)
    return b"".join(packer.compress(zeros) for _ in range(BOMB >> 20)) + packer.flush()


def _zstd_bomb() -> bytes:
    packer = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = b"\x00" * (1 << 20)
    return b"".join(packer.compress(zeros) for _ in range(BOMB >> 20)) + packer.flush()


BOMBS = {"gzip": (_gzip_bomb, ".gz"), "zstd": (_zstd_bomb, ".zst")}


@pytest.mark.parametrize("command", [(), ("check",)], ids=["mount", "check"])
@pytest.mark.parametrize("compression", sorted(BOMBS))
def test_a_compression_bomb_stops_at_the_cap(
    tmp_path: Path, compression: str, command: tuple[str, ...]
) -> None:
    make, suffix = BOMBS[compression]
    refs = tmp_path / f"refs.json{suffix}"
    refs.write_bytes(make())
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    where = () if command else ("-f",)
    outcome = run_bounded(
        tmp_path,
        *command,
        *where,
        "--max-refs-size",
        "1M",
        str(refs),
        *(() if command else (str(mountpoint),)),
    )
    if command:  # check prints its summary, the problem in it
        assert outcome.status == 2
        assert f"inflates ({compression}) to more than 1,048,576 bytes" in outcome.stdout
        assert outcome.peak_kib < PEAK_KIB, outcome.peak_kib
        return
    assert_refused(outcome, refs, f"inflates ({compression}) to more than 1,048,576 bytes")
    assert not is_mounted(mountpoint)


def test_a_reference_file_over_the_cap_is_refused_as_it_is_read(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    with open(refs, "wb") as file:
        file.write(b'{"k": "')
        for _ in range(64):
            file.write(b"x" * (1 << 20))
        file.write(b'"}')
    (tmp_path / "mnt").mkdir()
    outcome = run_bounded(
        tmp_path, "-f", "-o", "max_refs_size=1M", str(refs), str(tmp_path / "mnt")
    )
    assert_refused(outcome, refs, "is more than 1,048,576 bytes, the limit on a reference file")


def deep_keys(count: int, depth: int) -> dict[str, Any]:
    """``count`` keys, each ``depth`` directories deep, with nothing shared below the root."""
    return {f"d{n}/" + "a/" * depth + "x": "hi" for n in range(count)}


def test_keys_thousands_of_directories_deep_cost_memory_linear_in_the_set(
    tmp_path: Path,
) -> None:
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"version": 1, "refs": deep_keys(4, 20_000)}))
    outcome = run_bounded(tmp_path, "check", str(refs))
    assert outcome.status == 0, outcome.stderr
    # 80 000 directories at a few hundred bytes each; the square of the depth was gigabytes
    assert outcome.peak_kib < 120 * 1024, outcome.peak_kib


def test_a_deep_key_mounts_with_skip_invalid_in_bounded_memory(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    keys = {**deep_keys(2, 20_000), "d0/" + "a/" * 20_000 + "x/..": "bad"}
    refs.write_text(json.dumps(keys))
    with mounted(refs, tmp_path / "mnt", "--skip-invalid") as mount:
        deep = mount.path / "d1"
        file = os.path.join(str(deep), *["a"] * 20_000, "x")
        descriptor = os.open(deep, os.O_RDONLY)  # too deep for one path: walk it
        try:
            for part in os.path.relpath(file, deep).split("/")[:-1]:
                inner = os.open(part, os.O_RDONLY, dir_fd=descriptor)
                os.close(descriptor)
                descriptor = inner
            leaf = os.open("x", os.O_RDONLY, dir_fd=descriptor)
            assert os.read(leaf, 10) == b"hi"
            os.close(leaf)
        finally:
            os.close(descriptor)
        status = Path(f"/proc/{mount.process.pid}/status").read_text()
        peak = int(
            next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]
        )
    assert peak < PEAK_KIB, peak
    assert "'..' path component" in mount.log_text()


TEMPLATE_ATTACKS = {
    "center": ('{{ "x"|center(1000000000) }}', "center would make"),
    "format": ('{{ "%1000000000d"|format(1) }}', "format width"),
    "join": ('{{ range(100000)|join("x" * 1000000) }}', "join would make"),
    "lipsum": ("{{ lipsum(100000, False, 100000, 100000) }}", "lipsum would make"),
    "output": ('{% for a in range(100000) %}{{ "x" * 1000 }}{% endfor %}', "longer than"),
    "loops": (
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        "rendering took more than 2 s",
    ),
}


@pytest.mark.parametrize("attack", sorted(TEMPLATE_ATTACKS))
def test_a_hostile_template_stops_the_load_naming_the_key(tmp_path: Path, attack: str) -> None:
    text, problem = TEMPLATE_ATTACKS[attack]
    (tmp_path / "data.bin").write_bytes(DATA)
    refs = tmp_path / "refs.json"
    item = {"key": "g/{{i}}", "url": "data.bin" + text, "dimensions": {"i": [0, 1]}}
    refs.write_text(json.dumps({"version": 1, "refs": {"ok": OK}, "gen": [item]}))
    (tmp_path / "mnt").mkdir()
    outcome = run_bounded(tmp_path, "-f", str(refs), str(tmp_path / "mnt"))
    assert_refused(outcome, refs, problem, key="g/0")
    assert "refused to render" in outcome.stderr


@pytest.mark.http
@pytest.mark.parametrize("ignore_range", [False, True], ids=["ranges", "whole-body"])
def test_a_remote_reference_file_counts_against_the_cap_as_it_streams(
    tmp_path: Path, http_server: RangeHTTPServer, ignore_range: bool
) -> None:
    http_server.ignore_range = ignore_range
    url = http_server.add("/refs.json", b'{"k": "' + b"x" * (128 << 20) + b'"}')
    (tmp_path / "mnt").mkdir()
    outcome = run_bounded(tmp_path, "-f", "--max-refs-size", "1M", url, str(tmp_path / "mnt"))
    assert outcome.status == 2, outcome.stderr
    assert url in outcome.stderr
    assert "is more than 1,048,576 bytes" in outcome.stderr
    # the body is 128 MiB: read whole it would show here, read as a stream it does not
    assert outcome.peak_kib < 100 * 1024, outcome.peak_kib


@pytest.mark.parametrize("command", [(), ("check",), ("--skip-invalid",)])
def test_gen_keys_stored_one_by_one_count_against_the_cap(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    refs = tmp_path / "refs.json"
    # not a chunk grid's keys (no directory): stored one by one, 30 GB at the peak of a load
    item = {"key": "k{{i}}", "url": "data.bin", "dimensions": {"i": {"stop": 10**8}}}
    refs.write_text(json.dumps({"version": 1, "refs": {"ok": OK}, "gen": [item]}))
    (tmp_path / "mnt").mkdir()
    checking = command == ("check",)
    where = () if checking else ("-f", str(refs), str(tmp_path / "mnt"))
    started = time.monotonic()
    outcome = run_bounded(tmp_path, *command, *where, *((str(refs),) if checking else ()))
    assert time.monotonic() - started < 60  # generous: refused before any key is made
    problem = "gen item 0: key 'k{{i}}': its 100,000,000 keys, stored one by one"
    if checking:  # check prints its summary, the problem in it
        assert outcome.status == 2, outcome.stderr
        assert problem in outcome.stdout
        assert "(--max-refs-size" in outcome.stdout
        assert outcome.peak_kib < PEAK_KIB, outcome.peak_kib
        return
    assert_refused(outcome, refs, problem)
    assert "-o max_refs_size=SIZE)" in outcome.stderr
    assert not is_mounted(tmp_path / "mnt")
