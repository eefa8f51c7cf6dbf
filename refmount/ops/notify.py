"""Service-manager notifications (sd_notify) over ``$NOTIFY_SOCKET``, without libsystemd."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)

SOCKET_VARIABLE = "NOTIFY_SOCKET"
"""Set by systemd for ``Type=notify`` services: where to send notifications."""


def socket_address(value: str) -> str | bytes | None:
    """Return the ``AF_UNIX`` address named by ``$NOTIFY_SOCKET``, or None if unsupported.

    An absolute path is a socket file; a leading ``@`` names a Linux abstract socket.
    """
    if value.startswith("/"):
        return value
    if value.startswith("@") and len(value) > 1:
        return b"\0" + value[1:].encode()
    return None


def notify(*assignments: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``NAME=value`` assignments as one datagram; return whether it was sent.

    Does nothing when ``$NOTIFY_SOCKET`` is unset (not running under a service manager).
    Never raises: a notification that cannot be delivered is logged and dropped.
    """
    value = (os.environ if environ is None else environ).get(SOCKET_VARIABLE)
    if not value:
        return False
    address = socket_address(value)
    if address is None:
        log.warning("ignoring %s=%r: not a path or an abstract socket", SOCKET_VARIABLE, value)
        return False
    message = "\n".join(assignments).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(message, address)
    except OSError as error:
        log.warning("cannot notify the service manager at %s: %s", value, error)
        return False
    return True


def _one_line(text: str) -> str:
    """A notification value ends at a newline: keep ``text`` on one line."""
    return " ".join(text.splitlines())


def ready(status: str, *, environ: Mapping[str, str] | None = None) -> bool:
    """Tell the service manager that start-up is complete (``READY=1``), with a status line."""
    return notify(
        "READY=1", f"STATUS={_one_line(status)}", f"MAINPID={os.getpid()}", environ=environ
    )


def stopping(status: str, *, environ: Mapping[str, str] | None = None) -> bool:
    """Tell the service manager that shutdown has begun (``STOPPING=1``), with a status line."""
    return notify("STOPPING=1", f"STATUS={_one_line(status)}", environ=environ)


def status(text: str, *, environ: Mapping[str, str] | None = None) -> bool:
    """Set the free-form status line shown by ``systemctl status`` (``STATUS=...``)."""
    return notify(f"STATUS={_one_line(text)}", environ=environ)


def main_pid(pid: int, *, environ: Mapping[str, str] | None = None) -> bool:
    """Tell the service manager which process is the service's main process (``MAINPID=``)."""
    return notify(f"MAINPID={pid}", environ=environ)
