"""Tests of the C allocator settings: trimming after a load, reusing freed blocks to serve."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from refmount.ops import allocator

CHURN = textwrap.dedent(
    """
    import queue, resource, sys, threading
    from refmount.ops import allocator

    if sys.argv[1] == "reuse":
        assert allocator.reuse_freed_blocks()
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
    allocator.trim()
    allocator.trim()


@glibc_only
def test_freed_blocks_are_reused_instead_of_faulting_in_fresh_pages() -> None:
    default = faults_per_mib("default")
    reusing = faults_per_mib("reuse")
    # A fresh MiB is 256 pages: the default settings fault in most of them for each chunk.
    assert default > 64, default
    assert reusing < default / 3, (reusing, default)
    assert reusing < 32, reusing


def write_statm(path: Path, resident_pages: int) -> Path:
    path.write_text(f"{resident_pages * 2} {resident_pages} 100 10 0 50 0\n")
    return path


def test_resident_bytes_reads_the_second_figure_in_pages(tmp_path: Path) -> None:
    statm = write_statm(tmp_path / "statm", 1000)
    assert allocator.resident_bytes(statm) == 1000 * os.sysconf("SC_PAGE_SIZE")
    assert allocator.resident_bytes(tmp_path / "missing") is None
    (tmp_path / "bad").write_text("oops\n")
    assert allocator.resident_bytes(tmp_path / "bad") is None
    assert allocator.resident_bytes() is not None  # this process, on Linux


def test_the_bound_is_counted_from_the_resident_set_when_settled(tmp_path: Path) -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    statm = write_statm(tmp_path / "statm", 1000)
    bound = allocator.ResidentBound(headroom=100 * page, statm=statm)
    write_statm(statm, 5000)
    # nothing is enforced before the bound is settled
    assert (bound.limit, bound.enforce()) == (None, False)
    bound.settle()
    assert bound.limit == 5100 * page
    assert not bound.enforce()
    write_statm(statm, 5100)
    assert not bound.enforce()  # at the bound is within it
    assert bound.trims == 0


def test_the_heap_is_trimmed_only_while_over_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trims: list[None] = []
    monkeypatch.setattr(allocator, "trim", lambda: trims.append(None))
    statm = write_statm(tmp_path / "statm", 1000)
    bound = allocator.ResidentBound(headroom=0, statm=statm)
    bound.settle()
    write_statm(statm, 1001)
    assert bound.enforce()
    assert bound.enforce()
    write_statm(statm, 900)
    assert not bound.enforce()
    assert len(trims) == bound.trims == 2
    statm.unlink()
    assert not bound.enforce()  # no figure: nothing done


@glibc_only
def test_trimming_hands_freed_heap_pages_back() -> None:
    script = textwrap.dedent(
        """
        import threading
        from refmount.ops import allocator

        def churn():  # a fetch thread's arena: big blocks with small ones kept between them
            kept = []
            for number in range(256):
                block = bytearray(256 << 10)
                block[::4096] = b"x" * len(block[::4096])
                separator = bytearray(1024)  # above pymalloc's size: from the same heap
                kept.append(block)
                small.append(separator)
            del kept[:]  # the big blocks are freed: holes between the live separators

        small = []
        assert allocator.reuse_freed_blocks()  # freed blocks stay, as while serving
        thread = threading.Thread(target=churn)
        thread.start()
        thread.join()
        before = allocator.resident_bytes()
        bound = allocator.ResidentBound(headroom=0)
        bound.settle()
        bound._limit -= 1  # over the bound by one byte
        assert bound.enforce()
        print(before - allocator.resident_bytes())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert int(done.stdout) > 32 << 20, done.stdout  # of the 64 MiB freed, most went back
