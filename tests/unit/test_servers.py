"""Self-tests of the local test servers (S3, HTTP ranges, fault proxy); no FUSE involved."""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from tests.support.delay_proxy import DelayProxy
from tests.support.servers import (
    AWS_VARIABLES_TO_CLEAR,
    DUMMY_AWS_ENVIRONMENT,
    Fault,
    FaultProxy,
    RangeHTTPServer,
    Request,
    S3Bucket,
    UnsatisfiableRange,
    create_bucket,
    etag_of,
    moto_s3,
    parse_range,
    require_loopback,
)

DATA = bytes(range(256)) * 40  # 10240 bytes


@contextlib.contextmanager
def connection(port: int, timeout: float = 5.0) -> Iterator[http.client.HTTPConnection]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        yield conn
    finally:
        conn.close()


def fetch(
    port: int, path: str, method: str = "GET", range_: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    with connection(port) as conn:
        conn.request(method, path, headers={"Range": range_} if range_ else {})
        response = conn.getresponse()
        body = response.read()
        return response.status, dict(response.getheaders()), body


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("bytes=0-9", (0, 10)),
        ("bytes=10-", (10, 100)),
        ("bytes=-5", (95, 100)),
        ("bytes=-500", (0, 100)),
        ("bytes=90-200", (90, 100)),
        ("bytes=5-4", None),
        ("bytes=0-1,5-6", None),
        ("items=0-1", None),
        ("bytes=-", None),
    ],
)
def test_parse_range(header: str | None, expected: tuple[int, int] | None) -> None:
    assert parse_range(header, 100) == expected


@pytest.mark.parametrize("header", ["bytes=100-", "bytes=150-160", "bytes=-0"])
def test_parse_range_unsatisfiable(header: str) -> None:
    with pytest.raises(UnsatisfiableRange):
        parse_range(header, 100)


def test_require_loopback() -> None:
    assert require_loopback("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    for url in ("http://example.com:80", "https://127.0.0.1:1", "http://127.0.0.1", "s3://b"):
        with pytest.raises(ValueError, match=r"127\.0\.0\.1"):
            require_loopback(url)


@pytest.mark.http
def test_range_server_answers_ranges_heads_and_missing_files() -> None:
    with RangeHTTPServer({"d/a.bin": DATA}) as server:
        assert server.url.startswith("http://127.0.0.1:")
        status, headers, body = fetch(server.port, "/d/a.bin")
        assert (status, body) == (200, DATA)
        status, headers, body = fetch(server.port, "/d/a.bin", range_="bytes=100-199")
        assert (status, body) == (206, DATA[100:200])
        assert headers["Content-Range"] == f"bytes 100-199/{len(DATA)}"
        assert headers["Content-Length"] == "100"
        status, headers, body = fetch(server.port, "/d/a.bin", range_="bytes=-10")
        assert (status, body) == (206, DATA[-10:])
        status, headers, _ = fetch(server.port, "/d/a.bin", range_=f"bytes={len(DATA)}-")
        assert status == 416
        assert headers["Content-Range"] == f"bytes */{len(DATA)}"
        status, headers, body = fetch(server.port, "/d/a.bin", method="HEAD")
        assert (status, headers["Content-Length"], body) == (200, str(len(DATA)), b"")
        assert fetch(server.port, "/d/nope.bin")[0] == 404
        assert server.count("GET", "d/a.bin") == 4
        assert server.count("HEAD") == 1
        assert server.requests[1].range == "bytes=100-199"
        server.clear_requests()
        assert server.requests == []
        assert server.errors == []


@pytest.mark.http
def test_range_server_can_ignore_range() -> None:
    with RangeHTTPServer({"a.bin": DATA}, ignore_range=True) as server:
        status, headers, body = fetch(server.port, "/a.bin", range_="bytes=0-9")
        assert (status, body) == (200, DATA)
        assert "Content-Range" not in headers
        server.ignore_range = False
        assert fetch(server.port, "/a.bin", range_="bytes=0-9")[:3:2] == (206, DATA[:10])


@pytest.mark.http
def test_range_server_serves_a_directory_but_nothing_outside_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "x.bin").write_bytes(b"inside")
    (tmp_path / "secret").write_bytes(b"outside")
    with RangeHTTPServer(directory=root) as server:
        assert fetch(server.port, "/sub/x.bin", range_="bytes=1-3")[2] == b"nsi"
        assert fetch(server.port, "/sub/x%2Ebin")[2] == b"inside"
        for path in ("/../secret", "/sub/../../secret", "/%2e%2e/secret", "/sub"):
            assert fetch(server.port, path)[0] == 404, path


