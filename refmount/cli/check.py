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
    from refmount.formats import LoadOptions
    from refmount.store.options import StorageOptions
    from refmount.store.sources import FsspecSource
    from refmount.store.store import Store

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
s3_anon, s3_requester_pays), and decode, cache_size, zarr_format, netcdf, format, branch,
tag, snapshot and authorize_container; the others are ignored.

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
        "authorize_container",
        "netcdf",
    }
)
"""The mount's ``-o`` options that ``refmount check`` applies (besides the S3 shortcuts)."""

LOADING_OPTIONS = frozenset(
    {"remote_protocol", "remote_options", "target_options", "target", "max_refs_size"}
)
"""The ``-o`` options of the commands that only load a kerchunk set and read its targets
(``refmount pin``, ``refmount cache warm``)."""

LOADING_FLAGS = frozenset({"refs", "options", *LOADING_OPTIONS})
"""The arguments of ``refmount check`` that those commands share (by ``dest``)."""

LOADING_EPILOG = """\
-o accepts the mount's options; those that concern reading REFS and its targets apply
(remote_protocol, remote_options, target_options, target, max_refs_size, s3_endpoint_url,
s3_region, s3_anon, s3_requester_pays); the others are ignored.
"""


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
        "--pins",
        metavar="FILE",
        help="ask every target for its version and report each that differs from the one "
        "FILE records (refmount pin wrote it)",
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
    parser.add_argument(
        "--netcdf",
        action="store_true",
        help="list the arrays a --netcdf file would leave out, and why (of the decoded view "
        "with --decode), and the dimensions it would rename",
    )
    return parser


def check_main(argv: Sequence[str]) -> int:
    """Run ``refmount check``; return 0 for a clean set, 2 for problems or bad arguments."""
    args = build_check_parser().parse_args(argv)
    opened = open_set(args, _CHECK_OPTIONS)
    if isinstance(opened, int):
        return opened
    import trio

    from refmount import check

    decode_cache = opened.cache_size if args.decode else None
    if opened.repository:
        from refmount.formats.icechunk import DEFAULT_SHARE, FileLimit

        refs = opened.source.url
        with out_of_memory_is_bad_input(refs, describe_limit):
            share = default_max_refs_size() // DEFAULT_SHARE
            limit = FileLimit(opened.source.size, opened.max_refs_size or share)
            summary = check.check_repository(
                refs,
                opened.version,
                opened.authorize,
                opened.storage.for_target(refs),
                limit,
                opened.targets.for_target,
                decode_cache,
                opened.zarr_format,
            )
        return _report(summary, as_json=args.json)
    netcdf_cache = opened.cache_size if args.netcdf else None
    checked = _checked(
        opened, quick=args.quick, decode_cache=decode_cache, netcdf_cache=netcdf_cache
    )
    if isinstance(checked, int):
        return checked
    summary = checked
    from refmount.store.store import Store

    store = Store(opened.targets)
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
    return _report(summary, as_json=args.json)


@dataclass(frozen=True, slots=True)
class OpenedSet:
    """A set or repository named on the command line, opened but not read: its source, how
    to load it, the storage options of REFS (``storage``) and of its targets (``targets``),
    and what the options ask of it."""

    source: FsspecSource
    options: LoadOptions
    storage: StorageOptions
    targets: StorageOptions
    cache_size: int
    max_refs_size: int | None
    repository: bool
    version: RepositoryVersion
    authorize: tuple[str, ...]
    zarr_format: int | None


def open_set(args: argparse.Namespace, names: Collection[str]) -> OpenedSet | int:
    """Open what ``args`` (from ``build_check_parser``; ``-o`` options of ``names``) name;
    return it, or the exit status when it cannot be opened (bad arguments exit at once)."""
    try:
        words = take_options(args, names)
        check_values(args, words.s3)
        format_name = format_choice(getattr(args, "format", None))
        version = RepositoryVersion(
            getattr(args, "branch", None),
            getattr(args, "tag", None),
            getattr(args, "snapshot", None),
        )
        authorize = tuple((getattr(args, "authorize_container", None) or []) + words.containers)
        target_options = json_object("--target-options", args.target_options)
        remote_options = json_object("--remote-options", args.remote_options)
        given_cap = max_refs_size(args.max_refs_size)
        cap = given_cap or default_max_refs_size()
        cache_size = parse_size(args.cache_size) if args.cache_size else ReadConfig().cache_size
        view_format = zarr_format(getattr(args, "zarr_format", None))
    except ValueError as error:
        usage_error(str(error))
    setup_logging("warning", journald="JOURNAL_STREAM" in os.environ)
    # the heavy imports, only once the arguments are good
    from refmount.formats import LoadOptions
    from refmount.formats.icechunk import is_repository_for
    from refmount.store.options import StorageOptions
    from refmount.store.sources import FsspecSource

    refs = absolute(args.refs)
    s3 = s3_options(words.s3)
    storage = StorageOptions(target_options, s3)
    try:
        source = FsspecSource(refs, storage, cap)
    except (OSError, ValueError, ImportError) as error:
        print(f"refmount: error: {refs}: cannot open: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    repository = is_repository_for(format_name, source)
    if not repository and (version.given or authorize):
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
    return OpenedSet(
        source,
        options,
        storage,
        StorageOptions(remote_options, s3),
        cache_size,
        given_cap,
        repository,
        version,
        authorize,
        view_format,
    )


def load_summary(args: argparse.Namespace, names: Collection[str]) -> tuple[Summary, Store] | int:
    """Check the kerchunk set that ``args`` name (a repository is refused: ``refmount pin``
    and ``refmount cache`` concern kerchunk targets); return its summary and a store for its
    targets, or the exit status."""
    opened = open_set(args, names)
    if isinstance(opened, int):
        return opened
    if opened.repository:
        print(
            f"refmount: error: {opened.source.url}: an Icechunk repository checks each "
            "virtual chunk against its commit itself: there is nothing to pin",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    checked = _checked(opened, quick=False, decode_cache=None)
    if isinstance(checked, int):
        return checked
    from refmount.store.store import Store

    return checked, Store(opened.targets)


def _checked(
    opened: OpenedSet, *, quick: bool, decode_cache: int | None, netcdf_cache: int | None = None
) -> Summary | int:
    """Check the kerchunk set ``opened``; return its summary, or 2 if it cannot be loaded."""
    from refmount import check

    refs = opened.source.url
    try:
        with out_of_memory_is_bad_input(refs, describe_limit):
            return check.check_references(
                opened.source,
                opened.options,
                quick=quick,
                scan_progress=ProgressReporter(
                    refs, sys.stderr, unit="chunk rows", verb="scanning"
                ),
                decode_cache=decode_cache,
                zarr_format=opened.zarr_format,
                netcdf_cache=netcdf_cache,
            )
    except ReferenceFormatError as error:
        print(f"refmount: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _report(summary: Summary, *, as_json: bool) -> int:
    """Print ``summary`` (as JSON if asked); return the exit status it calls for."""
    from refmount.check import format_summary

    if as_json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(format_summary(summary))
    return EXIT_OK if summary.ok else EXIT_BAD_INPUT
