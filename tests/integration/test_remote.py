"""End-to-end with real local servers: S3 (moto) and HTTP targets, remote reference files, a
server that ignores Range, and a fault proxy; bytes are right or the read is EIO, never wrong."""

from __future__ import annotations

import errno
import gzip
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from refmount.read.failures import FAILED_RANGE_SECONDS
from tests.support.datasets import target_bytes, zarray
from tests.support.mounting import Mount, mounted, requires_fuse
from tests.support.servers import Fault, FaultProxy, RangeHTTPServer, S3Bucket

pytestmark = [pytest.mark.usefixtures("each_fetcher"), pytest.mark.fuse, requires_fuse]

READ_DEADLINE = 60.0
"""No single read may take longer than this, whatever the servers do."""

FAULT_TEXT = {
    "fsspec": {Fault.ERROR_503: "503", Fault.RESET: "reset", Fault.TRUNCATE: "payload"},
    "auto": {Fault.ERROR_503: "503", Fault.RESET: "reset", Fault.TRUNCATE: "Incomplete"},
}
"""Part of the last error's text that the final log line of a failed read shows, per
engine (aiohttp's and hyper's words for a cut body differ)."""

TRANSIENT = [Fault.ERROR_503, Fault.RESET, Fault.TRUNCATE]

Expected = dict[str, bytes]


# ------------------------------------------------------------------------------ helpers


def sample_targets() -> dict[str, bytes]:
    """Two small target objects, addressed by their path below the server's root."""
    return {"data/a.bin": target_bytes(60_000, 11), "data/b.bin": target_bytes(5_000, 12)}


def refs_for(
    url_of: Callable[[str], str], targets: Mapping[str, bytes], *, wholes: bool = True
) -> tuple[dict[str, Any], Expected]:
    """A v0 set over ``targets``: inline values, ranges (edges included) and whole objects."""
    a, b = targets["data/a.bin"], targets["data/b.bin"]
    refs: dict[str, Any] = {
        ".zgroup": {"zarr_format": 2},
        "text": "inline ☃",
        "first_byte": [url_of("data/a.bin"), 0, 1],
        "b_tail": [url_of("data/b.bin"), 4000, 1000],
    }
    expected: Expected = {
        ".zgroup": json.dumps({"zarr_format": 2}).encode(),
        "text": "inline ☃".encode(),
        "first_byte": a[:1],
        "b_tail": b[4000:],
    }
    if wholes:
        refs["whole_a"] = [url_of("data/a.bin")]
        refs["whole_b"] = [url_of("data/b.bin")]
        expected["whole_a"] = a
        expected["whole_b"] = b
    for i in range(12):
        offset, length = i * 4000 + 7, 1500 + 100 * i
        refs[f"x/{i}"] = [url_of("data/a.bin"), offset, length]
        expected[f"x/{i}"] = a[offset : offset + length]
    return refs, expected


def write_refs(path: Path, refs: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(refs))
    return path


def read_within(path: Path, seconds: float = READ_DEADLINE) -> bytes | OSError:
    """Read ``path`` whole; fail the test if the read does not finish within ``seconds``."""
    result: list[bytes | OSError] = []

    def run() -> None:
        try:
            result.append(path.read_bytes())
        except OSError as error:
            result.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"reading {path} did not finish within {seconds} s")
    return result[0]


def right_or_eio(path: Path, expected: bytes) -> bool:
    """Return True for the right bytes, False for EIO; anything else fails the test."""
    got = read_within(path)
    if isinstance(got, OSError):
        assert got.errno == errno.EIO, f"{path}: {got!r}"
        return False
    assert got == expected, f"{path}: wrong bytes ({len(got)} bytes, {len(expected)} expected)"
    return True


def assert_eio(path: Path) -> None:
    got = read_within(path)
    assert isinstance(got, OSError), f"{path} read {len(got)} bytes instead of failing"
    assert got.errno == errno.EIO, repr(got)


