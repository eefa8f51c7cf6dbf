"""What the readers read: their random choice of reads, ranges read to the end of a file, and
the first read of each target before any fault."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from soak.readers import LARGEST_RANGE, choose, read_range, warm_engines
from tests.soak.builders import key

KEYS = [key("http/k0", bytes(1000)), key("s3/k1", bytes(2 * LARGEST_RANGE), "s3", "/b/o.bin")]


def test_a_tenth_of_the_reads_are_whole_files_the_rest_ranges_of_at_most_256_kib():
    rng = random.Random(1)
    reads = [choose(rng, KEYS, direct_ok=True) for _ in range(5000)]
    whole = [read for read in reads if read.whole]
    assert 400 < len(whole) < 600
    assert all((read.offset, read.size) == (0, len(read.key.data)) for read in whole)
    for read in reads:
        assert read.whole or 1 <= read.size <= LARGEST_RANGE
        assert read.offset + read.size <= len(read.key.data)


def test_half_the_reads_are_direct_while_the_kernel_allows_it():
    rng = random.Random(2)
    direct = [choose(rng, KEYS, direct_ok=True).direct for _ in range(2000)]
    assert 900 < sum(direct) < 1100
    assert not any(choose(rng, KEYS, direct_ok=False).direct for _ in range(200))


def test_a_range_read_returns_fewer_bytes_at_the_end_of_the_file(tmp_path: Path):
    path = tmp_path / "data"
    path.write_bytes(b"0123456789")
    assert read_range(path, 3, 4, direct=False) == b"3456"
    assert read_range(path, 8, 100, direct=False) == b"89"
    assert read_range(path, 10, 1, direct=False) == b""


def write_keys(directory: Path, wrong: str | None = None) -> None:
    for k in KEYS:
        (directory / k.target).mkdir(exist_ok=True)
        (directory / k.name).write_bytes(b"wrong" if k.name == wrong else k.data)


def test_the_first_reads_check_one_key_of_each_target(tmp_path: Path):
    write_keys(tmp_path)
    warm_engines(tmp_path, KEYS)
    write_keys(tmp_path, wrong="s3/k1")
    with pytest.raises(SystemExit, match="soak: wrong bytes in s3/k1 before any fault"):
        warm_engines(tmp_path, KEYS)
