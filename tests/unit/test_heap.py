"""Tests of the C allocator settings: trimming after a load, reusing freed blocks to serve."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from refmount import heap

CHURN = textwrap.dedent(
    """
    import queue, resource, sys, threading
    from refmount import heap

    if sys.argv[1] == "reuse":
        assert heap.reuse_freed_blocks()
    fetched = queue.Queue()

    def fetch():  # as the fetching thread does: a chunk joined from socket-sized pieces
        for number in range(192):
            fetched.put(b"".join(bytes([number % 256]) * (256 << 10) for _ in range(4)))
        fetched.put(None)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    thread = threading.Thread(target=fetch)
    thread.start()
    cached = []
    while (chunk := fetched.get()) is not None:
        cached.append(chunk)  # served, then dropped a few at a time (read through, evicted)
        if len(cached) > 6:
            del cached[:-2]
    thread.join()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 192)
    """
)

glibc_only = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the settings are glibc's"
)


def faults_per_mib(mode: str) -> float:
    """Run the fetch-and-drop pattern in a fresh interpreter; return its page faults per MiB."""
    done = subprocess.run(
        [sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True
    )
    return float(done.stdout)


def test_trim_is_harmless() -> None:
    heap.trim()
    heap.trim()


@glibc_only
def test_freed_blocks_are_reused_instead_of_faulting_in_fresh_pages() -> None:
    default = faults_per_mib("default")
    reusing = faults_per_mib("reuse")
    # A fresh MiB is 256 pages: the default settings fault in most of them for each chunk.
    assert default > 64, default
    assert reusing < default / 3, (reusing, default)
    assert reusing < 32, reusing
