"""What a section of the benchmark is: a name, a function that measures, one that turns its
figures into table rows, and the lines it adds below the table. ``bench.sections`` lists them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from bench.datasets import DataSet
from bench.goals import Row
from bench.tools import Tool


@dataclass(frozen=True)
class Options:
    """The command-line options the sections read."""

    scale: float = 1.0
    budget: float = 5.0
    rounds: int = 1
    tools: frozenset[Tool] = frozenset(Tool)
    ls_timeout: float = 60.0


@dataclass(frozen=True)
class Context:
    """What a section runs with: the generated data, a scratch directory and the options."""

    data: DataSet
    workdir: Path
    options: Options


class Result(Protocol):
    """A section's figures."""

    def to_json(self) -> dict[str, object]:
        """The figures as the benchmark's JSON output has them."""
        ...


R = TypeVar("R", bound=Result)


def no_lines(result: object) -> list[str]:
    """A section that adds nothing below the table."""
    return []


@dataclass(frozen=True)
class Section(Generic[R]):
    """One section: ``run`` measures, ``rows`` makes table rows of the figures, ``summary``
    lines come right below the table and ``notes`` at its end."""

    name: str
    run: Callable[[Context], R]
    rows: Callable[[R], list[Row]]
    summary: Callable[[R], list[str]] = field(default=no_lines)
    notes: Callable[[R], list[str]] = field(default=no_lines)
    summarise_failure: bool = False
    """Whether a failure of the whole section gets a summary line (``name: error: ...``)."""


@dataclass(frozen=True)
class SectionFailed:
    """A section that raised: why, as the JSON reports it."""

    error: str

    def to_json(self) -> dict[str, object]:
        """``{"error": ...}``."""
        return {"error": self.error}