@pytest.mark.http
def test_range_server_keeps_connections_alive() -> None:
    with RangeHTTPServer({"a.bin": DATA}) as server, connection(server.port) as conn:
        for start in range(0, 1000, 100):
            conn.request("GET", "/a.bin", headers={"Range": f"bytes={start}-{start + 9}"})
            response = conn.getresponse()
            assert response.read() == DATA[start : start + 10]
        assert server.count("GET") == 10


def test_delay_proxy_holds_each_request_and_passes_answers_intact() -> None:
    big = os.urandom(8 * 1024 * 1024)
    with (
        RangeHTTPServer({"a.bin": DATA, "big.bin": big}) as server,
        DelayProxy(server.port, 0.05) as proxy,
        connection(proxy.port) as conn,
    ):
        for path, range_, expected in (
            ("/a.bin", "bytes=10-19", DATA[10:20]),
            ("/big.bin", None, big),
            ("/a.bin", None, DATA),
        ):
            started = time.monotonic()
            conn.request("GET", path, headers={"Range": range_} if range_ else {})
            assert conn.getresponse().read() == expected
            assert time.monotonic() - started >= 0.05
        assert (proxy.connections, server.count("GET")) == (1, 3)  # one connection, kept
    assert proxy.requests == 3


@pytest.mark.http
def test_fault_proxy_passes_through_and_applies_a_schedule() -> None:
    with RangeHTTPServer({"a.bin": DATA}) as server, FaultProxy(server.url) as proxy:
        status, headers, body = fetch(proxy.port, "/a.bin", range_="bytes=10-19")
        assert (status, body) == (206, DATA[10:20])
        assert headers["Content-Range"] == f"bytes 10-19/{len(DATA)}"
        status, headers, body = fetch(proxy.port, "/a.bin", method="HEAD")
        assert (status, headers["Content-Length"], body) == (200, str(len(DATA)), b"")
        assert fetch(proxy.port, "/nope")[0] == 404

        proxy.fail_next(2, Fault.ERROR_503)
        proxy.fail_next(1, Fault.RESET, methods=["HEAD"])
        assert fetch(proxy.port, "/a.bin", method="HEAD")[0] == 503
        assert fetch(proxy.port, "/a.bin")[0] == 503
        assert proxy.pending() == 1
        assert fetch(proxy.port, "/a.bin")[0] == 200  # the RESET waits for a HEAD
        with pytest.raises(ConnectionError):
            fetch(proxy.port, "/a.bin", method="HEAD")
        assert proxy.pending() == 0
        assert fetch(proxy.port, "/a.bin")[2] == DATA
        faults = [item.fault for item in proxy.applied]
        assert faults[3:] == [
            Fault.ERROR_503,
            Fault.ERROR_503,
            Fault.PASS,
            Fault.RESET,
            Fault.PASS,
        ]
        assert proxy.count_applied(Fault.ERROR_503) == 2
        assert proxy.count("GET") == 5
        assert server.count() == 5  # faults never reach the server
        assert proxy.errors == []
        assert server.errors == []


@pytest.mark.http
def test_fault_proxy_reset_truncate_and_default() -> None:
    with RangeHTTPServer({"a.bin": DATA}) as server, FaultProxy(server.url) as proxy:
        proxy.set_default(Fault.TRUNCATE)
        with connection(proxy.port) as conn:
            conn.request("GET", "/a.bin", headers={"Range": "bytes=0-999"})
            response = conn.getresponse()
            assert response.status == 206
            assert response.getheader("Content-Length") == "1000"
            with pytest.raises(http.client.IncompleteRead) as caught:
                response.read()
            assert caught.value.partial == DATA[:500]
        proxy.set_default(Fault.RESET)
        with pytest.raises(ConnectionResetError):
            fetch(proxy.port, "/a.bin")
        proxy.clear()
        assert fetch(proxy.port, "/a.bin")[2] == DATA
        assert proxy.errors == []


