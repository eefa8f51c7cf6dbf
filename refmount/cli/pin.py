"""``refmount pin REFS > pins.json``: the version of every target of a set (ETag, else the
modification time, and the size), as a mount would pin it at first use, for ``--pins``.

The set is loaded and checked as ``refmount check`` does (every chunk row of a Parquet set
is read, to find every target), then each target is asked, a few at a time, with a progress
bar on stderr. The pins file goes to stdout. A target that cannot be asked is named on stderr
and left out of the file, and the exit status is 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from refmount.cli.check import (
    LOADING_EPILOG,
    LOADING_FLAGS,
    LOADING_OPTIONS,
    build_check_parser,
    load_summary,
)
from refmount.cli.status import EXIT_BAD_INPUT, EXIT_OK
from refmount.ops.logs import ProgressReporter

PIN_DESCRIPTION = """\
Record the version of every target of a reference set (its ETag, else its modification time,
and its size) as a mount would pin it at first use, and print it as JSON. Mounts given the
file with --pins FILE (-o pins=FILE) serve those versions or fail, on every node alike.
"""

SHOWN_FROM = 100
"""The progress bar shows from this many targets on (or once asking takes a second)."""

PROBLEMS_SHOWN = 20
"""How many problems are printed on stderr before the rest are only counted."""


def build_pin_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``refmount pin``: ``refmount check``'s loading options."""
    loading = build_check_parser()
    parser = argparse.ArgumentParser(
        prog="refmount pin",
        description=PIN_DESCRIPTION,
        epilog=LOADING_EPILOG + "\nexit status: 0 every target pinned, 2 the set is malformed "
        "or a target could not be asked (or bad arguments).\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for action in loading._actions:
        if action.dest in LOADING_FLAGS:
            parser._add_action(action)
    parser.set_defaults(cache_size=None)
    return parser


def pin_main(argv: Sequence[str]) -> int:
    """Run ``refmount pin``; return 0 when every target is pinned, else 2."""
    args = build_pin_parser().parse_args(argv)
    checked = load_summary(args, LOADING_OPTIONS)
    if isinstance(checked, int):
        return checked
    summary, store = checked
    import trio

    from refmount import check
    from refmount.store.pin_file import dumps_pins

    problems = list(summary.problems)
    if summary.malformed:
        _tell(problems)
        return EXIT_BAD_INPUT
    progress = ProgressReporter(
        args.refs, sys.stderr, unit="targets", verb="pinning", min_total=SHOWN_FROM
    )
    versions = trio.run(check.record_versions, summary, store.version, progress)
    sys.stdout.write(dumps_pins(summary.source, versions))
    failed = summary.problems[len(problems) :]
    _tell(failed)
    return EXIT_OK if not failed else EXIT_BAD_INPUT


def _tell(problems: Sequence[object]) -> None:
    """Print problems on stderr, at most ``PROBLEMS_SHOWN`` of them and a count of the rest."""
    for problem in problems[:PROBLEMS_SHOWN]:
        print(f"refmount pin: {problem}", file=sys.stderr)
    if len(problems) > PROBLEMS_SHOWN:
        print(f"refmount pin: and {len(problems) - PROBLEMS_SHOWN} more", file=sys.stderr)
