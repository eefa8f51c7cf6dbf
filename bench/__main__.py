"""The command line of the benchmark: ``python -m bench`` (``scripts/bench``) with its options."""

from __future__ import annotations

import argparse
from pathlib import Path

import bench
from bench.registry import NAMES
from bench.report import write_json
from bench.run import run_sections
from bench.section import Options
from bench.tools import Tool

TOOLS = tuple(tool.value for tool in Tool)


def parser() -> argparse.ArgumentParser:
    """The options and their defaults."""
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description=bench.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every data size (default 1: 512 x 1 MiB 'big', 200 000 x 4 KiB 'many',"
        " 5 M Parquet 'huge', 1 M JSON references); e.g. 0.1 for a quick run",
    )
    parser.add_argument(
        "--only",
        default=",".join(NAMES),
        help=f"comma-separated sections to run (default: all of {','.join(NAMES)})",
    )
    parser.add_argument(
        "--tools",
        default=",".join(TOOLS),
        help=f"comma-separated readers to run in the read sections (default {','.join(TOOLS)})",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=5.0,
        help="seconds each read loop may take; it reports the rate of what it did (default 5)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure the local, HTTP and S3 figures this many times, every tool in turn, and"
        " report each tool's median (default 1; 3 keeps one slow moment from deciding a row)",
    )
    parser.add_argument(
        "--ls-timeout",
        type=float,
        default=60.0,
        help="seconds an ls may take before it is recorded as unfinished (default 60)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure and ratio here")
    return parser


def parse(argv: list[str] | None = None) -> tuple[list[str], Options, Path | None]:
    """The sections to run, the options and where to write the JSON (if anywhere)."""
    command = parser()
    args = command.parse_args(argv)
    sections = [s for s in args.only.split(",") if s]
    unknown = set(sections) - set(NAMES)
    if unknown:
        command.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if args.rounds < 1:
        command.error("--rounds must be at least 1")
    tools = {t for t in args.tools.split(",") if t}
    if tools - set(TOOLS):
        command.error(f"unknown tools: {', '.join(sorted(tools - set(TOOLS)))}")
    options = Options(
        args.scale, args.budget, args.rounds, frozenset(map(Tool, tools)), args.ls_timeout
    )
    return sections, options, args.json


def main(argv: list[str] | None = None) -> None:
    """Run the sections asked for, print the table and write the JSON."""
    sections, options, json_path = parse(argv)
    run = run_sections(sections, options)
    rows = run.rows()
    print("\n".join(run.report_lines(rows)))
    if json_path is not None:
        write_json(json_path, run.to_json(rows))


if __name__ == "__main__":
    main()
