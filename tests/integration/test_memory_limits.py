"""A daemon under a memory limit sizes its caps from the limit, not from the machine: under
``prlimit --as=3G``, compressed reference files that inflate to gigabytes are refused in one
line with exit status 2, at a resident peak well below what they inflate to, and running out
of memory while loading is one line too, never a traceback."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
import zstandard

from tests.support.bounded import Bounded, run_bounded
from tests.support.mounting import is_mounted

pytestmark = [pytest.mark.slow]

LIMIT = 3 << 30
"""The address space the daemon runs in."""

MIB = 1 << 20
FRAME = 64 * MIB
"""Each bomb is one compressed frame (or member) of this much, repeated."""


def repeated(frame: bytes, total: int) -> bytes:
    return frame * (total // FRAME)


def zstd_json_bomb(total: int) -> bytes:
    """zstd frames that inflate to ``total`` bytes of a JSON document that looks right
    (a string that goes on and on): only the cap stops it."""
    head = zstandard.ZstdCompressor().compress(b'{"version": 1, "refs": {"k": "')
    body = zstandard.ZstdCompressor(level=19).compress(b"x" * FRAME)
    return head + repeated(body, total)


def gzip_zero_bomb(total: int) -> bytes:
    """gzip members that inflate to ``total`` zero bytes: not JSON from the first byte."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    member = packer.compress(b"\0" * FRAME) + packer.flush()
    return repeated(member, total)


def mount_bounded(tmp_path: Path, refs: Path, *options: str) -> Bounded:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    outcome = run_bounded(tmp_path, "-f", *options, str(refs), str(mountpoint), address_space=LIMIT)
    assert not is_mounted(mountpoint)
    return outcome


def one_line(outcome: Bounded, refs: Path) -> str:
    assert outcome.status == 2, outcome.stderr
    lines = [line for line in outcome.stderr.splitlines() if not line.startswith("loading ")]
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith(f"refmount: error: {refs}: "), lines[0]
    return lines[0]


def test_a_zstd_file_that_inflates_to_6g_stops_at_the_cap_the_limit_gives(
    tmp_path: Path,
) -> None:
    inflated = 6 << 30
    refs = tmp_path / "refs.json.zst"
    refs.write_bytes(zstd_json_bomb(inflated))
    assert refs.stat().st_size < 1 * MIB
    outcome = mount_bounded(tmp_path, refs)
    line = one_line(outcome, refs)
    assert "inflates (zstd) to more than" in line
    cap = int(line.split("more than ")[1].split(" bytes")[0].replace(",", ""))
    assert cap < LIMIT // 2  # from the limit: the machine's memory would give more
    assert outcome.peak_kib * 1024 < inflated // 3, outcome.peak_kib
    assert outcome.peak_kib * 1024 < cap + 512 * MIB, outcome.peak_kib  # the cap, not twice it


def test_a_gzip_file_that_inflates_to_1g_of_zeros_stops_at_its_first_megabyte(
    tmp_path: Path,
) -> None:
    inflated = 1 << 30
    refs = tmp_path / "refs.json.gz"
    refs.write_bytes(gzip_zero_bomb(inflated))
    assert refs.stat().st_size < 2 * MIB
    outcome = mount_bounded(tmp_path, refs)
    line = one_line(outcome, refs)
    assert line.endswith("not valid JSON: Expecting value at line 1 column 1"), line
    assert outcome.peak_kib * 1024 < 300 * MIB, outcome.peak_kib


def test_running_out_of_memory_while_loading_is_one_line(tmp_path: Path) -> None:
    """A cap set above what the limit allows: the load runs out of memory, and says so."""
    refs = tmp_path / "refs.json.zst"
    refs.write_bytes(zstd_json_bomb(6 << 30))
    outcome = mount_bounded(tmp_path, refs, "--max-refs-size", "5G")
    line = one_line(outcome, refs)
    assert "ran out of memory while loading it" in line
    assert f"(the limit: RLIMIT_AS of {LIMIT:,} bytes)" in line
    assert "Traceback" not in outcome.stderr