@pytest.mark.http
def test_fault_proxy_stall_outlasts_the_client_and_stop_ends_it() -> None:
    with RangeHTTPServer({"a.bin": DATA}) as server:
        proxy = FaultProxy(server.url, stall_seconds=0.5).start()
        try:
            proxy.set_default(Fault.STALL)
            started = time.monotonic()
            with connection(proxy.port, timeout=5) as conn:
                conn.request("GET", "/a.bin")
                with pytest.raises(http.client.RemoteDisconnected):
                    conn.getresponse()  # closed after the stall, without an answer
            assert 0.4 < time.monotonic() - started < 4
            proxy.stall_seconds = 60
            with connection(proxy.port, timeout=0.3) as conn:
                conn.request("GET", "/a.bin")
                with pytest.raises(TimeoutError):
                    conn.getresponse()
        finally:
            started = time.monotonic()
            proxy.stop()
        assert time.monotonic() - started < 5  # a stalled connection does not hold stop() up


@pytest.mark.http
def test_fault_proxy_random_share_is_seeded() -> None:
    faults = [Fault.ERROR_503, Fault.RESET, Fault.TRUNCATE]

    def run(seed: int) -> list[Fault]:
        with RangeHTTPServer({"a.bin": DATA}) as server, FaultProxy(server.url, seed=seed) as proxy:
            proxy.set_random(0.5, faults)
            for _ in range(40):
                with contextlib.suppress(ConnectionError, http.client.HTTPException):
                    fetch(proxy.port, "/a.bin", range_="bytes=0-99")
            assert proxy.errors == []
            return [item.fault for item in proxy.applied]

    first = run(7)
    assert first == run(7)
    assert first != run(8)
    assert 5 < sum(fault is not Fault.PASS for fault in first) < 35
    assert {Fault.PASS, *faults} == set(first)


def test_fault_proxy_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match=r"127\.0\.0\.1"):
        FaultProxy("http://example.com:80")
    with RangeHTTPServer() as server, FaultProxy(server.url) as proxy:
        with pytest.raises(ValueError, match="share"):
            proxy.set_random(1.5, [Fault.RESET])
        with pytest.raises(ValueError, match="faults"):
            proxy.set_random(0.5, [])
        with pytest.raises(ValueError, match="count"):
            proxy.fail_next(-1, Fault.RESET)


def test_servers_use_free_ports_and_release_them() -> None:
    with RangeHTTPServer() as one, RangeHTTPServer() as two:
        assert one.port != two.port
        port = one.port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # the listening socket was closed


