"""``refmount check REFS``: its parser, and ``check_main``, which loads a reference set as a
mount would and prints the summary of ``refmount.check`` (the library this command calls)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from refmount.cli.options import (
    absolute,
    check_values,
    format_choice,
    json_object,
    max_refs_size,
    s3_options,
    take_options,
    zarr_format,
)
from refmount.cli.status import EXIT_BAD_INPUT, EXIT_OK, usage_error
from refmount.config import REPOSITORY_ONLY, ReadConfig, RepositoryVersion, parse_size
from refmount.errors import ReferenceFormatError, out_of_memory_is_bad_input
from refmount.ops.logs import ProgressReporter, setup_logging
from refmount.ops.memory import default_max_refs_size, describe_limit

if TYPE_CHECKING:
    from refmount.check import Summary

CHECK_DESCRIPTION = """\
Validate a reference set without mounting it: load it as a mount would, but collect every
problem (each with its key) instead of stopping at the first, and summarise the set: keys,
arrays (shape, chunks, dtype), targets and the bytes referenced.

For an Icechunk repository (REPO: recognised by its layout, or --format icechunk), the
snapshot that --branch (default main), --tag or --snapshot resolves to, the virtual chunk
containers the repository declares, whether --authorize-container authorizes each and how
many chunks point into it, the chunks by kind (inline, native, virtual) and the arrays.
Chunks that point into a container not authorized are a warning (a mount would answer
their reads with EACCES). --decode applies; --quick and --sizes do not (the manifests give
every chunk's size).
"""

CHECK_EPILOG = """\
-o accepts the mount's options; those that concern reading REFS and its targets apply
(remote_protocol, remote_options, target_options, target, s3_endpoint_url, s3_region,
s3_anon, s3_requester_pays), and decode, cache_size, zarr_format, format, branch, tag,
snapshot and authorize_container; the others are ignored.

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
        "zarr_format",
        "format",
        "branch",
        "tag",
        "snapshot",
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
    parser.add_argument(
        "refs", metavar="REFS", help="reference file, directory or URL, or an Icechunk repository"
    )
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
        "--zarr-format",
        metavar="{2,3}",
        help="2: list the v3 arrays a --zarr-format 2 mount would serve as stored (v3), and "
        "why (sharded arrays among them)",
    )
    parser.add_argument("--format", metavar="FORMAT", help="as for mounting")
    parser.add_argument("--branch", metavar="NAME", help="Icechunk: check the tip of this branch")
    parser.add_argument("--tag", metavar="NAME", help="Icechunk: check the snapshot of this tag")
    parser.add_argument("--snapshot", metavar="ID", help="Icechunk: check this snapshot")
    parser.add_argument(
        "--authorize-container",
        metavar="PREFIX",
        action="append",
        help="Icechunk: as for mounting; check says which containers it authorizes",
    )
    return parser


def check_main(argv: Sequence[str]) -> int:
    """Run ``refmount check``; return 0 for a clean set, 2 for problems or bad arguments."""
    parser = build_check_parser()
    args = parser.parse_args(argv)
    try:
        words = take_options(args, _CHECK_OPTIONS | {"authorize_container"})
        check_values(args, words.s3)
        format_name = format_choice(args.format)
        version = RepositoryVersion(args.branch, args.tag, args.snapshot)
        authorize = tuple((args.authorize_container or []) + words.containers)
        target_options = json_object("--target-options", args.target_options)
        remote_options = json_object("--remote-options", args.remote_options)
        cap = max_refs_size(args.max_refs_size) or default_max_refs_size()
        cache_size = parse_size(args.cache_size) if args.cache_size else ReadConfig().cache_size
        view_format = zarr_format(args.zarr_format)
    except ValueError as error:
        usage_error(str(error))
    setup_logging("warning", journald="JOURNAL_STREAM" in os.environ)
    import trio  # the heavy imports, only once the arguments are good

    from refmount import check
    from refmount.formats import LoadOptions
    from refmount.formats.icechunk import DEFAULT_SHARE, FileLimit, is_repository_for
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
    if is_repository_for(format_name, source):
        storage = StorageOptions(target_options, s3).for_target(refs)
        with out_of_memory_is_bad_input(refs, describe_limit):
            share = default_max_refs_size() // DEFAULT_SHARE
            limit = FileLimit(source.size, max_refs_size(args.max_refs_size) or share)
            containers = StorageOptions(remote_options, s3).for_target
            decode_cache = cache_size if args.decode else None
            summary = check.check_repository(
                refs, version, authorize, storage, limit, containers, decode_cache
            )
        return _report(summary, as_json=args.json)
    if version.given or authorize:
        print(
            f"refmount: error: {refs}: {REPOSITORY_ONLY} apply only to an Icechunk repository",
            file=sys.stderr,
        )
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
                zarr_format=view_format,
            )
    except ReferenceFormatError as error:
        print(f"refmount: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.sizes and not summary.malformed:
        trio.run(check.ask_sizes, summary, Store(StorageOptions(remote_options, s3)).size)
    return _report(summary, as_json=args.json)


def _report(summary: Summary, *, as_json: bool) -> int:
    """Print ``summary`` (as JSON if asked); return the exit status it calls for."""
    from refmount.check import format_summary

    if as_json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(format_summary(summary))
    return EXIT_OK if summary.ok else EXIT_BAD_INPUT
