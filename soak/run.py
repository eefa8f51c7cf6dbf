"""One soak run: serve the targets, mount the generated set, read it under faults for the
given time while the daemon is watched, then stop everything and return what was seen."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from refmount.fuse.stats import STATS_FILE
from soak.arguments import Settings
from soak.daemon import DaemonFigures, Monitor, ProcFigures
from soak.dataset import Key, build_refs
from soak.faults import FAULTS, worst_case
from soak.mount import mounted, refmount_command
from soak.observed import Observed
from soak.readers import Readers, warm_engines
from soak.targets import Serving, serving

WARM_UP_SECONDS = 10.0
"""The longest warm-up (a quarter of the run when shorter): the fd and thread counts the
growth checks start from are taken after it."""
JOIN_SLACK_SECONDS = 30.0
"""How long after the deadline (and twice the longest request) a reader counts as blocked."""
RELEASE_SECONDS = 1.0
"""How long the daemon is given to release closed files before the end figures."""


def log_path(settings: Settings, workdir: Path) -> Path:
    """Where the daemon's log goes: ``--log``, or a file in the scratch directory."""
    return settings.log or workdir / "refmount.log"


def read_stats(mountpoint: Path) -> dict[str, Any]:
    """The mount's stats file, parsed (empty when it cannot be read)."""
    with contextlib.suppress(OSError, ValueError):
        stats: dict[str, Any] = json.loads((mountpoint / STATS_FILE).read_bytes())
        return stats
    return {}


def run(settings: Settings, workdir: Path) -> Observed:
    """Soak a mount as ``settings`` say, in ``workdir``; RuntimeError when it cannot mount."""
    bound = worst_case(settings.timeout_seconds, settings.retries)
    with serving(settings) as served:
        refs, keys = build_refs(
            served.targets, settings.keys, settings.max_key_bytes, settings.seed
        )
        refs_path = workdir / "refs.json"
        refs_path.write_text(json.dumps(refs))
        mountpoint = workdir / "mnt"
        command = refmount_command(settings, served.options, refs_path, mountpoint)
        with mounted(command, mountpoint, log_path(settings, workdir)) as process:
            observed = soak(settings, served, keys, mountpoint, process, bound)
        return dataclasses.replace(observed, exit_code=process.returncode)


def soak(
    settings: Settings,
    served: Serving,
    keys: list[Key],
    mountpoint: Path,
    process: subprocess.Popen[bytes],
    bound: float,
) -> Observed:
    """Read the mounted set under faults and watch the daemon; its exit status is left None
    (the caller has it once the daemon is unmounted)."""
    pid = process.pid
    warm_engines(mountpoint, keys)
    start = ProcFigures.of(pid)
    monitor = Monitor(pid)
    monitor.start()
    if settings.fault_share > 0:  # faults from the first read on
        for proxy in served.proxies.values():
            proxy.set_random(settings.fault_share, FAULTS)
    began = time.monotonic()
    deadline = began + settings.seconds
    readers = Readers(settings.threads, mountpoint, keys, deadline, settings.seed)
    readers.start()
    time.sleep(min(WARM_UP_SECONDS, settings.seconds / 4))
    warm = ProcFigures.of(pid)
    # every reader ends at the deadline, after its last read (itself bounded)
    hung = readers.join(deadline + 2 * bound + JOIN_SLACK_SECONDS)
    elapsed = time.monotonic() - began
    for proxy in served.proxies.values():
        proxy.clear()
    time.sleep(RELEASE_SECONDS)  # let closed files be released
    end = ProcFigures.of(pid)
    alive = process.poll() is None
    stats = read_stats(mountpoint)
    monitor.stop()
    return Observed(
        tally=readers.tally,
        proxies=served.proxies,
        keys=len(keys),
        daemon=DaemonFigures.of(start, warm, end, monitor),
        stats=stats,
        hung=hung,
        elapsed=elapsed,
        alive=alive,
        exit_code=None,
        bound=bound,
    )
