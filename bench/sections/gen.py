"""The gen section: memory and time per ``gen`` key, measured by ``scripts/gen_cost.py`` in a
fresh process at 10^7 keys by plain substitution and 10^6 with jinja (scaled)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

from bench.common import ROOT
from bench.goals import Row, absolute
from bench.section import Context, Section
from bench.tools import Tool

GEN_COST = ROOT / "scripts" / "gen_cost.py"
MODES = ("substitution", "jinja")


@dataclass
class GenFigures:
    """``gen_cost.py``'s figures per mode (its JSON object, kept whole)."""

    modes: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """``{mode: figures}``."""
        return dict(self.modes)


def run(context: Context) -> GenFigures:
    """Run ``gen_cost.py`` for each mode (jinja with a tenth of the keys: it takes a minute a
    million)."""
    keys = max(1000, int(10_000_000 * context.options.scale) // 1000 * 1000)
    result = GenFigures()
    for mode, count, extra in (("substitution", keys, []), ("jinja", keys // 10, ["--jinja"])):
        output = subprocess.run(
            [sys.executable, str(GEN_COST), str(max(1000, count)), "--json", *extra],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        result.modes[mode] = json.loads(output)
    return result


def rows(gen: GenFigures) -> list[Row]:
    """RSS per key (goal ≤ 48 B) and load time, per mode."""
    out = []
    for mode in MODES:
        found = gen.modes.get(mode)
        if found is None:
            continue
        keys = int(found["keys"])
        per_key = {Tool.REFMOUNT: found["bytes_per_key_after"]}
        out.append(
            Row(
                f"gen {keys} keys ({mode}): RSS per key",
                "B",
                per_key,
                False,
                "≤ 48 B",
                absolute(lambda v: v <= 48),
            )
        )
        out.append(
            Row(f"gen {keys} keys ({mode}): load", "s", {Tool.REFMOUNT: found["seconds"]}, False)
        )
    return out


SECTION = Section("gen", run, rows)