def open_direct(path: Path) -> int | None:
    """Open ``path`` with O_DIRECT, or return None where the kernel refuses it for FUSE."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as error:
        if error.errno == errno.EINVAL:
            return None
        raise


def check_sizes(mount: Mount, expected: Expected) -> None:
    """Every ``st_size`` is the length of the bytes the key must read as (no read before)."""
    sizes = {key: (mount.path / key).stat().st_size for key in expected}
    assert sizes == {key: len(data) for key, data in expected.items()}


def check_bytes(mount: Mount, expected: Expected) -> None:
    for key, data in expected.items():
        got = read_within(mount.path / key)
        assert not isinstance(got, OSError), f"{key}: {got!r}\n{mount.log_text()[-3000:]}"
        assert got == data, f"{key}: wrong bytes"


def log_lines(mount: Mount, *fragments: str) -> list[str]:
    """Return the log lines that contain every one of ``fragments`` (case-insensitive)."""
    wanted = [fragment.lower() for fragment in fragments]
    return [
        line
        for line in mount.log_text().splitlines()
        if all(fragment in line.lower() for fragment in wanted)
    ]


def s3_options(bucket: S3Bucket) -> str:
    return json.dumps({"s3": {"endpoint_url": bucket.endpoint_url}})


def serve_targets(server: RangeHTTPServer, targets: Mapping[str, bytes]) -> None:
    for path, data in targets.items():
        server.add(path, data)


# ---------------------------------------------------------------------------- S3 targets


@pytest.mark.s3
@pytest.mark.parametrize("form", ["per-protocol", "flat", "o-shortcut", "o-region-requester-pays"])
def test_s3_targets(tmp_path: Path, s3_bucket: S3Bucket, form: str) -> None:
    targets = sample_targets()
    s3_bucket.put_objects(targets)
    refs, expected = refs_for(s3_bucket.url, targets)
    path = write_refs(tmp_path / "set" / "refs.json", refs)
    endpoint = s3_bucket.endpoint_url
    options = {
        "per-protocol": ["--remote-options", s3_options(s3_bucket)],
        "flat": ["--remote-options", json.dumps({"endpoint_url": endpoint})],
        "o-shortcut": ["-o", f"s3_endpoint_url={endpoint}"],
        "o-region-requester-pays": [
            "-o",
            f"s3_endpoint_url={endpoint},s3_region=us-east-1,s3_requester_pays",
        ],
    }[form]
    with mounted(path, tmp_path / "mnt", "--xattr", *options) as mount:
        check_sizes(mount, expected)
        check_bytes(mount, expected)
        assert os.getxattr(mount.path / "whole_a", "user.refmount.url") == (
            s3_bucket.url("data/a.bin").encode()
        )


@pytest.mark.s3
def test_s3_anonymous_reads_public_objects_only(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    public = target_bytes(3_000, 21)
    s3_bucket.put("open/p.bin", public, public=True)
    s3_bucket.put("closed/q.bin", public)
    refs = {
        "public_range": [s3_bucket.url("open/p.bin"), 100, 200],
        "public_whole": [s3_bucket.url("open/p.bin")],
        "private_range": [s3_bucket.url("closed/q.bin"), 0, 10],
    }
    path = write_refs(tmp_path / "set" / "refs.json", refs)
    option = f"s3_endpoint_url={s3_bucket.endpoint_url},s3_anon"
    with mounted(path, tmp_path / "mnt", "-o", option) as mount:
        assert (mount.path / "public_whole").stat().st_size == len(public)
        assert read_within(mount.path / "public_range") == public[100:300]
        assert read_within(mount.path / "public_whole") == public
        assert_eio(mount.path / "private_range")
    assert log_lines(mount, "'private_range'", s3_bucket.url("closed/q.bin"))


# -------------------------------------------------------------------------- HTTP targets


@pytest.mark.http
def test_http_targets(tmp_path: Path, http_server: RangeHTTPServer) -> None:
    targets = sample_targets()
    serve_targets(http_server, targets)
    refs, expected = refs_for(http_server.url_for, targets)
    path = write_refs(tmp_path / "set" / "refs.json", refs)
    with mounted(path, tmp_path / "mnt") as mount:
        check_sizes(mount, expected)
        # the sizes of the two whole objects, asked once per URL (HEAD) and cached
        assert http_server.count("HEAD") == 2, http_server.requests
        check_bytes(mount, expected)
        gets = [request for request in http_server.requests if request.method == "GET"]
        assert gets
        assert all(request.range is not None for request in gets)  # always ranged
        # a second pass is served from caches, without asking the server again
        requests = len(http_server.requests)
        check_bytes(mount, expected)
        assert len(http_server.requests) == requests


AGENTS = {
    "auto": {"http": "object_store", "s3": "object_store"},
    "fsspec": {"http": "aiohttp", "s3": "botocore"},
}
"""What each engine's requests name themselves (``User-Agent``), per protocol."""


