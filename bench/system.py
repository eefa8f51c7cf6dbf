"""The machine around the measurements: CPU busy share, proactive reclaim, page-cache residency
of the targets (``vmtouch``) and the fusectl mount ``-o tune_kernel`` needs."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import log
from bench.processes import stop_process

DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")
FUSECTL = Path("/sys/fs/fuse/connections")


@dataclass(frozen=True)
class CpuShare:
    """Busy share of all CPUs and the 1-minute load average at the start and end of a span."""

    cpu_busy_share: float
    loadavg_1m_start: float
    loadavg_1m_end: float


class CpuMeter:
    """Busy share of all CPUs (from /proc/stat) and load average over a span of time."""

    def __init__(self) -> None:
        self.start = self._read()
        self.load_start = os.getloadavg()[0]

    @staticmethod
    def _read() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        idle = values[3] + values[4]
        return sum(values) - idle, sum(values)

    def result(self) -> CpuShare:
        """The share and load averages since the meter was made."""
        busy, total = self._read()
        delta = max(1, total - self.start[1])
        return CpuShare(
            round((busy - self.start[0]) / delta, 3), self.load_start, os.getloadavg()[0]
        )


def other_cpu_share(seconds: float = 1.0) -> float:
    """Share of all CPUs busy while the benchmark sleeps: what other processes use."""
    meter = CpuMeter()
    time.sleep(seconds)
    return meter.result().cpu_busy_share


def _value(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return "?"


def proactive_reclaim(root: Path = DAMON) -> list[str]:
    """Describe the running DAMON schemes that reclaim memory: they drop page-cached data
    (the targets', the mount's) with memory free, so re-reads may go back to the daemon."""
    found = []
    for kdamond in sorted(root.glob("[0-9]*")):
        if _value(kdamond / "state") != "on":
            continue
        for context in sorted((kdamond / "contexts").glob("[0-9]*")):
            aggregation_us = _value(context / "monitoring_attrs" / "intervals" / "aggr_us")
            for scheme in sorted((context / "schemes").glob("[0-9]*")):
                action = _value(scheme / "action")
                if action not in {"pageout", "lru_deprio"}:
                    continue
                age = _value(scheme / "access_pattern" / "age" / "min")
                try:
                    idle = f"{int(age) * int(aggregation_us) / 1e6:g} s"
                except ValueError:
                    idle = "?"
                quotas = scheme / "quotas"
                found.append(
                    f"DAMON {action} ({_value(context / 'operations')}) of pages idle "
                    f">= {idle}, quota {_value(quotas / 'bytes')} bytes per "
                    f"{_value(quotas / 'reset_interval_ms')} ms"
                )
    return found


@dataclass
class Residency:
    """How much of the pinned targets stayed in the page cache, or why they were not pinned."""

    note: str | None = None
    at_start: float | None = None
    at_end: float | None = None
    paths: list[Path] = field(default_factory=list)


@contextlib.contextmanager
def resident(paths: list[Path]) -> Iterator[Residency]:
    """Keep ``paths`` locked in the page cache with ``vmtouch -l`` while measuring."""
    vmtouch = shutil.which("vmtouch")
    if vmtouch is None:
        yield Residency(note="vmtouch not installed: data not pinned")
        return
    found = Residency(paths=paths)
    process = subprocess.Popen(
        [vmtouch, "-l", "-q", *map(str, paths)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if residency(paths) >= 0.999:
                break
            time.sleep(0.2)
        found.at_start = residency(paths)
        yield found
    finally:
        found.at_end = residency(paths)
        stop_process(process)


def residency(paths: list[Path]) -> float:
    """Share of the pages of ``paths`` in the page cache (from ``vmtouch``)."""
    output = subprocess.run(
        ["vmtouch", *map(str, paths)], capture_output=True, text=True, check=False
    ).stdout
    for line in output.splitlines():
        if "Resident Pages" in line:
            used, _, total = line.split()[2].partition("/")
            return int(used) / max(1, int(total))
    return 0.0


def mount_fusectl() -> bool:
    """Mount the fusectl filesystem that ``-o tune_kernel`` writes to, where it is missing (as
    systemd does at boot); return True if this run mounted it, and so unmounts it."""
    if os.geteuid() != 0 or not FUSECTL.is_dir() or os.path.ismount(FUSECTL):
        return False
    done = subprocess.run(
        ["mount", "-t", "fusectl", "none", str(FUSECTL)], capture_output=True, text=True
    )
    if done.returncode != 0:
        log(f"cannot mount fusectl on {FUSECTL}: {done.stderr.strip()}")
        return False
    log(f"mounted fusectl on {FUSECTL} for -o tune_kernel (unmounted at the end)")
    return True


def unmount_fusectl() -> None:
    """Unmount the fusectl filesystem ``mount_fusectl`` mounted."""
    subprocess.run(["umount", str(FUSECTL)], check=False)
