"""``refmount stats`` on directories that are not refmount mounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from refmount.cli.command import main


def test_stats_on_a_directory_that_is_not_a_mount(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", str(tmp_path)]) == 1
    assert "is not a refmount mount" in capsys.readouterr().err
    assert main(["stats", str(tmp_path / "absent")]) == 1
    assert "does not exist" in capsys.readouterr().err
