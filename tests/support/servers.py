"""Local test servers on 127.0.0.1: moto S3, an HTTP range server and a fault-injecting proxy."""

from __future__ import annotations

import contextlib
import email.utils
import enum
import functools
import gzip
import hashlib
import http.client
import os
import posixpath
import random
import re
import socket
import struct
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

LOCALHOST = "127.0.0.1"

STOP_TIMEOUT = 10.0
"""Seconds ``stop()`` waits, in total, for connection threads to finish."""

IDLE_TIMEOUT = 60.0
"""Seconds a kept-alive connection may sit idle before the server drops it."""

THROTTLE_STEPS_PER_SECOND = 20
"""A throttled body is written in this many pieces per second."""

DUMMY_AWS_ENVIRONMENT: dict[str, str] = {
    "AWS_ACCESS_KEY_ID": "refmount-test-key",
    "AWS_SECRET_ACCESS_KEY": "refmount-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
"""Dummy credentials and settings; with them botocore never looks for real ones."""

AWS_VARIABLES_TO_CLEAR = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
"""Variables that could point botocore at a real account or endpoint."""


def require_loopback(url: str) -> str:
    """Return ``url`` unchanged; raise ``ValueError`` unless it is ``http://127.0.0.1:PORT``."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "http" or parsed.hostname != LOCALHOST or parsed.port is None:
        raise ValueError(f"test servers live on http://{LOCALHOST}:PORT, not {url!r}")
    return url


# --------------------------------------------------------------------------------------- S3


def _one_server_header(app: Any) -> Any:
    """Wrap a WSGI app so that its responses carry no ``Server`` header of their own.

    moto's XML responses (listings, errors) set ``server: amazon.com`` and werkzeug adds its
    own ``Server`` header, and aiohttp (s3fs's HTTP client) rejects a response with two:
    ``400, message="Duplicate 'Server' header found."``.
    """

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            kept = [(name, value) for name, value in headers if name.lower() != "server"]
            return start_response(status, kept, *exc_info)

        return app(environ, start)

    return wrapped


def _moto_server_class() -> Any:
    """Return ThreadedMotoServer adjusted for aiohttp clients and quiet (no access log)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    class QuietHandler(MotoRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    class MotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = DomainDispatcherApplication(create_backend_app)
            self._server = make_server(
                self._ip_address,
                self._port,
                _one_server_header(app),
                True,
                request_handler=QuietHandler,
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    return MotoServer


@contextlib.contextmanager
def moto_s3() -> Iterator[str]:
    """Run moto's S3 in server mode on 127.0.0.1 and a free port; yield its endpoint URL.

    moto keeps its state per process, so the state is reset when the server stops.
    """
    server = _moto_server_class()(ip_address=LOCALHOST, port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = require_loopback(f"http://{host}:{port}")
        try:
            yield endpoint
        finally:
            with contextlib.suppress(OSError):
                reset_moto(endpoint)
    finally:
        server.stop()
        # ThreadedMotoServer.stop() only ends the loop; close the listening socket too
        inner = getattr(server, "_server", None)
        if inner is not None:
            inner.server_close()


def reset_moto(endpoint_url: str) -> None:
    """Forget every bucket and object the moto server at ``endpoint_url`` holds."""
    request = urllib.request.Request(
        f"{require_loopback(endpoint_url)}/moto-api/reset", method="POST", data=b""
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


@contextlib.contextmanager
def s3_client(endpoint_url: str) -> Iterator[Any]:
    """Yield a botocore S3 client for the local server only, with dummy credentials."""
    import botocore.config
    import botocore.session

    session = botocore.session.Session()
    client = session.create_client(
        "s3",
        endpoint_url=require_loopback(endpoint_url),
        region_name=DUMMY_AWS_ENVIRONMENT["AWS_DEFAULT_REGION"],
        aws_access_key_id=DUMMY_AWS_ENVIRONMENT["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=DUMMY_AWS_ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
        config=botocore.config.Config(retries={"max_attempts": 1}),
    )
    try:
        yield client
    finally:
        client.close()


@dataclass(frozen=True)
class S3Bucket:
    """A bucket on the local S3 server."""

    endpoint_url: str
    name: str

    def url(self, key: str) -> str:
        """Return ``s3://bucket/key``."""
        return f"s3://{self.name}/{key.lstrip('/')}"

    def put(self, key: str, data: bytes, *, public: bool = False) -> str:
        """Store ``data`` as ``key`` (readable anonymously if ``public``); return its URL."""
        return self.put_objects({key: data}, public=public)[key]

    def put_objects(self, objects: Mapping[str, bytes], *, public: bool = False) -> dict[str, str]:
        """Store every ``key: data``; return the ``s3://`` URL of each key."""
        extra = {"ACL": "public-read"} if public else {}
        with s3_client(self.endpoint_url) as client:
            for key, data in objects.items():
                client.put_object(Bucket=self.name, Key=key.lstrip("/"), Body=data, **extra)
        return {key: self.url(key) for key in objects}

    def put_tree(self, directory: Path, prefix: str) -> list[str]:
        """Upload every file below ``directory`` as ``prefix/<relative path>``; return keys."""
        objects = {
            posixpath.join(prefix, path.relative_to(directory).as_posix()): path.read_bytes()
            for path in sorted(directory.rglob("*"))
            if path.is_file()
        }
        self.put_objects(objects)
        return sorted(objects)

    def get(self, key: str) -> bytes:
        """Return the bytes stored as ``key``."""
        with s3_client(self.endpoint_url) as client:
            response = client.get_object(Bucket=self.name, Key=key.lstrip("/"))
            body = response["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()

    def keys(self) -> list[str]:
        """Return the keys in the bucket, sorted."""
        with s3_client(self.endpoint_url) as client:
            response = client.list_objects_v2(Bucket=self.name)
        return sorted(item["Key"] for item in response.get("Contents", []))


def create_bucket(
    endpoint_url: str, name: str, objects: Mapping[str, bytes] | None = None
) -> S3Bucket:
    """Create bucket ``name`` on the local S3 server, put ``objects`` in it, return it."""
    with s3_client(endpoint_url) as client:
        client.create_bucket(Bucket=name)
    bucket = S3Bucket(endpoint_url, name)
    if objects:
        bucket.put_objects(objects)
    return bucket


# ------------------------------------------------------------------------ threaded servers


@dataclass(frozen=True)
class Request:
    """One HTTP request a server received.

    ``headers`` holds every request header as sent (the last value of a repeated name), so
    that tests can check what a client sent (``Authorization``, ``If-Match`` …); it takes no
    part in comparisons.
    """

    method: str
    path: str
    range: str | None
    headers: Mapping[str, str] = field(default_factory=dict, compare=False)

    def header(self, name: str) -> str | None:
        """Return the value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == wanted), None)


class Hostile(enum.Enum):
    """How a server misbehaves: the range server on every GET when its ``hostile`` is set,
    the fault proxy on the GETs it gives the matching ``Fault``.

    The bodies are generated as they are sent (never held in memory): a client that reads
    them whole holds gigabytes or never finishes.
    """

    HUGE_BODY = "huge-body"
    """Ignore ``Range``: answer 200 with ``Content-Length`` of ``hostile_bytes`` (1 GiB by
    default) and send that many generated bytes."""
    ENDLESS_BODY = "endless-body"
    """Answer 206 with the right ``Content-Range`` but a chunked body that never ends."""
    GZIP_BOMB = "gzip-bomb"
    """Answer 206 with ``Content-Encoding: gzip`` and a body of gzip members of zeros that
    inflates to ``hostile_bytes`` (about 1000 times smaller on the wire)."""
    STALL_MID_BODY = "stall-mid-body"
    """Send the headers and half of the asked range, then nothing for ``stall_seconds``
    (or until the server stops), then close."""


HOSTILE_PIECE = 1024 * 1024
"""Generated hostile bodies are written in pieces of this many bytes."""

GZIP_MEMBER_INFLATED = 64 * 1024 * 1024
"""Each gzip member of the bomb inflates to this many zeros."""


@functools.cache
def gzip_member() -> bytes:
    """Return one gzip member of ``GZIP_MEMBER_INFLATED`` zeros (made once, about 64 KiB)."""
    return gzip.compress(bytes(GZIP_MEMBER_INFLATED), compresslevel=9, mtime=0)


_EXPECTED_DISCONNECTS = (ConnectionError, TimeoutError, BrokenPipeError)


class _Server(ThreadingHTTPServer):
    """A ThreadingHTTPServer on 127.0.0.1 that can be stopped with bounded waits.

    Every connection runs in a daemon thread; ``close_all`` shuts the open connections down so
    that threads blocked on a kept-alive connection end, and joins them with a deadline.
    Unexpected handler errors are kept in ``errors`` instead of being printed.
    """

    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        owner: object,
        port: int = 0,
        errors: list[BaseException] | None = None,
    ) -> None:
        super().__init__((LOCALHOST, port), handler)
        self.owner = owner
        self.stopping = threading.Event()
        self.errors: list[BaseException] = [] if errors is None else errors
        self._lock = threading.Lock()
        self._connections: dict[socket.socket, threading.Thread] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=f"{type(self.owner).__name__}-connection",
            daemon=True,
        )
        with self._lock:
            if self.stopping.is_set():
                self.shutdown_request(request)
                return
            self._connections[request] = thread
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except _EXPECTED_DISCONNECTS:
            pass
        except Exception as error:
            if not self.stopping.is_set():
                self.errors.append(error)
        finally:
            self.shutdown_request(request)
            with self._lock:
                self._connections.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:  # pragma: no cover
        pass  # errors are caught in _serve_connection

    def close_all(self) -> None:
        """Shut every open connection down and join its thread (bounded by STOP_TIMEOUT)."""
        with self._lock:
            connections = dict(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        deadline = threading.Event()
        timer = threading.Timer(STOP_TIMEOUT, deadline.set)
        timer.daemon = True
        timer.start()
        try:
            for thread in connections.values():
                while thread.is_alive() and not deadline.is_set():
                    thread.join(0.05)
        finally:
            timer.cancel()


class _Quiet(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, an idle timeout, and no access log on stderr."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT
    disable_nagle_algorithm = True  # headers and body are separate writes
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_body(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        bytes_per_second: float | None = None,
    ) -> None:
        """Send a complete response with ``Content-Length`` (the body is omitted for HEAD).

        With ``bytes_per_second`` the body is written in small pieces at about that rate.
        """
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.write_body(body, bytes_per_second)

    def write_body(self, body: bytes, bytes_per_second: float | None = None) -> None:
        """Write ``body``, throttled to ``bytes_per_second`` when given (stops when stopping)."""
        if not bytes_per_second:
            self.wfile.write(body)
            return
        piece = max(1, int(bytes_per_second / THROTTLE_STEPS_PER_SECOND))
        started = time.monotonic()
        for start in range(0, len(body), piece):
            ahead = started + start / bytes_per_second - time.monotonic()
            if ahead > 0 and self.server.stopping.wait(ahead):
                raise ConnectionAbortedError("server stopping")
            self.wfile.write(body[start : start + piece])
            self.wfile.flush()

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` before answering (cut short, with an error, when stopping)."""
        if seconds > 0 and self.server.stopping.wait(seconds):
            raise ConnectionAbortedError("server stopping")

    def send_hostile(
        self,
        hostile: Hostile,
        *,
        content_range: str | None,
        body: bytes,
        hostile_bytes: int,
        stall_seconds: float,
    ) -> None:
        """Answer a ranged GET the way ``hostile`` says, then close the connection.

        ``content_range`` is what an honest 206 would carry and ``body`` its bytes (half of
        them are sent before a stall); ``hostile_bytes`` sizes the huge body and the bomb.
        """
        self.close_connection = True
        huge = hostile is Hostile.HUGE_BODY
        self.send_response(200 if huge else 206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Connection", "close")
        if content_range is not None and not huge:
            self.send_header("Content-Range", content_range)
        if huge:
            self.send_header("Content-Length", str(hostile_bytes))
            self.end_headers()
            self._generate(hostile_bytes)
        elif hostile is Hostile.ENDLESS_BODY:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._endless_chunks()
        elif hostile is Hostile.GZIP_BOMB:
            member = gzip_member()
            count = max(1, hostile_bytes // GZIP_MEMBER_INFLATED)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(member) * count))
            self.end_headers()
            for _ in range(count):
                self._write_piece(member)
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self._write_piece(body[: len(body) // 2])
            self.pause(stall_seconds)

    def _write_piece(self, piece: bytes) -> None:
        if self.server.stopping.is_set():
            raise ConnectionAbortedError("server stopping")
        self.wfile.write(piece)
        self.wfile.flush()

    def _generate(self, count: int) -> None:
        piece = bytes(range(256)) * (HOSTILE_PIECE // 256)
        for start in range(0, count, HOSTILE_PIECE):
            self._write_piece(piece[: count - start])

    def _endless_chunks(self) -> None:
        piece = bytes(range(256)) * (HOSTILE_PIECE // 256)
        chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        while True:
            self._write_piece(chunk)


class _Running:
    """Start/stop, restart on the same port, and context management shared by the servers.

    The listening socket is bound when the object is made (``port=0``: a free port), so
    ``url`` is known before ``start``. ``stop`` closes the socket and every connection, like
    a killed server; a later ``start`` (or ``restart``) listens again on the same port.
    Recorded requests and errors survive restarts.
    """

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        self._handler = handler
        self._errors: list[BaseException] = []
        self._server = _Server(handler, self, port, self._errors)
        self._port = int(self._server.server_address[1])
        self._closed = False
        self._thread: threading.Thread | None = None
        self._requests: list[Request] = []
        self._requests_lock = threading.Lock()

    @property
    def port(self) -> int:
        """Return the port the server listens on (the same one across restarts)."""
        return self._port

    @property
    def running(self) -> bool:
        """Return True while the server accepts connections."""
        return self._thread is not None

    @property
    def url(self) -> str:
        """Return ``http://127.0.0.1:PORT``."""
        return f"http://{LOCALHOST}:{self.port}"

    def url_for(self, path: str) -> str:
        """Return the URL of ``path`` on this server."""
        return f"{self.url}/{path.lstrip('/')}"

    @property
    def errors(self) -> list[BaseException]:
        """Return unexpected errors raised while serving (should stay empty)."""
        return list(self._errors)

    @property
    def requests(self) -> list[Request]:
        """Return the requests received so far, oldest first."""
        with self._requests_lock:
            return list(self._requests)

    def count(self, method: str | None = None, path: str | None = None) -> int:
        """Return how many requests matched ``method`` and ``path`` (None matches all)."""
        return sum(
            1
            for request in self.requests
            if (method is None or request.method == method)
            and (path is None or request.path == "/" + path.lstrip("/"))
        )

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        with self._requests_lock:
            self._requests.clear()

    def record(self, request: Request) -> None:
        """Remember a received request (called by the handler)."""
        with self._requests_lock:
            self._requests.append(request)

    def start(self) -> Self:
        """Start serving in a daemon thread (again on the same port after ``stop``)."""
        if self._closed:
            self._server = _Server(self._handler, self, self._port, self._errors)
            self._closed = False
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"{type(self).__name__}-accept",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every connection, and join the threads.

        Requests in flight are cut off (their clients see the connection close early), and
        new connections are refused until ``start`` is called again.
        """
        self._server.stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(STOP_TIMEOUT)
            self._thread = None
        self._server.server_close()
        self._server.close_all()
        self._closed = True

    def restart(self) -> Self:
        """``stop`` then ``start`` on the same port; return self."""
        self.stop()
        return self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


# ---------------------------------------------------------------------- HTTP range server


_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


class UnsatisfiableRange(ValueError):
    """The Range header asks for bytes the file does not have."""


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """Return ``[start, end)`` for a single ``bytes=`` range, or None to send the whole body.

    Raises ``UnsatisfiableRange`` for a range that starts at or after the end. Headers that
    are not one ``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` range are ignored, as RFC 9110
    allows.
    """
    if header is None:
        return None
    match = _RANGE.match(header)
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # suffix: the last n bytes
        count = int(last)
        if count == 0:
            raise UnsatisfiableRange(header)
        return max(size - count, 0), size
    start = int(first)
    end = size if not last else int(last) + 1
    if last and end <= start:
        return None  # invalid range: ignored
    if start >= size:
        raise UnsatisfiableRange(header)
    return start, min(end, size)


def etag_of(data: bytes) -> str:
    """Return the strong ETag the range server sends for ``data``: ``"<sha1 hex>"``."""
    return '"' + hashlib.sha1(data, usedforsecurity=False).hexdigest() + '"'


def _etag_list(header: str) -> list[str]:
    """Split an ``If-Match``/``If-None-Match`` value into its entity tags (or ``["*"]``).

    A tag sent without its quotes (``abc``: Icechunk sends the ETags it recorded so) is
    taken as the quoted one (``"abc"``), as S3 takes it.
    """
    tags = [tag.strip() for tag in header.split(",") if tag.strip()]
    return [tag if tag == "*" or tag.startswith(('"', "W/")) else f'"{tag}"' for tag in tags]


@dataclass(frozen=True)
class Served:
    """A file the range server serves: its bytes, strong ETag and modification time."""

    data: bytes
    etag: str
    mtime: float

    @property
    def last_modified(self) -> str:
        """Return the ``Last-Modified`` header value (an HTTP date, whole seconds)."""
        return email.utils.formatdate(self.mtime, usegmt=True)


class _RangeHandler(_Quiet):
    server: _Server

    def do_HEAD(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def _serve(self) -> None:
        owner = self.server.owner
        assert isinstance(owner, RangeHTTPServer)
        path = urllib.parse.urlsplit(self.path).path
        owner.record(
            Request(self.command, path, self.headers.get("Range"), dict(self.headers.items()))
        )
        self.pause(owner.delay_seconds)
        served = owner.lookup_served(path)
        if served is None:
            self.send_body(404, b"not found\n", {"Content-Type": "text/plain"})
            return
        data = served.data
        rate = owner.throttle_bytes_per_second
        validators = {"ETag": served.etag, "Last-Modified": served.last_modified}
        if_match = self.headers.get("If-Match")
        if if_match is not None and not _matches(if_match, served.etag, strong=True):
            self.send_body(412, b"precondition failed\n", {"Content-Type": "text/plain"})
            return
        if_none_match = self.headers.get("If-None-Match")
        if if_none_match is not None and _matches(if_none_match, served.etag, strong=False):
            self.send_response(304)
            for name, value in validators.items():
                self.send_header(name, value)
            self.end_headers()
            return
        if owner.hostile is not None and self.command == "GET":
            self._misbehave(owner, owner.hostile, data)
            return
        if owner.ignore_range:
            headers = {"Content-Type": "application/octet-stream", **validators}
            self.send_body(200, data, headers, bytes_per_second=rate)
            return
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            **validators,
        }
        if_range = self.headers.get("If-Range")
        if if_range is not None and if_range.strip() != served.etag:
            span = None  # the representation changed: send all of it (RFC 9110 13.1.5)
        else:
            try:
                span = parse_range(self.headers.get("Range"), len(data))
            except UnsatisfiableRange:
                headers["Content-Range"] = f"bytes */{len(data)}"
                self.send_body(416, b"", headers)
                return
        if span is None:
            self.send_body(200, data, headers, bytes_per_second=rate)
            return
        start, end = span
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
        self.send_body(206, data[start:end], headers, bytes_per_second=rate)

    def _misbehave(self, owner: RangeHTTPServer, hostile: Hostile, data: bytes) -> None:
        """Answer a GET the way ``hostile`` says (see ``Hostile``)."""
        try:
            start, end = parse_range(self.headers.get("Range"), len(data)) or (0, len(data))
        except UnsatisfiableRange:
            start, end = 0, len(data)
        self.send_hostile(
            hostile,
            content_range=f"bytes {start}-{end - 1}/{len(data)}",
            body=data[start:end],
            hostile_bytes=owner.hostile_bytes,
            stall_seconds=owner.stall_seconds,
        )


def _matches(header: str, etag: str, *, strong: bool) -> bool:
    """Return True when ``etag`` matches the ``If-Match``/``If-None-Match`` value ``header``.

    ``strong`` comparison (If-Match) never matches a weak tag ``W/"…"``; weak comparison
    (If-None-Match) ignores the ``W/`` prefix.
    """
    tags = _etag_list(header)
    if "*" in tags:
        return True
    if strong:
        return etag in tags
    return etag.removeprefix("W/") in {tag.removeprefix("W/") for tag in tags}


class RangeHTTPServer(_Running):
    """A threaded HTTP server on 127.0.0.1 that serves files with byte ranges.

    Files come from a directory or an in-memory ``{path: bytes}`` dict (or both: the dict is
    looked up first). ``GET`` with ``Range: bytes=a-b`` answers 206 with ``Content-Range``;
    ``HEAD`` answers ``Content-Length``; a missing file is 404. With ``ignore_range`` set the
    server answers every GET with 200 and the whole body, like servers that do not support
    ranges. Every request is recorded (method, path, Range header, all headers).

    GET and HEAD answers carry a strong ``ETag`` derived from the content (``etag_of``) and a
    ``Last-Modified`` date (when the file was added, or its mtime on disk); ``add`` with other
    bytes changes both. ``If-Match`` that does not match answers ``412 Precondition Failed``;
    ``If-None-Match`` that matches answers ``304 Not Modified``; ``If-Range`` that does not
    match sends the whole body with 200.

    Slow modes: ``delay_seconds`` waits before every answer, ``throttle_bytes_per_second``
    writes bodies at about that rate. Both can be changed while serving. ``port`` binds a
    given port (``stop``/``start``/``restart`` keep it either way).

    Hostile modes: with ``hostile`` set (a ``Hostile``), every GET of a file that exists is
    answered that way (HEAD and conditional answers stay honest); ``hostile_bytes`` sizes
    the huge body and the gzip bomb, ``stall_seconds`` the stall. Also changeable while
    serving.
    """

    def __init__(
        self,
        files: Mapping[str, bytes] | None = None,
        directory: Path | None = None,
        *,
        ignore_range: bool = False,
        port: int = 0,
        throttle_bytes_per_second: float | None = None,
        delay_seconds: float = 0.0,
        hostile: Hostile | None = None,
        hostile_bytes: int = 1024**3,
        stall_seconds: float = 3600.0,
    ) -> None:
        super().__init__(_RangeHandler, port)
        self.hostile = hostile
        self.hostile_bytes = hostile_bytes
        self.stall_seconds = stall_seconds
        self._files: dict[str, Served] = {}
        self._files_lock = threading.Lock()
        self._directory = directory.resolve() if directory is not None else None
        self.ignore_range = ignore_range
        self.throttle_bytes_per_second = throttle_bytes_per_second
        self.delay_seconds = delay_seconds
        for path, data in (files or {}).items():
            self.add(path, data)

    def add(self, path: str, data: bytes, *, mtime: float | None = None) -> str:
        """Serve ``data`` at ``path`` (replacing what was there); return its URL.

        ``mtime`` (seconds since the epoch) is the ``Last-Modified`` date; default now.
        """
        data = bytes(data)
        served = Served(data, etag_of(data), time.time() if mtime is None else mtime)
        with self._files_lock:
            self._files["/" + path.lstrip("/")] = served
        return self.url_for(path)

    def remove(self, path: str) -> None:
        """Stop serving ``path`` (added with ``add``); later requests get 404."""
        with self._files_lock:
            self._files.pop("/" + path.lstrip("/"), None)

    def etag(self, path: str) -> str | None:
        """Return the ETag the server sends for ``path``, or None when it has no such file."""
        served = self.lookup_served(path)
        return None if served is None else served.etag

    def lookup(self, path: str) -> bytes | None:
        """Return the bytes served at ``path`` (URL-decoded), or None."""
        served = self.lookup_served(path)
        return None if served is None else served.data

    def lookup_served(self, path: str) -> Served | None:
        """Return the file served at ``path`` (URL-decoded) with its validators, or None."""
        path = "/" + urllib.parse.unquote(path).lstrip("/")
        with self._files_lock:
            served = self._files.get(path)
        if served is not None or self._directory is None:
            return served
        relative = posixpath.normpath(path).lstrip("/")
        if relative.startswith("..") or "\x00" in relative:
            return None
        candidate = (self._directory / relative).resolve()
        if not candidate.is_relative_to(self._directory) or not candidate.is_file():
            return None
        data = candidate.read_bytes()
        return Served(data, etag_of(data), candidate.stat().st_mtime)


# ------------------------------------------------------------------------------ fault proxy


class Fault(enum.Enum):
    """What the fault proxy does with one request."""

    PASS = "pass"
    """Forward to the upstream server and relay its answer (``502 Bad Gateway`` when the
    upstream cannot be reached or cuts its answer short)."""
    ERROR_503 = "503"
    """Answer ``503 Service Unavailable`` (the connection stays usable)."""
    RESET = "reset"
    """Reset the connection (TCP RST) without answering."""
    STALL = "stall"
    """Answer nothing for ``stall_seconds`` (or until the proxy stops), then close."""
    TRUNCATE = "truncate"
    """Send the upstream answer's headers, with its full ``Content-Length``, but only half of
    its body, then close. A HEAD or an empty body is closed without an answer."""
    HUGE_BODY = "huge-body"
    """A GET: ``Hostile.HUGE_BODY`` (the range ignored, ``hostile_bytes`` generated bytes)."""
    ENDLESS_BODY = "endless-body"
    """A GET: ``Hostile.ENDLESS_BODY`` (206 and a chunked body that never ends)."""
    GZIP_BOMB = "gzip-bomb"
    """A GET: ``Hostile.GZIP_BOMB`` (206, ``Content-Encoding: gzip``, inflating to
    ``hostile_bytes``)."""
    STALL_MID_BODY = "stall-mid-body"
    """A GET: the upstream answer's headers and half its body, then nothing for
    ``stall_seconds`` (``Hostile.STALL_MID_BODY``)."""

    @property
    def hostile(self) -> Hostile | None:
        """Return the hostile answer this fault sends to a GET, if it is one."""
        return _HOSTILE_FAULTS.get(self)


_HOSTILE_FAULTS = {
    Fault.HUGE_BODY: Hostile.HUGE_BODY,
    Fault.ENDLESS_BODY: Hostile.ENDLESS_BODY,
    Fault.GZIP_BOMB: Hostile.GZIP_BOMB,
    Fault.STALL_MID_BODY: Hostile.STALL_MID_BODY,
}


_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)


@dataclass
class _Scheduled:
    fault: Fault
    remaining: int
    methods: frozenset[str] | None


@dataclass(frozen=True)
class Applied:
    """A request the proxy received, the fault it applied, and when (``time.monotonic()``)."""

    request: Request
    fault: Fault
    at: float = field(default=0.0, compare=False)


class _ProxyHandler(_Quiet):
    server: _Server

    def do_HEAD(self) -> None:
        self._proxy()

    def do_GET(self) -> None:
        self._proxy()

    def _proxy(self) -> None:
        owner = self.server.owner
        assert isinstance(owner, FaultProxy)
        request = Request(
            self.command, self.path, self.headers.get("Range"), dict(self.headers.items())
        )
        owner.record(request)
        fault = owner.decide(request)
        if fault is Fault.ERROR_503:
            self.send_body(503, b"injected fault\n", {"Content-Type": "text/plain"})
        elif fault is Fault.RESET:
            self._reset()
        elif fault is Fault.STALL:
            self.server.stopping.wait(owner.stall_seconds)
            self.close_connection = True
        elif fault.hostile is not None and fault is not Fault.STALL_MID_BODY:
            self.send_hostile(
                fault.hostile,
                content_range=_content_range(self.headers.get("Range")),
                body=b"",
                hostile_bytes=owner.hostile_bytes,
                stall_seconds=owner.stall_seconds,
            )
        else:
            try:
                status, headers, body = self._forward(owner.upstream)
            except (OSError, http.client.HTTPException):
                # the upstream is down or cut the answer short, as a real proxy would say
                self.send_body(502, b"upstream unreachable\n", {"Content-Type": "text/plain"})
                return
            if fault is Fault.TRUNCATE:
                self._send_truncated(status, headers, body)
            elif fault is Fault.STALL_MID_BODY:
                self._send_stalled(status, headers, body, owner.stall_seconds)
            else:
                self._relay(status, headers, body)

    def _forward(self, upstream: tuple[str, int]) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*upstream, timeout=30)
        try:
            headers = {
                name: value
                for name, value in self.headers.items()
                if name.lower() not in _HOP_BY_HOP and name.lower() != "host"
            }
            connection.request(self.command, self.path, headers=headers)
            response = connection.getresponse()
            body = response.read()
            return response.status, response.getheaders(), body
        finally:
            connection.close()

    def _relay(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            lowered = name.lower()
            if lowered in _HOP_BY_HOP or lowered in ("content-length", "date", "server"):
                continue
            self.send_header(name, value)
        if self.command == "HEAD":
            length = next((v for n, v in headers if n.lower() == "content-length"), None)
            if length is not None:
                self.send_header("Content-Length", length)
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_upstream_headers(
        self, status: int, headers: list[tuple[str, str]], length: int
    ) -> None:
        """Send the upstream answer's status and headers, announcing ``length`` bytes and a
        closing connection (the body that follows is cut short)."""
        self.send_response(status)
        for name, value in headers:
            lowered = name.lower()
            if lowered in _HOP_BY_HOP or lowered in ("content-length", "date", "server"):
                continue
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()

    def _send_truncated(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.close_connection = True
        if self.command == "HEAD" or len(body) < 2:
            return
        self._send_upstream_headers(status, headers, len(body))
        self.wfile.write(body[: len(body) // 2])

    def _send_stalled(
        self, status: int, headers: list[tuple[str, str]], body: bytes, seconds: float
    ) -> None:
        """Send the upstream answer's headers and half its body, then stall (and close)."""
        self.close_connection = True
        self._send_upstream_headers(status, headers, len(body))
        self._write_piece(body[: len(body) // 2])
        self.pause(seconds)

    def _reset(self) -> None:
        """Close the connection with a TCP RST instead of a FIN."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()  # the makefile reference would keep the socket open
            self.connection.close()


def _content_range(header: str | None) -> str | None:
    """Return the ``Content-Range`` a 206 to ``bytes=a-b`` carries (total unknown), or None."""
    match = _RANGE.match(header or "")
    if match is None or not match.group(1) or not match.group(2):
        return None
    return f"bytes {match.group(1)}-{match.group(2)}/*"


class FaultProxy(_Running):
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` whose answers can be scripted.

    For each request the proxy takes, in order: the next scheduled fault whose methods match
    (``fail_next``), else with probability ``share`` a fault drawn from the random set
    (``set_random``, seeded), else the default (``set_default``, initially ``PASS``). Every
    request and the fault applied to it are recorded, with the time it was applied.

    Like the range server it can be stopped and started again on the same port (``port``
    binds a given one).
    """

    def __init__(
        self,
        upstream: str,
        *,
        stall_seconds: float = 30.0,
        seed: int = 0,
        port: int = 0,
        hostile_bytes: int = 1024**3,
    ) -> None:
        parsed = urllib.parse.urlsplit(require_loopback(upstream))
        assert parsed.port is not None
        super().__init__(_ProxyHandler, port)
        self.upstream = (LOCALHOST, parsed.port)
        self.stall_seconds = stall_seconds
        self.hostile_bytes = hostile_bytes
        self._lock = threading.Lock()
        self._schedule: list[_Scheduled] = []
        self._default = Fault.PASS
        self._random = random.Random(seed)
        self._share = 0.0
        self._random_faults: tuple[Fault, ...] = ()
        self._applied: list[Applied] = []

    def fail_next(
        self, count: int, fault: Fault, *, methods: Collection[str] | None = None
    ) -> None:
        """Apply ``fault`` to the next ``count`` requests (of ``methods``, default any)."""
        if count < 0:
            raise ValueError("count must be >= 0")
        chosen = None if methods is None else frozenset(m.upper() for m in methods)
        with self._lock:
            self._schedule.append(_Scheduled(fault, count, chosen))

    def set_default(self, fault: Fault) -> None:
        """Apply ``fault`` to every request that nothing scheduled or random applies to."""
        with self._lock:
            self._default = fault

    def set_random(self, share: float, faults: Sequence[Fault], *, seed: int | None = None) -> None:
        """Apply a fault drawn from ``faults`` to a random ``share`` of the requests."""
        if not 0.0 <= share <= 1.0:
            raise ValueError("share must be between 0 and 1")
        if share > 0 and not faults:
            raise ValueError("a random share needs faults to draw from")
        with self._lock:
            self._share = share
            self._random_faults = tuple(faults)
            if seed is not None:
                self._random.seed(seed)

    def clear(self) -> None:
        """Pass every request through from now on."""
        with self._lock:
            self._schedule.clear()
            self._default = Fault.PASS
            self._share = 0.0
            self._random_faults = ()

    def pending(self) -> int:
        """Return how many scheduled faults are still to be applied."""
        with self._lock:
            return sum(entry.remaining for entry in self._schedule)

    def decide(self, request: Request) -> Fault:
        """Return (and record) the fault for ``request``; called by the handler."""
        with self._lock:
            fault = self._decide(request)
            self._applied.append(Applied(request, fault, time.monotonic()))
        return fault

    def _decide(self, request: Request) -> Fault:
        for entry in self._schedule:
            if entry.remaining > 0 and (entry.methods is None or request.method in entry.methods):
                entry.remaining -= 1
                return entry.fault
        self._schedule = [entry for entry in self._schedule if entry.remaining > 0]
        if self._share > 0 and self._random.random() < self._share:
            fault = self._random.choice(self._random_faults)
            if fault.hostile is not None and request.method != "GET":
                return Fault.PASS  # a hostile body needs a GET
            return fault
        return self._default

    @property
    def applied(self) -> list[Applied]:
        """Return every request with the fault applied to it, oldest first."""
        with self._lock:
            return list(self._applied)

    def count_applied(self, fault: Fault) -> int:
        """Return how many requests got ``fault``."""
        return sum(1 for item in self.applied if item.fault is fault)

    def faults_between(
        self, path: str, start: float, end: float, only: Collection[Fault] | None = None
    ) -> int:
        """Return how many requests for ``path`` got a fault other than PASS in [start, end]
        (one of ``only``, when given).

        ``path`` is compared without its query string; times are ``time.monotonic()``.
        """
        wanted = "/" + path.lstrip("/")
        return sum(
            1
            for item in self.applied
            if item.fault is not Fault.PASS
            and (only is None or item.fault in only)
            and start <= item.at <= end
            and urllib.parse.urlsplit(item.request.path).path == wanted
        )
