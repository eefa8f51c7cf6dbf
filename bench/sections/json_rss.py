"""The json section: memory with a JSON set of a million references (at full scale), refmount's
daemon against fsspec in a process of its own, each alone."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from dataclasses import dataclass

from bench.common import MIB
from bench.datasets import make_json_refs
from bench.goals import Row, at_least
from bench.section import Context, Section
from bench.sections.reads import local_target
from bench.tools import Tool

CHILD_RSS = """
import json, sys
import fsspec
fs = fsspec.filesystem("reference", fo=sys.argv[1], remote_protocol="file")
assert len(fs.cat(sys.argv[2])) > 0
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({k: int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}))
"""
"""fsspec opening a reference set and reading one key in a fresh process: its VmHWM."""


@dataclass
class JsonFigures:
    """Ready and peak RSS of each party (field names are the JSON's keys)."""

    references: int
    json_mib: float
    refmount_ready_s: float = 0.0
    refmount_vmhwm_mib: float | None = None
    fsspec_open_and_cat_s: float = 0.0
    fsspec_vmhwm_mib: float = 0.0

    def to_json(self) -> dict[str, object]:
        """Every field by name."""
        return dataclasses.asdict(self)


def run(context: Context) -> JsonFigures:
    """Write the set, mount it and read one key; then fsspec the same in a child process."""
    references = max(100, int(1_000_000 * context.options.scale))
    path = context.workdir / "json-1m.json"
    make_json_refs(path, references, context.data.many_file)
    result = JsonFigures(references, path.stat().st_size / MIB)
    target = local_target(context.data)
    target.raw_reader.close()
    with target.refmount(context.workdir, path) as mount:
        result.refmount_ready_s = mount.ready_seconds
        (mount.path / "v" / "0").read_bytes()
        result.refmount_vmhwm_mib = mount.rss().get("VmHWM")
    started = time.perf_counter()
    output = subprocess.run(
        [sys.executable, "-c", CHILD_RSS, str(path), "v/0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result.fsspec_open_and_cat_s = time.perf_counter() - started
    result.fsspec_vmhwm_mib = json.loads(output)["VmHWM"]
    return result


def rows(figures: JsonFigures) -> list[Row]:
    """Ready and peak RSS against fsspec's."""
    title = f"JSON {figures.references} refs"
    ready = {Tool.REFMOUNT: figures.refmount_ready_s, Tool.CAT: figures.fsspec_open_and_cat_s}
    rss = {Tool.REFMOUNT: figures.refmount_vmhwm_mib, Tool.CAT: figures.fsspec_vmhwm_mib}
    return [
        Row(f"{title}: ready", "s", ready, False),
        Row(f"{title}: peak RSS", "MiB", rss, False, "< ½ fsspec's", at_least(Tool.CAT, 2.0)),
    ]


SECTION = Section("json", run, rows)
