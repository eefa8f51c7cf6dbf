"""The latency section's readers: rates per chunk size and the reference sets it writes."""

from __future__ import annotations

import json
from pathlib import Path

from bench.sections.latency_readers import Endpoint, rate, write_set


def test_rates_are_mib_per_second_for_1_mib_chunks_and_files_per_second_for_4_kib():
    assert rate("big", 100, 2.0) == 50.0
    assert rate("many", 100, 2.0) == 50.0
    assert rate("many", 1000, 0.5) == 2000.0


def test_the_reference_set_holds_both_arrays_back_to_back_in_their_files(tmp_path: Path):
    endpoint = Endpoint("http", {"big": "http://h/big.bin", "many": "http://h/many.bin"})
    path = write_set(tmp_path / "set.json", endpoint, {"big": 2, "many": 3})
    refs = json.loads(path.read_text())["refs"]
    assert refs["big/1"] == ["http://h/big.bin", 1024 * 1024, 1024 * 1024]
    assert refs["many/2"] == ["http://h/many.bin", 8192, 4096]
    assert "many/3" not in refs
    zarray = json.loads(refs["many/.zarray"])
    assert (zarray["shape"], zarray["chunks"], zarray["dtype"]) == ([3 * 4096], [4096], "|u1")
