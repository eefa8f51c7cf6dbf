"""Listings on real mounts: one target that cannot tell its size never fails the listing of
its directory; a sparse Parquet array lists what is present, not its grid; Parquet rows as
other tools write them (relative paths from the record file, whole-file rows)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.datasets import target_bytes, zarray
from tests.support.mounting import mounted, read_errno, requires_fuse
from tests.support.servers import RangeHTTPServer

pytestmark = [pytest.mark.fuse, requires_fuse]

DATA = target_bytes(20_000, 61)


@pytest.mark.http
def test_a_missing_whole_file_target_does_not_break_its_listing(
    tmp_path: Path, http_server: RangeHTTPServer
) -> None:
    (tmp_path / "good.bin").write_bytes(DATA)
    good_url = http_server.add("good.bin", DATA[:5000])
    gone_url = good_url.rsplit("/", 1)[0] + "/gone.bin"  # 404
    refs = {
        "d/local-good": [str(tmp_path / "good.bin")],
        "d/local-gone": [str(tmp_path / "gone.bin")],
        "d/http-good": [good_url],
        "d/http-gone": [gone_url],
        "d/range": [str(tmp_path / "good.bin"), 10, 5],
    }
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    with mounted(tmp_path / "refs.json", tmp_path / "mnt") as mount:
        listing = subprocess.run(
            ["ls", "-l", str(mount.path / "d")], capture_output=True, text=True, timeout=60
        )
        # every name is listed; ls cannot stat the two whose size is unknown (EIO), and says so
        lines = listing.stdout.splitlines()[1:]
        names = [line.split()[-1] for line in lines]
        assert names == ["http-gone", "http-good", "local-gone", "local-good", "range"]
        assert "reading directory" not in listing.stderr
        refused = listing.stderr.splitlines()
        assert len(refused) == 2, listing.stderr
        assert all("Input/output error" in line for line in refused)
        assert {"http-gone", "local-gone"} == {n for n in names if any(n in r for r in refused)}
        sizes = {line.split()[-1]: line.split()[4] for line in lines}
        assert sizes["http-good"] == "5000"
        assert sizes["local-good"] == str(len(DATA))
        assert sizes["http-gone"] == sizes["local-gone"] == "?"
        assert sorted(os.listdir(mount.path / "d")) == sorted(names)
        assert (mount.path / "d/local-good").read_bytes() == DATA
        assert (mount.path / "d/http-good").read_bytes() == DATA[:5000]
        assert (mount.path / "d/range").read_bytes() == DATA[10:15]
        for name in ("local-gone", "http-gone"):
            assert read_errno(mount.path / "d" / name) == errno.EIO
            with pytest.raises(OSError, match="Input/output error") as caught:
                (mount.path / "d" / name).stat()
            assert caught.value.errno == errno.EIO
        (tmp_path / "gone.bin").write_bytes(b"back")  # the target answers now
        assert (mount.path / "d/local-gone").stat().st_size == 4
        assert (mount.path / "d/local-gone").read_bytes() == b"back"
    log = mount.log_text()
    failed = [line for line in log.splitlines() if "failed" in line and "http-gone" in line]
    assert failed, log[-3000:]
    assert gone_url in failed[0]


def write_parquet(root: Path, metadata: Mapping[str, object], records: dict[str, pa.Table]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    document = {"metadata": metadata, "record_size": 100_000}
    (root / ".zmetadata").write_text(json.dumps(document))
    for name, table in records.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, str(root / name))
    return root


def rows(paths: list[str | None], offsets: list[int | None], sizes: list[int | None]) -> pa.Table:
    return pa.table(
        {
            "path": pa.array(paths, pa.string()),
            "offset": pa.array(offsets, pa.int64()),
            "size": pa.array(sizes, pa.int64()),
            "raw": pa.nulls(len(paths), pa.binary()),
        }
    )


def test_a_sparse_array_of_10_to_the_18_chunks_lists_what_is_present(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(DATA)
    huge = 10**18
    last = huge - 1
    record = last // 100_000
    target = str(tmp_path / "data.bin")
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "flat/.zarray": zarray([huge], [1]),
        "none/.zarray": zarray([huge], [1]),
        "nested/.zarray": {**zarray([10**9, 10**9], [1, 1]), "dimension_separator": "/"},
    }
    records = {
        "flat/refs.0.parq": rows(
            [target, None, target] + [None] * 99_997,
            [0, None, 5] + [None] * 99_997,
            [3, None, 4] + [None] * 99_997,
        ),
        f"flat/refs.{record}.parq": rows(
            [None] * 99_999 + [target], [None] * 99_999 + [9], [None] * 99_999 + [2]
        ),
        f"nested/refs.{record}.parq": rows(
            [None] * 99_999 + [target], [None] * 99_999 + [1], [None] * 99_999 + [1]
        ),
    }
    root = write_parquet(tmp_path / "sparse.parq", metadata, records)
    with mounted(root, tmp_path / "mnt") as mount:
        started = time.monotonic()
        found = subprocess.run(
            ["find", str(mount.path)], capture_output=True, text=True, timeout=120
        )
        assert found.returncode == 0, found.stderr
        listed = sorted(os.path.relpath(line, mount.path) for line in found.stdout.split())
        assert listed == sorted(
            [
                ".",
                ".zgroup",
                ".zmetadata",
                "flat",
                "flat/.zarray",
                "flat/0",
                "flat/2",
                f"flat/{last}",
                "none",
                "none/.zarray",
                "nested",
                "nested/.zarray",
                f"nested/{10**9 - 1}",
                f"nested/{10**9 - 1}/{10**9 - 1}",
            ]
        )
        assert (mount.path / "flat/2").read_bytes() == DATA[5:9]
        assert (mount.path / f"flat/{last}").read_bytes() == DATA[9:11]
        assert not (mount.path / "flat" / str(10**17)).exists()
        assert time.monotonic() - started < 100  # generous: walking the grid would never end


def test_parquet_rows_as_gdal_writes_them(tmp_path: Path) -> None:
    """Relative paths resolve against the record file's directory (``../`` too); a row with
    a path and null offset and size is the whole file."""
    root = tmp_path / "set" / "refs.parq"
    (root / "x").mkdir(parents=True)
    (root / "x" / "near.bin").write_bytes(DATA[:100])
    (tmp_path / "set" / "far.bin").write_bytes(DATA[100:300])
    metadata = {".zgroup": {"zarr_format": 2}, "x/.zarray": zarray([4], [1])}
    records = {
        "x/refs.0.parq": rows(
            ["near.bin", "../../far.bin", "near.bin", "./near.bin"],
            [0, 10, None, None],
            [10, 5, None, None],
        )
    }
    write_parquet(root, metadata, records)
    with mounted(root, tmp_path / "mnt") as mount:
        assert sorted(os.listdir(mount.path / "x")) == [".zarray", "0", "1", "2", "3"]
        assert (mount.path / "x/0").read_bytes() == DATA[:10]
        assert (mount.path / "x/1").read_bytes() == DATA[110:115]
        assert (mount.path / "x/2").read_bytes() == DATA[:100]
        assert (mount.path / "x/3").stat().st_size == 100
