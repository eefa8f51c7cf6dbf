"""``refmount check REFS``: its parser, and ``check_main``, which loads a reference set as a
mount would and prints the summary of ``refmount.check`` (the library this command calls)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from refmount.cli.options import (
    absolute,
    check_values,
    json_object,
    max_refs_size,
    s3_options,
    take_options,
)
from refmount.cli.status import EXIT_BAD_INPUT, EXIT_OK, usage_error
from refmount.config import ReadConfig, parse_size
from refmount.errors import ReferenceFormatError, out_of_memory_is_bad_input
from refmount.ops.logs import ProgressReporter, setup_logging
from refmount.ops.memory import default_max_refs_size, describe_limit

if TYPE_CHECKING:
    from refmount.check import Summary
    from refmount.formats import LoadOptions
    from refmount.model import ReferenceSource
    from refmount.store.options import StorageOptions
    from refmount.store.store import Store

CHECK_DESCRIPTION = """\
Validate a reference set without mounting it: load it as a mount would, but collect every
problem (each with its key) instead of stopping at the first, and summarise the set: keys,
arrays (shape, chunks, dtype), targets and the bytes referenced.
"""

CHECK_EPILOG = """\
-o accepts the mount's options; those that concern reading REFS and its targets apply
(remote_protocol, remote_options, target_options, target, s3_endpoint_url, s3_region,
s3_anon, s3_requester_pays), and decode and cache_size; the others are ignored.

exit status: 0 no problems, 2 the set is malformed or has problems (or bad arguments).
"""

_CHECK_OPTIONS = frozenset(
    {
        "remote_protocol",
        "remote_options",
        "target_options",
        "target",
        "max_refs_size",
        "decode",
        "cache_size",
    }
)
"""The mount's ``-o`` options that ``refmount check`` applies (besides the S3 shortcuts)."""


def build_check_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``refmount check``."""
    parser = argparse.ArgumentParser(
        prog="refmount check",
        description=CHECK_DESCRIPTION,
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("refs", metavar="REFS", help="reference file, directory or URL")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="do not read the record files of a Parquet set (chunks are not counted)",
    )
    parser.add_argument(
        "--sizes",
        action="store_true",
        help="ask every target for its size: sizes whole-target references and finds "
        "ranges that end beyond their target",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT...]")
    parser.add_argument("--remote-protocol", metavar="P", help="as for mounting")
    parser.add_argument("--remote-options", metavar="JSON", help="as for mounting (--sizes)")
    parser.add_argument("--target-options", metavar="JSON", help="as for mounting")
    parser.add_argument("--target", metavar="URL", help="as for mounting")
    parser.add_argument("--max-refs-size", metavar="SIZE", help="as for mounting")
    parser.add_argument(
        "--decode",
        action="store_true",
        help="list the arrays a --decode mount would serve as stored, and why",
    )
    parser.add_argument(
        "--cache-size", metavar="SIZE", help="as for mounting (--decode: its quarter rule)"
    )
    parser.add_argument(
        "--pins",
        metavar="FILE",
        help="ask every target for its version and report each that differs from the one "
        "FILE records (refmount pin wrote it)",
    )
    return parser


def check_main(argv: Sequence[str]) -> int:
    """Run ``refmount check``; return 0 for a clean set, 2 for problems or bad arguments."""
    args = build_check_parser().parse_args(argv)
    checked = load_summary(args, quick=args.quick, decode=args.decode)
    if isinstance(checked, int):
        return checked
    summary, store = checked
    import trio

    from refmount import check

    if args.sizes and not summary.malformed:
        trio.run(check.ask_sizes, summary, store.size)
    if args.pins is not None and not summary.malformed:
        from refmount.store.pin_file import read_pins

        try:
            recorded = read_pins(absolute(args.pins))
        except ReferenceFormatError as error:
            print(f"refmount: error: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        progress = ProgressReporter(args.refs, sys.stderr, unit="targets", verb="asking")
        trio.run(check.compare_with_pins, summary, recorded, args.pins, store.version, progress)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(check.format_summary(summary))
    return EXIT_OK if summary.ok else EXIT_BAD_INPUT


@dataclass(frozen=True, slots=True)
class OpenedSet:
    """A set named on the command line, opened but not read: its source, how to load it,
    the storage options of its targets and the memory cache size the options give."""

    source: ReferenceSource
    options: LoadOptions
    targets: StorageOptions
    cache_size: int


def open_set(args: argparse.Namespace, names: Collection[str] = _CHECK_OPTIONS) -> OpenedSet | int:
    """Open the set that ``args`` (from ``build_check_parser``, ``-o`` options of ``names``)
    name; return it, or the exit status when it cannot be opened (bad arguments exit)."""
    try:
        words = take_options(args, names)
        check_values(args, words.s3)
        target_options = json_object("--target-options", args.target_options)
        remote_options = json_object("--remote-options", args.remote_options)
        cap = max_refs_size(args.max_refs_size) or default_max_refs_size()
        cache_size = parse_size(args.cache_size) if args.cache_size else ReadConfig().cache_size
    except ValueError as error:
        usage_error(str(error))
    setup_logging("warning", journald="JOURNAL_STREAM" in os.environ)
    # the heavy imports, only once the arguments are good
    from refmount.formats import LoadOptions
    from refmount.store.options import StorageOptions
    from refmount.store.sources import FsspecSource

    refs = absolute(args.refs)
    s3 = s3_options(words.s3)
    try:
        source = FsspecSource(refs, StorageOptions(target_options, s3), cap)
    except (OSError, ValueError, ImportError) as error:
        print(f"refmount: error: {refs}: cannot open: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = LoadOptions(
        target=None if args.target is None else absolute(args.target),
        remote_protocol=args.remote_protocol,
        progress=ProgressReporter(refs, sys.stderr),
        max_size=cap,
    )
    return OpenedSet(source, options, StorageOptions(remote_options, s3), cache_size)


def load_summary(
    args: argparse.Namespace, *, quick: bool = False, decode: bool = False
) -> tuple[Summary, Store] | int:
    """Check the set that ``args`` (from ``build_check_parser``) name; return its summary and
    a store for its targets, or the exit status when it could not be loaded at all."""
    opened = open_set(args)
    if isinstance(opened, int):
        return opened
    from refmount import check
    from refmount.store.store import Store

    refs = opened.source.url
    try:
        with out_of_memory_is_bad_input(refs, describe_limit):
            summary = check.check_references(
                opened.source,
                opened.options,
                quick=quick,
                scan_progress=ProgressReporter(
                    refs, sys.stderr, unit="chunk rows", verb="scanning"
                ),
                decode_cache=opened.cache_size if decode else None,
            )
    except ReferenceFormatError as error:
        print(f"refmount: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return summary, Store(opened.targets)
