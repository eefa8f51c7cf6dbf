"""``refmount cache warm|clear``: filling the disk cache for a set without mounting it, and
emptying a disk cache directory (safely while mounts use it).

``warm`` loads the set as ``refmount check`` does and reads every reference under the key
prefixes given (every one if none) through a store with the disk cache, as a mount would
(the same engines, pins and limits; 16 references at a time, a progress bar on stderr).
``clear`` removes every entry: a mount reading an entry removed under it keeps its open
file until it next writes, then starts a new one.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from refmount.cli.check import (
    LOADING_EPILOG,
    LOADING_FLAGS,
    LOADING_OPTIONS,
    build_check_parser,
    open_set,
)
from refmount.cli.options import absolute
from refmount.cli.status import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, usage_error
from refmount.config import parse_size
from refmount.errors import ReferenceFormatError, out_of_memory_is_bad_input
from refmount.ops.logs import ProgressReporter
from refmount.ops.memory import describe_limit

CACHE_DESCRIPTION = """\
Fill a disk cache for a reference set without mounting it (warm), or empty one (clear).
"""

SHOWN_FROM = 100
"""The progress bar shows from this many references on (or once reading takes a second)."""

FAILURES_SHOWN = 20
"""How many failed references are named on stderr before the rest are only counted."""


def build_cache_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``refmount cache``."""
    parser = argparse.ArgumentParser(prog="refmount cache", description=CACHE_DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, metavar="{warm,clear}")
    warm = commands.add_parser(
        "warm",
        help="read every reference of REFS under the KEY_PREFIXes into --cache-dir",
        description="Read every reference of REFS whose key starts with one of the "
        "KEY_PREFIXes (every reference if none) into the disk cache, as a mount with "
        "--cache-dir would, so later mounts on this host fetch nothing.",
        epilog=LOADING_EPILOG + "\nexit status: 0 every reference read, 2 the set is "
        "malformed or a reference could not be read (or bad arguments).\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for action in build_check_parser()._actions:
        if action.dest in LOADING_FLAGS and action.dest != "refs":
            warm._add_action(action)
    warm.add_argument("refs", metavar="REFS", help="reference file, directory or URL")
    warm.add_argument("prefixes", metavar="KEY_PREFIX", nargs="*", help="e.g. temp/ or time")
    warm.add_argument("--cache-dir", metavar="DIR", help="the disk cache (as for mounting)")
    warm.add_argument("--cache-dir-size", metavar="SIZE", help="as for mounting")
    warm.set_defaults(cache_size=None)
    clear = commands.add_parser(
        "clear", help="remove every entry of a disk cache directory (mounts may use it)"
    )
    clear.add_argument("directory", metavar="DIR")
    return parser


def cache_main(argv: Sequence[str]) -> int:
    """Run ``refmount cache``; return its exit status."""
    args = build_cache_parser().parse_args(argv)
    if args.command == "clear":
        return _clear(absolute(args.directory))
    return _warm(args)


def _clear(directory: str) -> int:
    from refmount.store.disk_cache import clear, open_directory

    try:
        descriptor = open_directory(directory, create=False)
    except OSError as error:
        print(f"refmount: error: {error.strerror or error}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        removed, freed = clear(descriptor)
    finally:
        os.close(descriptor)
    print(f"removed {removed} cached targets, {freed:,} bytes")
    return EXIT_OK


def _warm(args: argparse.Namespace) -> int:
    opened = open_set(args, LOADING_OPTIONS)
    if isinstance(opened, int):
        return opened
    if opened.repository:
        print(
            f"refmount: error: {opened.source.url}: an Icechunk repository's chunks are "
            "read through Icechunk, which the disk cache does not hold yet",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if args.cache_dir is None:
        usage_error("refmount cache warm needs --cache-dir DIR")
    try:
        size = None if args.cache_dir_size is None else parse_size(args.cache_dir_size)
    except ValueError as error:
        usage_error(str(error))
    import trio

    from refmount.check.warm import references_under, warm
    from refmount.formats import load
    from refmount.store.disk_cache import DiskCache, default_size
    from refmount.store.store import Store

    refs = opened.source.url
    try:
        with out_of_memory_is_bad_input(refs, describe_limit):
            references = load(opened.source, opened.options)
    except ReferenceFormatError as error:
        print(f"refmount: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    directory = absolute(args.cache_dir)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        disk = DiskCache(directory, size or default_size(directory), trio.CapacityLimiter(8))
    except OSError as error:
        print(f"refmount: error: --cache-dir: {error.strerror or error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    store = Store(opened.targets, pin=True, disk=disk)
    progress = ProgressReporter(
        refs, sys.stderr, unit="references", verb="warming", min_total=SHOWN_FROM
    )
    found = references_under(references, args.prefixes)
    try:
        result = trio.run(warm, found, store.read_range, store.size, progress)
    finally:
        store.close()
    figures = disk.statistics()
    for key, problem in result.failures[:FAILURES_SHOWN]:
        print(f"refmount cache warm: key {key!r}: {problem}", file=sys.stderr)
    if len(result.failures) > FAILURES_SHOWN:
        print(
            f"refmount cache warm: and {len(result.failures) - FAILURES_SHOWN} more",
            file=sys.stderr,
        )
    print(
        f"{result.references:,} references, {result.bytes:,} bytes: "
        f"{figures.bytes_written:,} bytes fetched into {directory}, "
        f"{figures.bytes_read:,} already there"
    )
    return EXIT_OK if not result.failures else EXIT_BAD_INPUT
