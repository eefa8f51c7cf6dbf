"""The table's rows and the arithmetic of their goals: how many times better refmount is than
each baseline, and whether a row meets its goal (and whether the pyfuse3 floor would)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bench.figures import Cell, number
from bench.tools import BASELINES, Tool

Ratios = Mapping[Tool, float | None]
Check = Callable[[Ratios, float | None], bool | None]
"""A goal: given the ratios to each baseline and the row's own value, met (True), missed
(False) or unknown (None, a figure it needs is missing)."""


def ratios_of(
    values: Mapping[Tool, Cell], tool: Tool, higher_is_better: bool
) -> dict[Tool, float | None]:
    """How many times better ``tool``'s value is than each baseline's (None where unknown):
    the rate ratio when higher is better, the inverse for times and memory."""
    mine = number(values.get(tool))
    ratios: dict[Tool, float | None] = {}
    for baseline in BASELINES:
        other = number(values.get(baseline))
        if mine is None or other is None or mine == 0 or other == 0:
            ratios[baseline] = None
        else:
            ratios[baseline] = mine / other if higher_is_better else other / mine
    return ratios


def at_least(tool: Tool, factor: float) -> Check:
    """The goal "at least ``factor`` times better than ``tool``"."""

    def check(ratios: Ratios, value: float | None) -> bool | None:
        ratio = ratios.get(tool)
        return None if ratio is None else ratio >= factor

    return check


def all_of(*checks: Check) -> Check:
    """Every goal of ``checks``: missed if one is, unknown if one is and none is missed."""

    def check(ratios: Ratios, value: float | None) -> bool | None:
        results = [c(ratios, value) for c in checks]
        if any(r is False for r in results):
            return False
        return None if any(r is None for r in results) else True

    return check


def absolute(predicate: Callable[[float], bool]) -> Check:
    """A goal on the row's own value (refmount's), whatever the baselines measured."""

    def check(ratios: Ratios, value: float | None) -> bool | None:
        return None if value is None else predicate(value)

    return check


@dataclass
class Row:
    """One line of the table: a figure, its values per tool and the goal."""

    figure: str
    unit: str
    values: Mapping[Tool, Cell]
    higher_is_better: bool
    goal: str = ""
    check: Check | None = None
    ratios: dict[Tool, float | None] = field(default_factory=dict)
    met: bool | None = None
    floor_met: bool | None = None
    """The goal applied to the pyfuse3 floor's figure: False means no pyfuse3 daemon meets it
    on this machine (the floor does less work per read than any can)."""

    def compute(self) -> None:
        """Fill in the ratios and whether refmount (and the floor) meet the goal."""
        self.ratios = ratios_of(self.values, Tool.REFMOUNT, self.higher_is_better)
        if self.check is None:
            return
        self.met = self.check(self.ratios, number(self.values.get(Tool.REFMOUNT)))
        floor = number(self.values.get(Tool.FLOOR))
        if floor is not None:
            floor_ratios = ratios_of(self.values, Tool.FLOOR, self.higher_is_better)
            self.floor_met = self.check(floor_ratios, floor)

    def to_json(self) -> dict[str, object]:
        """The row as the JSON's "table" has it."""
        return {
            "figure": self.figure,
            "unit": self.unit,
            "values": dict(self.values),
            "ratios": dict(self.ratios),
            "goal": self.goal,
            "met": self.met,
            "floor_met": self.floor_met,
        }
