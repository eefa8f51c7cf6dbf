"""Measure what one ``gen`` key costs to load: seconds, and RSS bytes per key after and at peak.

Usage: ``.venv/bin/python scripts/gen_cost.py [KEYS] [--jinja]``. It writes a Version 1 file
with one ``gen`` item of KEYS keys (``var/{{i}}.{{j}}``, one URL, ranges of 4096 bytes) to a
temporary directory, loads it and builds the tree as a mount does, and prints one line.
``--jinja`` renders each offset with an expression (``{{ (i * 1000 + j) * 4096 }}``), which
takes jinja's path instead of plain substitution. ``--json`` prints the figures as one JSON
object instead (the benchmark's gen section, ``bench/sections/gen.py``, reads it).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from refmount.formats import LoadOptions, load
from refmount.namespace.tree import Tree
from refmount.store.sources import FsspecSource


def resident_kib() -> int:
    """Return the process's resident set size now, in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def gen_document(keys: int, jinja: bool) -> dict[str, object]:
    """Return a Version 1 document whose one ``gen`` item makes ``keys`` keys (a multiple of
    1000)."""
    offset = "{{ (i * 1000 + j) * 4096 }}" if jinja else "{{j}}"
    item = {
        "key": "var/{{i}}.{{j}}",
        "url": "{{u}}",
        "offset": offset,
        "length": "4096",
        "dimensions": {"i": {"stop": max(1, keys // 1000)}, "j": {"stop": 1000}},
    }
    return {"version": 1, "templates": {"u": "s3://bucket/data/file.nc"}, "gen": [item]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keys", type=int, nargs="?", default=1_000_000)
    parser.add_argument("--jinja", action="store_true", help="render offsets with jinja")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "gen.json"
        path.write_text(json.dumps(gen_document(args.keys, args.jinja)))
        before = resident_kib()
        started = time.perf_counter()
        references = load(FsspecSource(str(path)), LoadOptions())
        tree = Tree.build(references.keys(), references.grids, source=str(path))
        seconds = time.perf_counter() - started
        after = resident_kib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    count = len(references)
    if args.json:
        figures = {
            "keys": count,
            "jinja": args.jinja,
            "seconds": seconds,
            "bytes_per_key_after": (after - before) * 1024 / count,
            "bytes_per_key_peak": (peak - before) * 1024 / count,
            "static_nodes": tree.static_count,
        }
        print(json.dumps(figures))
        return 0
    print(
        f"{count} gen keys ({'jinja' if args.jinja else 'substitution'}): {seconds:.1f} s, "
        f"{(after - before) * 1024 / count:.0f} B/key resident after load and tree, "
        f"{(peak - before) * 1024 / count:.0f} B/key at peak ({tree.static_count} nodes)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
