"""Run the soak (``python -m soak``, as ``scripts/soak`` does) for a short while: many readers,
injected faults, leak checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.mounting import requires_fuse

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.http,
    pytest.mark.s3,
    pytest.mark.slow,
    requires_fuse,
]

ROOT = Path(__file__).resolve().parents[2]

SECONDS = float(os.environ.get("REFMOUNT_SOAK_SECONDS", "60" if os.environ.get("CI") else "20"))
"""How long the soak reads: 60 s under CI (``CI`` set), 20 s otherwise, or
``REFMOUNT_SOAK_SECONDS``."""


@pytest.mark.parametrize("fetcher", ["auto", "fsspec"])
def test_soak_passes_every_check(tmp_path: Path, fetcher: str) -> None:
    figures = tmp_path / "soak.json"
    log = tmp_path / "refmount.log"
    command = [
        sys.executable,
        "-m",
        "soak",
        "--seconds",
        f"{SECONDS:g}",
        "--json",
        str(figures),
        "--log",
        str(log),
        "--fetcher",
        fetcher,
    ]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    # the soak bounds itself (deadline, joins, unmount); this is only a backstop
    result = subprocess.run(
        command,
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=SECONDS + 300,
        check=False,
    )
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{tail}"
    summary = json.loads(figures.read_text())
    assert summary["ok"] is True
    assert all(check["ok"] for check in summary["checks"]), summary["checks"]
    assert summary["wrong_reads"] == 0
    assert summary["eio_unexplained"] == 0
    assert summary["settings"]["threads"] == 64
    assert summary["settings"]["fetcher"] == fetcher
    assert set(summary["reads_per_target"]) == {"http", "s3"}
    assert summary["reads"] >= 100, summary["reads"]
    injected = summary["faults_injected"]
    assert sum(injected["http"].values()) > 0
    assert sum(injected["s3"].values()) > 0
    assert "soak passed" in result.stdout