@pytest.mark.s3
@pytest.mark.http
def test_the_engine_chosen_serves_http_and_s3(
    tmp_path: Path, http_server: RangeHTTPServer, each_fetcher: str, aws_env: dict[str, str]
) -> None:
    """With ``--fetcher auto`` obstore reads HTTP and S3 targets, with ``fsspec`` aiohttp and
    botocore do: the range server, also the S3 endpoint, sees who asked."""
    data = target_bytes(50_000, 31)
    http_server.add("web/d.bin", data)
    http_server.add("bucket/d.bin", data)
    refs = {
        "h": [http_server.url_for("web/d.bin"), 100, 1000],
        "s": ["s3://bucket/d.bin", 100, 1000],
    }
    path = write_refs(tmp_path / "set" / "refs.json", refs)
    option = f"s3_endpoint_url={http_server.url},s3_region=us-east-1"
    with mounted(path, tmp_path / "mnt", "-o", option) as mount:
        assert read_within(mount.path / "h") == data[100:1100]
        assert read_within(mount.path / "s") == data[100:1100]
    gets = {
        request.path.lstrip("/"): (request.header("User-Agent") or "").lower()
        for request in http_server.requests
        if request.method == "GET"
    }
    assert AGENTS[each_fetcher]["http"] in gets["web/d.bin"], gets
    assert AGENTS[each_fetcher]["s3"] in gets["bucket/d.bin"], gets


@pytest.mark.s3
@pytest.mark.http
def test_one_set_mixing_s3_http_and_local_targets(
    tmp_path: Path, s3_bucket: S3Bucket, http_server: RangeHTTPServer
) -> None:
    local = tmp_path / "set"
    local.mkdir()
    data = {
        "s3": target_bytes(20_000, 31),
        "http": target_bytes(20_000, 32),
        "local": target_bytes(20_000, 33),
    }
    s3_url = s3_bucket.put("m/s3.bin", data["s3"])
    http_url = http_server.add("m/http.bin", data["http"])
    (local / "local.bin").write_bytes(data["local"])
    urls = {"s3": s3_url, "http": http_url, "local": "local.bin"}
    refs: dict[str, Any] = {}
    expected: Expected = {}
    for kind, url in urls.items():
        refs[f"{kind}/whole"] = [url]
        expected[f"{kind}/whole"] = data[kind]
        for i in range(4):
            refs[f"{kind}/{i}"] = [url, i * 3000 + 1, 2500]
            expected[f"{kind}/{i}"] = data[kind][i * 3000 + 1 : i * 3000 + 2501]
    path = write_refs(local / "refs.json", refs)
    with mounted(path, tmp_path / "mnt", "--remote-options", s3_options(s3_bucket)) as mount:
        check_sizes(mount, expected)
        check_bytes(mount, expected)
        assert sorted(os.listdir(mount.path)) == ["http", "local", "s3"]


# --------------------------------------------------------------- a server that ignores Range


