"""Where a run keeps the daemon's log, and how it reads the mount's stats file."""

from __future__ import annotations

import json
from pathlib import Path

from refmount.fuse.stats import STATS_FILE
from soak.run import log_path, read_stats
from tests.soak.builders import settings


def test_the_log_goes_where_asked_or_to_the_scratch_directory(tmp_path: Path):
    assert log_path(settings(), tmp_path) == tmp_path / "refmount.log"
    assert log_path(settings("--log", "d.log"), tmp_path) == Path("d.log")


def test_the_stats_file_is_read_as_json_and_missing_or_broken_as_nothing(tmp_path: Path):
    assert read_stats(tmp_path) == {}
    (tmp_path / STATS_FILE).write_text("{not json")
    assert read_stats(tmp_path) == {}
    (tmp_path / STATS_FILE).write_text(json.dumps({"open_files": 0}))
    assert read_stats(tmp_path) == {"open_files": 0}
