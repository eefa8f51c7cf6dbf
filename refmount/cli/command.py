"""The ``refmount`` command: ``main`` sends a first argument of ``cache``, ``check``,
``pin`` or ``stats`` to that subcommand, and otherwise mounts, in the background or (with
``-f``, as the background child does) here; it maps failures to exit statuses."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from refmount.cli.background import (
    LIFELINE_FD_VARIABLE,
    inherited_fd,
    readiness_reporter,
    run_in_background,
)
from refmount.cli.cache import cache_main
from refmount.cli.check import check_main
from refmount.cli.options import parse_args
from refmount.cli.pin import pin_main
from refmount.cli.stats import stats_main
from refmount.cli.status import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK
from refmount.config import STDIN_REFS
from refmount.errors import MountError, ReferenceFormatError, RefmountError
from refmount.ops.logs import ProgressReporter, setup_logging

log = logging.getLogger("refmount")

SUBCOMMANDS = ("cache", "check", "pin", "stats")
"""Words that, as the first argument, select a subcommand instead of naming REFS."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``refmount`` command; return its exit status.

    A first argument of ``cache``, ``check``, ``pin`` or ``stats`` selects that subcommand;
    anything else (including ``--`` before a reference file called ``check``) is a mount.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "check":
        return check_main(argv[1:])
    if argv and argv[0] == "cache":
        return cache_main(argv[1:])
    if argv and argv[0] == "pin":
        return pin_main(argv[1:])
    if argv and argv[0] == "stats":
        return stats_main(argv[1:])
    command = parse_args(argv)
    config = command.config
    if not config.foreground:
        return run_in_background(argv, stdin_refs=config.refs == STDIN_REFS)
    # the readiness pipe first: nothing we start may inherit it
    on_ready = readiness_reporter(command.log_file, config.mountpoint)
    lifeline = inherited_fd(LIFELINE_FD_VARIABLE)
    setup_logging(config.log_level, journald="JOURNAL_STREAM" in os.environ)
    debug = config.log_level == "debug"
    from refmount import daemon  # the heavy imports, only once the arguments are good

    problem = daemon.fuse_options_problem(daemon.fuse_options(config))
    if problem is not None:
        print(f"refmount: error: FUSE options: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    problem = daemon.cache_dir_problem(config.cache_dir)
    if problem is not None:
        print(f"refmount: error: --cache-dir: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        daemon.check_mountpoint(config.mountpoint, config.nonempty)  # cheaper than loading
        loaded = daemon.load_references(config, ProgressReporter(config.refs, sys.stderr))
        daemon.mount_and_serve(config, loaded, on_ready, command.tuning, lifeline)
    except ReferenceFormatError as error:
        _report(error, debug)
        return EXIT_BAD_INPUT
    except (MountError, RefmountError) as error:
        _report(error, debug)
        return EXIT_FAILURE
    return EXIT_OK


def _report(error: Exception, debug: bool) -> None:
    """Tell why the mount failed in one line on stderr; log the traceback too with debug."""
    if debug:
        log.error("refmount failed", exc_info=error)
    print(f"refmount: error: {error}", file=sys.stderr)
