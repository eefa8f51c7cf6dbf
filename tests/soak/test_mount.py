"""The command line the soak mounts with."""

from __future__ import annotations

import sys
from pathlib import Path

from soak.mount import refmount_command
from tests.soak.builders import settings


def test_the_mount_runs_refmount_in_the_foreground_with_the_soaks_options():
    chosen = settings("--cache-size", "32M", "--timeout", "5s", "--retries", "2")
    command = refmount_command(chosen, ["-o", "x=1"], Path("refs.json"), Path("mnt"))
    assert command[:4] == [sys.executable, "-m", "refmount", "-f"]
    assert command[4:] == [
        "--log-level",
        "info",
        "--cache-size",
        "32M",
        "--timeout",
        "5s",
        "--retries",
        "2",
        "--fetcher",
        "auto",
        "-o",
        "x=1",
        "refs.json",
        "mnt",
    ]
