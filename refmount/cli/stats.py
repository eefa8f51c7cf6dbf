"""``refmount stats MOUNTPOINT``: the counters and latencies of a mounted refmount, read from
its ``.refmount-stats`` file and shown as tables, JSON or Prometheus' text format."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refmount.cli.status import EXIT_FAILURE, EXIT_OK
from refmount.errors import RefmountError

STATS_DESCRIPTION = """\
Show the counters and latencies of a mounted refmount: requests, errors and latency
percentiles per FUSE operation, reads, bytes served, target fetches, cache hits, retries.
They are read from the file .refmount-stats in the mount's root (a JSON snapshot taken
when it is opened; the file is not listed), so no network port is involved:
cat MOUNTPOINT/.refmount-stats shows the same. --format prometheus prints Prometheus' text
exposition format (counters, and a latency histogram per operation), for node_exporter's
textfile collector, e.g. every minute from cron or a systemd timer:
  refmount stats --format prometheus /mnt/data > /var/lib/node_exporter/refmount.prom.tmp
  mv /var/lib/node_exporter/refmount.prom.tmp /var/lib/node_exporter/refmount.prom
exit status: 0 shown, 1 MOUNTPOINT is not a refmount mount.
"""

STATS_FORMATS = ("text", "json", "prometheus")


class StatsUnavailable(RefmountError):
    """``MOUNTPOINT`` has no statistics to show; the message says why."""


def read_snapshot(mountpoint: Path) -> dict[str, Any]:
    """Return the statistics snapshot of the refmount mounted on ``mountpoint`` (what
    ``refmount stats --json`` prints); raise ``StatsUnavailable`` explaining why not."""
    from refmount.fuse.stats import STATS_FILE

    try:
        raw = (mountpoint / STATS_FILE).read_bytes()
        snapshot = json.loads(raw)
        if not isinstance(snapshot, dict) or "operations" not in snapshot:
            raise ValueError(
                f"{STATS_FILE} is not refmount's statistics (the reference set has a key "
                "of that name, which hides them)"
            )
    except OSError as error:
        raise StatsUnavailable(_stats_problem(mountpoint, error)) from None
    except ValueError as error:
        raise StatsUnavailable(f"{mountpoint}: unreadable statistics: {error}") from None
    return snapshot


def stats_main(argv: Sequence[str]) -> int:
    """Run ``refmount stats``; return 0, or 1 when MOUNTPOINT is not a refmount mount."""
    from refmount.fuse.stats import format_snapshot, prometheus_text

    parser = argparse.ArgumentParser(
        prog="refmount stats",
        description=STATS_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("mountpoint", metavar="MOUNTPOINT", type=Path, help="a refmount mount")
    parser.add_argument(
        "--format",
        choices=STATS_FORMATS,
        default="text",
        help="text (default): tables; json: the snapshot; prometheus: the text exposition "
        "format, every sample labelled with the mountpoint",
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="--format json"
    )
    args = parser.parse_args(argv)
    mountpoint: Path = args.mountpoint
    try:
        snapshot = read_snapshot(mountpoint)
    except StatsUnavailable as error:
        print(f"refmount: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    if args.format == "json":
        print(json.dumps(snapshot, indent=2))
    elif args.format == "prometheus":
        labels = {"mountpoint": os.path.abspath(mountpoint)}
        sys.stdout.write(prometheus_text(snapshot, labels))
    else:
        print(format_snapshot(snapshot))
    return EXIT_OK


def _stats_problem(mountpoint: Path, error: OSError) -> str:
    """Explain why ``mountpoint`` has no statistics to show."""
    from refmount.fuse.stats import STATS_FILE

    if error.errno == errno.ENOTCONN:
        return (
            f"{mountpoint} is a stale FUSE mount (Transport endpoint is not connected): "
            "its daemon is gone"
        )
    if not mountpoint.exists():
        return f"{mountpoint} does not exist"
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        if not os.path.ismount(mountpoint):
            return (
                f"{mountpoint} is not a refmount mount (not a mountpoint; give the "
                "directory the set is mounted on)"
            )
        return f"{mountpoint} is not a refmount mount (it has no {STATS_FILE} file)"
    return f"{mountpoint}: {error.strerror or error}"
