"""``refmount check REFS``: its parser, and ``check_main``, which loads a reference set as a
mount would and prints the summary of ``refmount.check`` (the library this command calls)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

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

CHECK_DESCRIPTION = """\
Validate a reference set without mounting it: load it as a mount would, but collect every
problem (each with its key) instead of stopping at the first, and summarise the set: keys,
arrays (shape, chunks, dtype), targets and the bytes referenced.
"""

CHECK_EPILOG = """\
-o accepts the mount's options; those that concern reading REFS and its targets apply
(remote_protocol, remote_options, target_options, target, s3_endpoint_url, s3_region,
s3_anon, s3_requester_pays), and decode, cache_size and netcdf; the others are ignored.

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
        "netcdf",
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
        "--netcdf",
        action="store_true",
        help="list the arrays a --netcdf file would leave out, and why (of the decoded view "
        "with --decode), and the dimensions it would rename",
    )
    return parser


def check_main(argv: Sequence[str]) -> int:
    """Run ``refmount check``; return 0 for a clean set, 2 for problems or bad arguments."""
    parser = build_check_parser()
    args = parser.parse_args(argv)
    try:
        words = take_options(args, _CHECK_OPTIONS)
        check_values(args, words.s3)
        target_options = json_object("--target-options", args.target_options)
        remote_options = json_object("--remote-options", args.remote_options)
        cap = max_refs_size(args.max_refs_size) or default_max_refs_size()
        cache_size = parse_size(args.cache_size) if args.cache_size else ReadConfig().cache_size
    except ValueError as error:
        usage_error(str(error))
    setup_logging("warning", journald="JOURNAL_STREAM" in os.environ)
    import trio  # the heavy imports, only once the arguments are good

    from refmount import check
    from refmount.formats import LoadOptions
    from refmount.store.options import StorageOptions
    from refmount.store.sources import FsspecSource
    from refmount.store.store import Store

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
    try:
        with out_of_memory_is_bad_input(refs, describe_limit):
            summary = check.check_references(
                source,
                options,
                quick=args.quick,
                scan_progress=ProgressReporter(
                    refs, sys.stderr, unit="chunk rows", verb="scanning"
                ),
                decode_cache=cache_size if args.decode else None,
                netcdf_cache=cache_size if args.netcdf else None,
            )
    except ReferenceFormatError as error:
        print(f"refmount: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.sizes and not summary.malformed:
        trio.run(check.ask_sizes, summary, Store(StorageOptions(remote_options, s3)).size)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(check.format_summary(summary))
    return EXIT_OK if summary.ok else EXIT_BAD_INPUT