@pytest.mark.s3
def test_moto_server_bucket_helpers_and_single_server_header(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in AWS_VARIABLES_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    for name, value in DUMMY_AWS_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    with moto_s3() as endpoint:
        assert endpoint.startswith("http://127.0.0.1:")
        bucket = create_bucket(endpoint, "selftest", {"a.bin": DATA})
        assert bucket.url("x/y") == "s3://selftest/x/y"
        assert bucket.put("d/b.bin", b"0123456789") == "s3://selftest/d/b.bin"
        assert bucket.get("a.bin") == DATA
        assert bucket.keys() == ["a.bin", "d/b.bin"]
        port = int(endpoint.rsplit(":", 1)[1])
        # aiohttp (s3fs) refuses responses with two Server headers; listings and errors
        # are the responses where moto adds one of its own
        for path in ("/selftest?list-type=2", "/selftest/missing"):
            with connection(port) as conn:
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                assert len(response.headers.get_all("Server") or []) == 1, path
        fs = fsspec.filesystem("s3", endpoint_url=endpoint, skip_instance_cache=True)
        assert fs.isdir("selftest/d")
        assert not fs.exists("selftest/missing")
        assert fs.cat_file("selftest/a.bin", start=1, end=4) == DATA[1:4]
    # the state does not leak from one server to the next
    with moto_s3() as endpoint, pytest.raises(Exception, match="NoSuchBucket"):
        S3Bucket(endpoint, "selftest").get("a.bin")


# ------------------------------------------------- validators, headers, restarts, slow modes


def fetch_with(
    port: int, path: str, headers: dict[str, str], method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    with connection(port) as conn:
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()


def test_range_server_sends_a_strong_content_etag_and_last_modified() -> None:
    with RangeHTTPServer({"f": DATA}) as server:
        status, headers, _ = fetch(server.port, "/f", range_="bytes=0-9")
        assert status == 206
        assert headers["ETag"] == etag_of(DATA) == server.etag("f")
        assert re.fullmatch(r'"[0-9a-f]{40}"', headers["ETag"])
        modified = email.utils.parsedate_to_datetime(headers["Last-Modified"]).timestamp()
        assert abs(modified - time.time()) < 5
        status, head, _ = fetch(server.port, "/f", method="HEAD")
        assert (status, head["ETag"], head["Last-Modified"]) == (
            200,
            headers["ETag"],
            headers["Last-Modified"],
        )
        assert fetch(server.port, "/f")[1]["ETag"] == headers["ETag"]  # stable
        server.add("f", DATA[::-1], mtime=1_000_000_000)
        _, changed, body = fetch(server.port, "/f")
        assert body == DATA[::-1]
        assert changed["ETag"] == etag_of(DATA[::-1]) != headers["ETag"]
        assert changed["Last-Modified"] == "Sun, 09 Sep 2001 01:46:40 GMT"
        server.add("f", DATA)  # the same bytes again: the same ETag
        assert fetch(server.port, "/f")[1]["ETag"] == headers["ETag"]
        assert server.etag("missing") is None
    assert server.errors == []


def test_range_server_directory_files_have_validators_too(tmp_path: Path) -> None:
    (tmp_path / "d.bin").write_bytes(DATA)
    os.utime(tmp_path / "d.bin", (1_000_000_000, 1_000_000_000))
    with RangeHTTPServer(directory=tmp_path) as server:
        _, headers, _ = fetch(server.port, "/d.bin", method="HEAD")
    assert headers["ETag"] == etag_of(DATA)
    assert headers["Last-Modified"] == "Sun, 09 Sep 2001 01:46:40 GMT"


def test_range_server_conditional_requests() -> None:
    with RangeHTTPServer({"f": DATA}) as server:
        etag = etag_of(DATA)
        other = etag_of(b"other")
        ranged = {"Range": "bytes=0-9"}
        assert fetch_with(server.port, "/f", {**ranged, "If-Match": etag})[0] == 206
        assert fetch_with(server.port, "/f", {**ranged, "If-Match": f"{other}, {etag}"})[0] == 206
        assert fetch_with(server.port, "/f", {**ranged, "If-Match": "*"})[0] == 206
        unquoted = etag.strip('"')  # as Icechunk sends it, and S3 takes it
        assert fetch_with(server.port, "/f", {**ranged, "If-Match": unquoted})[0] == 206
        for mismatch in (other, other.strip('"'), f"W/{etag}"):  # If-Match compares strongly
            status, _, body = fetch_with(server.port, "/f", {**ranged, "If-Match": mismatch})
            assert status == 412, mismatch
            assert b"precondition" in body
        assert fetch_with(server.port, "/f", {"If-Match": other}, "HEAD")[0] == 412
        status, headers, body = fetch_with(server.port, "/f", {"If-None-Match": f"W/{etag}"})
        assert (status, body, headers["ETag"]) == (304, b"", etag)
        assert fetch_with(server.port, "/f", {"If-None-Match": other})[0] == 200
        # If-Range: the range while the tag matches, the whole (changed) body otherwise
        status, _, body = fetch_with(server.port, "/f", {**ranged, "If-Range": etag})
        assert (status, body) == (206, DATA[:10])
        status, _, body = fetch_with(server.port, "/f", {**ranged, "If-Range": other})
        assert (status, body) == (200, DATA)
        # a connection stays usable after a 304 and a 412
        with connection(server.port) as conn:
            for headers_sent, expected in (
                ({"If-None-Match": etag}, 304),
                ({"If-Match": other}, 412),
                ({"Range": "bytes=1-2"}, 206),
            ):
                conn.request("GET", "/f", headers=headers_sent)
                response = conn.getresponse()
                response.read()
                assert response.status == expected
    assert server.errors == []


def test_servers_record_request_headers() -> None:
    with RangeHTTPServer({"f": DATA}) as server, FaultProxy(server.url) as proxy:
        fetch_with(proxy.port, "/f", {"Authorization": "Bearer t0ken", "Range": "bytes=0-0"})
        (seen,) = server.requests
        (relayed,) = proxy.requests
    for request in (seen, relayed):
        assert request.header("authorization") == "Bearer t0ken"
        assert request.headers["Range"] == "bytes=0-0" == request.range
        assert request.header("X-Missing") is None
    # headers take no part in comparisons
    assert seen == Request("GET", "/f", "bytes=0-0")


def refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def test_range_server_stops_and_restarts_on_the_same_port() -> None:
    server = RangeHTTPServer({"f": DATA})
    with server:
        port, url = server.port, server.url
        assert server.running
        assert fetch(port, "/f")[2] == DATA
        server.stop()
        assert (server.running, refused(port)) == (False, True)
        server.start()
        assert (server.port, server.url) == (port, url)
        assert fetch(port, "/f", range_="bytes=0-3")[2] == DATA[:4]
        server.restart()
        assert server.port == port
        assert fetch(port, "/f")[2] == DATA
        assert server.count("GET") == 3  # the record survives restarts
    assert refused(port)
    assert server.errors == []


def test_range_server_binds_a_given_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with RangeHTTPServer({"f": DATA}, port=port) as server:
        assert server.port == port
        assert fetch(port, "/f")[2] == DATA


def test_fault_proxy_restarts_on_the_same_port_and_records_times() -> None:
    with RangeHTTPServer({"f": DATA}) as server, FaultProxy(server.url) as proxy:
        port = proxy.port
        before = time.monotonic()
        proxy.fail_next(1, Fault.ERROR_503)
        assert fetch(port, "/f")[0] == 503
        proxy.restart()
        assert proxy.port == port
        assert fetch(port, "/f")[2] == DATA
        after = time.monotonic()
        assert [item.fault for item in proxy.applied] == [Fault.ERROR_503, Fault.PASS]
        assert all(before <= item.at <= after for item in proxy.applied)
        assert proxy.faults_between("f", before, after) == 1
        assert proxy.faults_between("g", before, after) == 0
        assert proxy.faults_between("f", after + 1, after + 2) == 0
        # the upstream killed and restarted behind the proxy: 502 meanwhile
        server.stop()
        status, _, body = fetch(port, "/f")
        assert (status, body) == (502, b"upstream unreachable\n")
        server.start()
        assert fetch(port, "/f")[2] == DATA
    assert server.errors == []


def test_range_server_throttles_bodies_and_delays_answers() -> None:
    body = DATA * 4  # 40 KiB
    with RangeHTTPServer({"f": body}, throttle_bytes_per_second=100_000) as server:
        started = time.monotonic()
        assert fetch(server.port, "/f")[2] == body
        assert 0.3 < time.monotonic() - started < 5
        started = time.monotonic()
        assert fetch(server.port, "/f", range_="bytes=0-999")[2] == body[:1000]
        assert time.monotonic() - started < 0.5  # small answers stay quick
        server.throttle_bytes_per_second = None
        server.delay_seconds = 0.3
        started = time.monotonic()
        assert fetch(server.port, "/f")[2] == body
        assert 0.3 <= time.monotonic() - started < 5
    assert server.errors == []


def test_stop_cuts_a_throttled_transfer_short() -> None:
    body = DATA * 100  # 1 MB at 50 kB/s: 20 s
    server = RangeHTTPServer({"f": body}, throttle_bytes_per_second=50_000).start()
    results: list[BaseException | bytes] = []

    def read() -> None:
        try:
            results.append(fetch(server.port, "/f")[2])
        except Exception as error:
            results.append(error)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while server.count("GET") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    started = time.monotonic()
    server.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - started < 3
    (result,) = results
    assert isinstance(result, http.client.IncompleteRead | ConnectionError), result
    assert server.errors == []
