"""Kernel tuning through sysfs, against a fake sysfs tree, and how the daemon reports it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from refmount import daemon
from refmount.ops import kernel_tuning
from refmount.ops.kernel_tuning import KernelTuning, Knob, TuningError, knob_paths, tune_connection

DEVICE = os.makedev(0, 57)


def fake_sysfs(root: Path, values: dict[str, int] | None = None) -> dict[str, Path]:
    """Create the three knob files of connection 57 with the kernel's defaults."""
    values = values or {"read_ahead_kb": 128, "max_background": 12, "congestion_threshold": 9}
    paths = knob_paths(DEVICE, root)
    for name, value in values.items():
        paths[name].parent.mkdir(parents=True, exist_ok=True)
        paths[name].write_text(f"{value}\n")
    return paths


def test_knob_paths_follow_the_device_number(tmp_path: Path) -> None:
    paths = knob_paths(DEVICE, tmp_path)
    assert paths["read_ahead_kb"] == tmp_path / "class/bdi/0:57/read_ahead_kb"
    assert paths["max_background"] == tmp_path / "fs/fuse/connections/57/max_background"
    assert paths["congestion_threshold"] == (
        tmp_path / "fs/fuse/connections/57/congestion_threshold"
    )


def test_tuning_writes_every_knob_and_reports_before_and_after(tmp_path: Path) -> None:
    paths = fake_sysfs(tmp_path)
    knobs = tune_connection(DEVICE, KernelTuning(), tmp_path)
    assert knobs == [
        Knob("max_background", paths["max_background"], 12, 64),
        Knob("congestion_threshold", paths["congestion_threshold"], 9, 48),
        Knob("read_ahead_kb", paths["read_ahead_kb"], 128, 16384),
    ]
    assert paths["read_ahead_kb"].read_text() == "16384\n"
    assert kernel_tuning.describe(knobs) == (
        "max_background 12 → 64, congestion_threshold 9 → 48, read_ahead_kb 128 → 16384"
    )


def test_values_already_in_effect_are_not_rewritten(tmp_path: Path) -> None:
    paths = fake_sysfs(
        tmp_path, {"read_ahead_kb": 4096, "max_background": 64, "congestion_threshold": 48}
    )
    for path in paths.values():
        path.chmod(0o444)
        os.utime(path, (0, 0))
    knobs = tune_connection(DEVICE, KernelTuning(read_ahead_kb=4096), tmp_path)
    assert [(knob.before, knob.after) for knob in knobs] == [(64, 64), (48, 48), (4096, 4096)]
    assert all(path.stat().st_mtime == 0 for path in paths.values())


def test_a_missing_knob_changes_nothing(tmp_path: Path) -> None:
    paths = fake_sysfs(tmp_path)
    paths["read_ahead_kb"].unlink()  # e.g. a kernel without that BDI entry
    with pytest.raises(TuningError, match="read_ahead_kb does not exist"):
        tune_connection(DEVICE, KernelTuning(), tmp_path)
    assert paths["max_background"].read_text() == "12\n"


def test_an_empty_connections_directory_hints_at_fusectl(tmp_path: Path) -> None:
    (tmp_path / "fs/fuse/connections").mkdir(parents=True)
    with pytest.raises(TuningError, match="fusectl"):
        tune_connection(DEVICE, KernelTuning(), tmp_path)


def test_an_unwritable_knob_is_a_tuning_error(tmp_path: Path) -> None:
    paths = fake_sysfs(tmp_path)
    target = paths["max_background"]
    target.unlink()
    target.symlink_to(tmp_path / "missing-dir" / "file")  # reads and writes both fail
    with pytest.raises(TuningError):
        tune_connection(DEVICE, KernelTuning(), tmp_path)


def test_garbage_in_a_knob_is_a_tuning_error(tmp_path: Path) -> None:
    paths = fake_sysfs(tmp_path)
    paths["congestion_threshold"].write_text("lots\n")
    with pytest.raises(TuningError, match="cannot read"):
        tune_connection(DEVICE, KernelTuning(), tmp_path)


@pytest.mark.parametrize(("asked", "level"), [(True, logging.INFO), (False, logging.DEBUG)])
def test_daemon_logs_the_values_in_effect(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    asked: bool,
    level: int,
) -> None:
    fake_sysfs(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with caplog.at_level(logging.DEBUG, logger="refmount.daemon"):
        daemon.tune_kernel(Path("/mnt/x"), DEVICE, KernelTuning(asked=asked), tmp_path)
    assert [record.levelno for record in caplog.records] == [level]
    assert "read_ahead_kb 128 → 16384" in caplog.text


@pytest.mark.parametrize(("asked", "level"), [(True, logging.WARNING), (False, logging.DEBUG)])
def test_daemon_logs_once_when_sysfs_lacks_the_connection(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    asked: bool,
    level: int,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with caplog.at_level(logging.DEBUG, logger="refmount.daemon"):
        daemon.tune_kernel(Path("/mnt/x"), DEVICE, KernelTuning(asked=asked), tmp_path)
    assert [record.levelno for record in caplog.records] == [level]
    assert "keeping its defaults" in caplog.text


def test_daemon_warns_once_without_root_when_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = fake_sysfs(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with caplog.at_level(logging.INFO, logger="refmount.daemon"):
        daemon.tune_kernel(Path("/mnt/x"), DEVICE, KernelTuning(asked=True), tmp_path)
    assert [record.levelno for record in caplog.records] == [logging.WARNING]
    assert "needs root" in caplog.text
    assert paths["read_ahead_kb"].read_text() == "128\n"


def test_the_default_tuning_is_silent_without_root(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = fake_sysfs(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with caplog.at_level(logging.DEBUG, logger="refmount.daemon"):
        daemon.tune_kernel(Path("/mnt/x"), DEVICE, KernelTuning(), tmp_path)
    assert [record.levelno for record in caplog.records] == [logging.DEBUG]
    assert paths["read_ahead_kb"].read_text() == "128\n"


def test_fusectl_is_left_alone_where_the_connections_directory_is_not_empty(
    tmp_path: Path,
) -> None:
    fake_sysfs(tmp_path)  # connections/57 exists: nothing to mount
    assert kernel_tuning.ensure_fusectl(tmp_path) is False


def test_fusectl_is_not_mounted_without_the_connections_directory(tmp_path: Path) -> None:
    assert kernel_tuning.ensure_fusectl(tmp_path) is False
