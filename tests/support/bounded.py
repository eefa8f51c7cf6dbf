"""Running ``refmount`` under an address-space limit and measuring its peak resident set."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.mounting import refmount_command

ADDRESS_SPACE = 1 << 30
"""The address space of a child fed hostile input: unbounded memory fails under it."""


@dataclass
class Bounded:
    """How a bounded run ended: exit status, output, and the peak RSS in KiB."""

    status: int
    stdout: str
    stderr: str
    peak_kib: int


REAPER = """\
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs a command and writes its peak RSS (KiB) to a file. A child started straight from the
test process would report the test process's peak as its own (the kernel keeps the high-water
mark of the memory it was forked or vforked from); this small process forks it afresh."""


def run_bounded(
    directory: Path, *args: str, address_space: int = ADDRESS_SPACE, timeout: float = 120
) -> Bounded:
    """Run ``refmount ARGS`` under ``prlimit --as``; return its status, output and peak RSS.

    ``timeout`` proves "does not hang", nothing finer.
    """
    peak = directory / "peak.txt"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            REAPER,
            str(peak),
            "prlimit",
            f"--as={address_space}",
            "--",
            *refmount_command(*args),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Bounded(result.returncode, result.stdout, result.stderr, int(peak.read_text()))
