"""The ``refmount`` command line, one job per module, top to bottom:

- ``command``: ``main``, the console script's entry point: a first argument of ``check`` or
  ``stats`` selects that subcommand, anything else mounts; failures become exit statuses.
- ``check``: ``refmount check REFS``, validating a reference set without mounting it
  (it calls ``refmount.check``, the library).
- ``stats``: ``refmount stats MOUNTPOINT``, a mount's counters and latencies.
- ``background``: going into the background: the daemon child's command line, starting it and
  waiting for its readiness, and the descriptors a parent hands it.
- ``options``: ``-o`` split and sorted, every option value checked, and ``parse_args``:
  a mount's argv to a ``MountCommand``; ``check`` takes its ``-o`` and checks through it too.
- ``arguments``: the mount's flags and help (``build_parser``).
- ``status``: the exit statuses, and the one line of a refused command line.

Besides ``main``, this package gives the Python API and the Dask plugin what they build on:
the mount's parser, the launcher, the stats snapshot and the exit statuses.
"""

from refmount.cli.arguments import build_parser
from refmount.cli.background import BACKGROUND_INTERPRETER_FLAGS, launch
from refmount.cli.command import main
from refmount.cli.options import MountCommand, parse_args
from refmount.cli.stats import StatsUnavailable, read_snapshot
from refmount.cli.status import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK

__all__ = [
    "BACKGROUND_INTERPRETER_FLAGS",
    "EXIT_BAD_INPUT",
    "EXIT_FAILURE",
    "EXIT_OK",
    "MountCommand",
    "StatsUnavailable",
    "build_parser",
    "launch",
    "main",
    "parse_args",
    "read_snapshot",
]
