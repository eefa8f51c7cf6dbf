"""The background launcher: the daemon child's command line."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from refmount.cli import background


def test_the_background_child_gets_foreground_first(monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []

    class Child:
        def __init__(self, command: list[str], **kwargs: Any) -> None:
            commands.append(command)  # the pipe's write end is closed by the parent: EOF

        def wait(self) -> int:
            return 2

    monkeypatch.setattr(subprocess, "Popen", Child)
    assert background.run_in_background(["--", "check", "/mnt/x"]) == 2
    assert commands[0][1:] == ["-P", "-m", "refmount", "--foreground", "--", "check", "/mnt/x"]
