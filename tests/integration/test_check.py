"""``refmount check`` as a command: exit codes, the report, and progress while loading."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.datasets import json_v0, json_v1
from tests.support.icechunk_repos import build_repository, requires_icechunk
from tests.support.mounting import mounted, refmount_command, requires_fuse


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        refmount_command(*args),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_good_sets_exit_0(tmp_path: Path) -> None:
    for dataset in (json_v0(tmp_path / "v0"), json_v1(tmp_path / "v1", compress=True)):
        result = run("check", "--sizes", str(dataset.refs))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "problems    none" in result.stdout
        assert result.stderr == ""


def test_a_set_with_problems_exits_2_and_lists_each_key(tmp_path: Path) -> None:
    refs = tmp_path / "bad.json"
    refs.write_text(
        json.dumps({"ok": "x", "a//b": "x", "k": ["data.bin", "1", 2], "z": "base64:!!!x"})
    )
    result = run("check", str(refs))
    assert result.returncode == 2
    for key in ("a//b", "k", "z"):
        assert f"key {key!r}:" in result.stdout
    assert "problems    3" in result.stdout
    document = json.loads(run("check", "--json", str(refs)).stdout)
    assert len(document["problems"]) == 3


def test_a_malformed_set_exits_2(tmp_path: Path) -> None:
    refs = tmp_path / "bad.json"
    refs.write_bytes(b"{not json")
    result = run("check", str(refs))
    assert result.returncode == 2
    assert "malformed" in result.stdout
    assert "not valid JSON" in result.stdout


def big_refs(path: Path, keys: int) -> Path:
    path.write_text(json.dumps({f"k/{i}": "x" for i in range(keys)}))
    return path


@pytest.mark.slow
def test_progress_lines_while_checking_a_big_set(tmp_path: Path) -> None:
    refs = big_refs(tmp_path / "big.json", 300_000)
    result = run("check", str(refs))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    # the file is read as a stream: the total is estimated until the end
    assert re.fullmatch(
        rf"loading {re.escape(str(refs))}: 100,000 of \d{{3}},\d{{3}} keys", lines[0]
    )
    assert lines[-1] == f"loading {refs}: 300,000 of 300,000 keys"
    assert "\r" not in result.stderr  # not a terminal: plain lines, no bar


@pytest.mark.slow
@pytest.mark.fuse
@requires_fuse
def test_progress_lines_while_mounting_a_big_set(tmp_path: Path) -> None:
    refs = big_refs(tmp_path / "big.json", 300_000)
    with mounted(refs, tmp_path / "mnt") as mount:
        assert (mount.path / "k" / "299999").read_bytes() == b"x"
    assert f"loading {refs}: 300,000 of 300,000 keys" in mount.log_text()


def test_no_progress_for_a_small_set(tmp_path: Path) -> None:
    refs = big_refs(tmp_path / "small.json", 1000)
    result = run("check", str(refs))
    assert result.returncode == 0
    assert result.stderr == ""


def test_check_warns_of_a_parquet_record_file_without_the_raw_column(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data.bin").write_bytes(b"0123456789")
    root = tmp_path / "refs.parq"
    (root / "x").mkdir(parents=True)
    zarray = {"shape": [2], "chunks": [1], "dtype": "<u1", "compressor": None, "fill_value": 0}
    zarray |= {"filters": None, "order": "C", "zarr_format": 2}
    document = {"metadata": {".zgroup": {"zarr_format": 2}, "x/.zarray": zarray}}
    (root / ".zmetadata").write_text(json.dumps({**document, "record_size": 2}))
    table = pa.table(
        {
            "path": [str(tmp_path / "data.bin")] * 2,
            "offset": pa.array([0, 5], pa.int64()),
            "size": pa.array([5, 5], pa.int64()),
        }
    )
    pq.write_table(table, str(root / "x" / "refs.0.parq"))
    result = run("check", str(root))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warnings    1" in result.stdout
    assert f"{root}/x/refs.0.parq: columns are path, offset, size, not path" in result.stdout
    assert "problems    none" in result.stdout


@requires_icechunk
def test_a_repository_lists_its_snapshot_containers_and_chunks(tmp_path: Path) -> None:
    built = build_repository(tmp_path)
    result = run("check", "-o", f"authorize_container={built.container}", str(built.path))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        f"{built.path}: Icechunk repository",
        f"snapshot    {built.second} (branch main)",
    ]
    assert f"  {built.container}  authorized  4 chunks point into it" in lines
    assert f"  {built.other_container}  not authorized  4 chunks point into it" in lines
    assert "chunks      15 of 18 positions: 5 native, 8 virtual, 2 inline" in lines
    assert "  small  v3  shape [4]  chunks [2]  dtype uint8  2 of 2 chunks" in lines
    warning = next(line for line in lines if "may not read" in line)
    assert f"--authorize-container {built.other_container}" in warning
    assert lines[-1] == "problems    none"
    document = json.loads(run("check", "--json", "--tag", "v1", str(built.path)).stdout)
    assert document["repository"]["snapshot"] == built.first
    assert document["repository"]["chunks"] == {"native": 5, "virtual": 8, "inline": 2}


@requires_icechunk
def test_a_repository_at_a_version_that_does_not_exist_exits_2(tmp_path: Path) -> None:
    built = build_repository(tmp_path)
    result = run("check", "--branch", "nope", str(built.path))
    assert result.returncode == 2
    assert "cannot open branch nope" in result.stdout
    both = run("check", "--branch", "dev", "--tag", "v1", str(built.path))
    assert both.returncode == 2
    assert "give at most one of --branch, --tag and --snapshot" in both.stderr
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"a": "x"}))
    kerchunk = run("check", "--tag", "v1", str(refs))
    assert kerchunk.returncode == 2
    assert kerchunk.stderr.strip() == (
        f"refmount: error: {refs}: --branch, --tag, --snapshot and --authorize-container "
        "apply only to an Icechunk repository"
    )
