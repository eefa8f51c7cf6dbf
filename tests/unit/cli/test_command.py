"""``main``: the first argument selects a subcommand; anything else is a mount."""

from __future__ import annotations

from typing import Any

import pytest

from refmount.cli import command
from refmount.cli.command import main


def test_first_argument_selects_a_subcommand(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[str]]] = []

    def recorder(name: str) -> Any:
        def run(argv: list[str]) -> int:
            calls.append((name, argv))
            return 0

        return run

    monkeypatch.setattr(command, "check_main", recorder("check"))
    monkeypatch.setattr(command, "stats_main", recorder("stats"))
    assert main(["check", "refs.json", "--quick"]) == 0
    assert main(["stats", "/mnt/data"]) == 0
    assert calls == [("check", ["refs.json", "--quick"]), ("stats", ["/mnt/data"])]