@pytest.mark.http
def test_server_that_ignores_range_gives_eio_for_ranges_only(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    targets = sample_targets()
    serve_targets(http_server, targets)
    http_server.ignore_range = True
    a_url = http_server.url_for("data/a.bin")
    local = tmp_path / "set"
    local.mkdir()
    (local / "local.bin").write_bytes(b"0123456789")
    refs = {
        "ranged_chunk": [a_url, 100, 200],
        "whole_a": [a_url],
        "whole_b": [http_server.url_for("data/b.bin")],
        "inline": "still here",
        "local": ["local.bin", 2, 5],
    }
    path = write_refs(local / "refs.json", refs)
    with mounted(path, tmp_path / "mnt") as mount:
        assert (mount.path / "ranged_chunk").stat().st_size == 200
        assert_eio(mount.path / "ranged_chunk")
        assert read_within(mount.path / "whole_a") == targets["data/a.bin"]
        assert read_within(mount.path / "whole_b") == targets["data/b.bin"]
        assert read_within(mount.path / "inline") == b"still here"
        assert read_within(mount.path / "local") == b"23456"
        assert_eio(mount.path / "ranged_chunk")  # still refused, never the wrong bytes
    assert http_server.count("GET", "data/a.bin") >= 2
    lines = log_lines(mount, "'ranged_chunk'", a_url, "ignored the range")
    assert lines, mount.log_text()[-3000:]
    assert not log_lines(mount, "'whole_a'", "error")


# ------------------------------------------------------------------------------ fault proxy


def proxied_set(
    tmp_path: Path, http_server: RangeHTTPServer, proxy: FaultProxy
) -> tuple[Path, Expected]:
    """A set whose remote refs all go through ``proxy`` (ranges only: no size requests)."""
    targets = sample_targets()
    serve_targets(http_server, targets)
    refs, expected = refs_for(proxy.url_for, targets, wholes=False)
    return write_refs(tmp_path / "set" / "refs.json", refs), expected


@pytest.mark.http
@pytest.mark.parametrize("fault", TRANSIENT, ids=lambda fault: fault.value)
def test_transient_faults_are_retried(
    tmp_path: Path, http_server: RangeHTTPServer, fault_proxy: FaultProxy, fault: Fault
) -> None:
    path, expected = proxied_set(tmp_path, http_server, fault_proxy)
    fault_proxy.fail_next(3, fault)
    with mounted(path, tmp_path / "mnt", "--retries", "4", "--timeout", "5s") as mount:
        check_sizes(mount, expected)
        check_bytes(mount, expected)
    assert fault_proxy.pending() == 0
    assert fault_proxy.count_applied(fault) == 3


@pytest.mark.http
@pytest.mark.parametrize("fault", TRANSIENT, ids=lambda fault: fault.value)
def test_faults_that_outlast_the_retries_give_eio_and_the_mount_recovers(
    tmp_path: Path,
    http_server: RangeHTTPServer,
    fault_proxy: FaultProxy,
    fault: Fault,
    each_fetcher: str,
) -> None:
    path, expected = proxied_set(tmp_path, http_server, fault_proxy)
    url = fault_proxy.url_for("data/a.bin")
    with mounted(path, tmp_path / "mnt", "--retries", "2", "--timeout", "5s") as mount:
        fault_proxy.set_default(fault)
        assert_eio(mount.path / "x/3")
        assert fault_proxy.count_applied(fault) >= 3  # the first attempt and two retries
        assert read_within(mount.path / "text") == expected["text"]
        fault_proxy.set_default(Fault.PASS)
        time.sleep(FAILED_RANGE_SECONDS)  # until then the range fails again at once
        assert read_within(mount.path / "x/3") == expected["x/3"]  # errors are not cached
        check_bytes(mount, expected)
    lines = log_lines(mount, "'x/3'", url, FAULT_TEXT[each_fetcher][fault])
    assert [line for line in lines if "ERROR" in line], mount.log_text()[-3000:]


@pytest.mark.http
def test_a_stalled_server_is_cut_off_by_the_timeout(
    tmp_path: Path, http_server: RangeHTTPServer, fault_proxy: FaultProxy
) -> None:
    path, expected = proxied_set(tmp_path, http_server, fault_proxy)
    timeout, retries, backoff = 1.0, 1, 0.05  # backoff: the longest delay before retry 1
    one_request = timeout * (retries + 1) + backoff
    assert fault_proxy.stall_seconds >= 10 * one_request
    options = ["--timeout", f"{timeout:g}s", "--retries", str(retries)]
    with mounted(path, tmp_path / "mnt", *options) as mount:
        fault_proxy.set_default(Fault.STALL)
        fd = open_direct(mount.path / "x/5")
        if fd is not None:
            # O_DIRECT: exactly one FUSE read, so one request with its retries
            try:
                started = time.monotonic()
                with pytest.raises(OSError, match="Input/output error") as caught:
                    os.pread(fd, 4096, 0)
                assert caught.value.errno == errno.EIO
                assert time.monotonic() - started < one_request + 3.0
            finally:
                os.close(fd)
        # a buffered read: after a failed readahead the kernel tries the page once more, and
        # is answered with the failure just seen: one request's worth, far below the stall
        started = time.monotonic()
        assert_eio(mount.path / "x/6")
        assert time.monotonic() - started < one_request + 4.0
        fault_proxy.set_default(Fault.PASS)
        time.sleep(FAILED_RANGE_SECONDS)
        check_bytes(mount, expected)
    assert fault_proxy.count_applied(Fault.STALL) >= retries + 1
    assert log_lines(mount, "'x/6'", fault_proxy.url_for("data/a.bin"), "ERROR")


@pytest.mark.http
def test_random_faults_never_give_wrong_bytes(
    tmp_path: Path, http_server: RangeHTTPServer, fault_proxy: FaultProxy
) -> None:
    data = target_bytes(200_000, 41)
    http_server.add("soak.bin", data)
    url = fault_proxy.url_for("soak.bin")
    refs: dict[str, Any] = {}
    expected: Expected = {}
    for i in range(48):
        offset, length = i * 4000 + 3 * i, 1000 + 61 * i
        refs[f"c/{i}"] = [url, offset, length]
        expected[f"c/{i}"] = data[offset : offset + length]
    path = write_refs(tmp_path / "set" / "refs.json", refs)
    # mostly quick failures, some stalls that the 1 s timeout has to cut; with half of the
    # requests failing and one retry, some reads succeed on a retry and a few get EIO
    faults = [*TRANSIENT, *TRANSIENT, Fault.STALL]
    fault_proxy.set_random(0.5, faults, seed=7)
    options = ["--timeout", "1s", "--retries", "1"]
    with mounted(path, tmp_path / "mnt", *options) as mount:
        with ThreadPoolExecutor(max_workers=8) as pool:
            outcomes = dict(
                zip(
                    expected,
                    pool.map(lambda key: right_or_eio(mount.path / key, expected[key]), expected),
                    strict=True,
                )
            )
        applied = fault_proxy.applied
        assert sum(item.fault is not Fault.PASS for item in applied) >= 5
        fault_proxy.clear()
        time.sleep(FAILED_RANGE_SECONDS)  # until then a range that just failed fails again
        for key, ok in outcomes.items():
            if not ok:  # failed reads leave nothing behind: they succeed once faults stop
                assert right_or_eio(mount.path / key, expected[key]), key
        check_bytes(mount, expected)


# ------------------------------------------------------------------ remote reference files


@pytest.mark.s3
@pytest.mark.parametrize("form", ["target-options", "o-shortcut"])
def test_reference_file_on_s3(tmp_path: Path, s3_bucket: S3Bucket, form: str) -> None:
    targets = sample_targets()
    s3_bucket.put_objects({f"sets/{path}": data for path, data in targets.items()})
    refs, expected = refs_for(lambda path: s3_bucket.url(f"sets/{path}"), targets)
    a = targets["data/a.bin"]
    refs["relative"] = ["data/a.bin", 50, 60]  # resolved against s3://bucket/sets
    expected["relative"] = a[50:110]
    s3_bucket.put("sets/refs.json", json.dumps(refs).encode())
    endpoint = s3_bucket.endpoint_url
    if form == "target-options":
        options = [
            "--target-options",
            json.dumps({"endpoint_url": endpoint}),
            "--remote-options",
            s3_options(s3_bucket),
        ]
    else:
        options = ["-o", f"s3_endpoint_url={endpoint}"]
    with mounted(s3_bucket.url("sets/refs.json"), tmp_path / "mnt", "--xattr", *options) as mount:
        check_sizes(mount, expected)
        check_bytes(mount, expected)
        assert os.getxattr(mount.path / "relative", "user.refmount.url") == (
            s3_bucket.url("sets/data/a.bin").encode()
        )


@pytest.mark.http
@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_reference_file_over_http(
    tmp_path: Path, http_server: RangeHTTPServer, compression: str
) -> None:
    targets = sample_targets()
    serve_targets(http_server, targets)
    refs, expected = refs_for(http_server.url_for, targets)
    text = json.dumps(refs).encode()
    if compression == "gzip":
        name, packed = "refs.json.gz", gzip.compress(text)
    else:
        zstandard = pytest.importorskip("zstandard")
        name, packed = "refs.json.zst", zstandard.ZstdCompressor().compress(text)
    url = http_server.add(f"sets/{name}", packed)
    with mounted(url, tmp_path / "mnt") as mount:
        check_sizes(mount, expected)
        check_bytes(mount, expected)
    assert http_server.count("GET", f"sets/{name}") >= 1


@pytest.mark.s3
@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
def test_parquet_reference_directory_on_s3(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    refs_to_dataframe = pytest.importorskip("kerchunk.df").refs_to_dataframe
    data = target_bytes(10_000, 51)
    target = s3_bucket.put("targets/data.bin", data)
    refs = {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "x/.zarray": json.dumps(zarray([4, 6], [2, 3])),
        "x/0.0": [target, 0, 6],
        "x/0.1": [target, 6, 6],
        "x/1.0": [target, 100, 6],
        "x/1.1": "inline",
    }
    local = tmp_path / "refs.parq"
    refs_to_dataframe(refs, str(local), record_size=2)
    keys = s3_bucket.put_tree(local, "sets/refs.parq")
    assert "sets/refs.parq/.zmetadata" in keys
    assert any(key.startswith("sets/refs.parq/x/refs.") for key in keys)
    options = [
        "--target-options",
        json.dumps({"endpoint_url": s3_bucket.endpoint_url}),
        "--remote-options",
        s3_options(s3_bucket),
    ]
    with mounted(s3_bucket.url("sets/refs.parq"), tmp_path / "mnt", *options) as mount:
        assert sorted(os.listdir(mount.path)) == [".zgroup", ".zmetadata", "x"]
        assert sorted(os.listdir(mount.path / "x")) == [".zarray", "0.0", "0.1", "1.0", "1.1"]
        assert read_within(mount.path / "x/0.0") == data[0:6]
        assert read_within(mount.path / "x/0.1") == data[6:12]
        assert read_within(mount.path / "x/1.0") == data[100:106]
        assert read_within(mount.path / "x/1.1") == b"inline"
        zarray_bytes = read_within(mount.path / "x/.zarray")
        assert isinstance(zarray_bytes, bytes), zarray_bytes
        assert json.loads(zarray_bytes)["chunks"] == [2, 3]
        assert not (mount.path / "x/0.2").exists()


@pytest.mark.http
def test_simplecache_chain_over_http(tmp_path: Path, http_server: RangeHTTPServer) -> None:
    targets = sample_targets()
    serve_targets(http_server, targets)
    refs, expected = refs_for(http_server.url_for, targets)
    url = http_server.add("sets/refs.json", json.dumps(refs).encode())
    cache = tmp_path / "cache"
    cache.mkdir()
    options = ["--target-options", json.dumps({"simplecache": {"cache_storage": str(cache)}})]
    with mounted(f"simplecache::{url}", tmp_path / "mnt", *options) as mount:
        check_sizes(mount, expected)
        check_bytes(mount, expected)
    assert any(cache.iterdir())  # the reference file went through the local cache
    assert http_server.count("GET", "sets/refs.json") >= 1
