"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def mount_dir(tmp_path: Path) -> Path:
    """Return an empty directory to mount on."""
    path = tmp_path / "mnt"
    path.mkdir()
    return path
