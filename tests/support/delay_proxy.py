"""A TCP proxy on 127.0.0.1 that holds every request for a fixed delay: remote latency.

Object stores answer in 10 to 50 ms; servers on loopback answer in microseconds. Put this in front
of one (nginx, moto, the Range server) and each request reaches it ``delay`` seconds after the
client sent it, so each answer's first byte comes that much later, while the answers
themselves flow at the server's full speed (bytes go through ``os.splice``: no copy into
Python, little CPU).

One thread per direction of each connection. The client-to-server direction holds each piece
until ``delay`` after it arrived (pieces keep their order, so a request split across pieces is
held once); the answers are spliced back as they come. A client that pipelines requests would
see them held together, which is what a far server does too. ``tests.support.servers.FaultProxy``
reads and rewrites HTTP messages in Python to inject faults; this one never parses them, so
the benchmark's figures behind it are bound by the server and the client, not by the proxy.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from types import TracebackType
from typing import Self

PIECE = 64 * 1024
"""Largest piece of a request read at once."""

SPLICE = 1024 * 1024
"""Largest piece of an answer moved through the pipe at once."""


class DelayProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream_port``, holding requests ``delay`` seconds."""

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.port: int = self._listener.getsockname()[1]
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.connections = 0
        """How many client connections were accepted."""
        self.requests = 0
        """How many request pieces were held and forwarded."""

    @property
    def url(self) -> str:
        """Return the proxy's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        """Accept connections in a background thread."""
        threading.Thread(target=self._accept, name="delay-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop accepting and close every connection."""
        with self._lock:
            self._closed = True
            sockets = list(self._sockets)
        self._listener.close()
        for sock in sockets:
            _shut(sock)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close()
                    server.close()
                    return
                self._sockets.update((client, server))
                self.connections += 1
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._requests, args=(client, server), daemon=True).start()
            threading.Thread(target=self._answers, args=(server, client), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket) -> None:
        """Forward what the client sends, each piece ``delay`` after it arrived."""
        try:
            while piece := client.recv(PIECE):
                time.sleep(self.delay)
                with self._lock:
                    self.requests += 1
                server.sendall(piece)
        except OSError:
            pass
        finally:
            self._forget(client, server)

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        """Splice what the server sends back to the client, as it comes."""
        read_end, write_end = os.pipe()
        try:
            while True:
                moved = os.splice(server.fileno(), write_end, SPLICE)
                if moved == 0:
                    break
                while moved:
                    moved -= os.splice(read_end, client.fileno(), moved)
        except OSError:
            pass
        finally:
            os.close(read_end)
            os.close(write_end)
            self._forget(server, client)

    def _forget(self, *sockets: socket.socket) -> None:
        with self._lock:
            for sock in sockets:
                self._sockets.discard(sock)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
