"""``refmount stats`` against a real mount: counters, percentiles, JSON, and non-mounts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.datasets import json_v0
from tests.support.mounting import mounted, refmount_command, requires_fuse

pytestmark = [pytest.mark.fuse, requires_fuse]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        refmount_command(*args), capture_output=True, text=True, timeout=60, check=False
    )


def test_stats_show_reads_bytes_and_percentiles_of_a_mount(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        for key in ("whole", "absolute", "text", "relative_dot"):
            assert (mount.path / key).read_bytes() == dataset.expected[key]
        served = sum(len(dataset.expected[key]) for key in ("whole", "absolute", "text"))

        table = run("stats", str(mount.path))
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert any(line.startswith("reads ") and line.split()[1] != "0" for line in lines)
        read = next(line for line in lines if line.startswith("read "))
        assert read.split()[1] != "0"
        assert "µs" in read or "ms" in read

        result = run("stats", "--json", str(mount.path))
        assert result.returncode == 0, result.stderr
        snapshot = json.loads(result.stdout)
        assert snapshot["source"] == str(dataset.refs)
        assert snapshot["pid"] == mount.process.pid
        assert snapshot["reads"] >= 4
        assert snapshot["bytes_served"] >= served
        assert snapshot["fetches"] >= 1
        assert snapshot["open_files"] == 0
        operations = snapshot["operations"]
        for name in ("lookup", "open", "read"):
            assert operations[name]["count"] > 0, name
        read_op = operations["read"]
        assert 0 <= read_op["p50_us"] <= read_op["p90_us"] <= read_op["p99_us"]
        assert read_op["p99_us"] <= read_op["max_us"]

        direct = json.loads((mount.path / ".refmount-stats").read_bytes())
        assert direct["reads"] >= snapshot["reads"]
        assert direct["operations"]["open"]["count"] > operations["open"]["count"]
        assert ".refmount-stats" not in os.listdir(mount.path)
        assert (mount.path / ".refmount-stats").stat().st_size == 0


def test_stats_refuses_what_is_not_a_refmount_mount(tmp_path: Path) -> None:
    dataset = json_v0(tmp_path / "v0")
    result = run("stats", str(tmp_path))
    assert result.returncode == 1
    assert "is not a refmount mount" in result.stderr
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        inside = run("stats", str(mount.path / "x"))
        assert inside.returncode == 1
        assert "not a mountpoint" in inside.stderr


def test_stats_in_prometheus_format_for_the_textfile_collector(tmp_path: Path) -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    dataset = json_v0(tmp_path / "v0")
    with mounted(dataset.refs, tmp_path / "mnt") as mount:
        assert (mount.path / "whole").read_bytes() == dataset.expected["whole"]
        result = run("stats", "--format", "prometheus", str(mount.path))
        assert result.returncode == 0, result.stderr
        families = {f.name: f for f in parser.text_string_to_metric_families(result.stdout)}
        assert families["refmount_reads"].samples[0].value >= 1
        assert families["refmount_reads"].samples[0].labels["mountpoint"] == str(mount.path)
        latency = families["refmount_operation_latency_seconds"]
        reads = [s for s in latency.samples if s.labels["operation"] == "read"]
        count = next(s.value for s in reads if s.name.endswith("_count"))
        infinite = next(s.value for s in reads if s.labels.get("le") == "+Inf")
        assert count == infinite >= 1
        assert run("stats", "--format", "json", str(mount.path)).returncode == 0
    refused = run("stats", "--format", "xml", str(tmp_path))
    assert refused.returncode == 2
