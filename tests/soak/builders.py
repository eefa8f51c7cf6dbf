"""Settings, keys and observed runs for the soak's tests, with defaults a passing run has."""

from __future__ import annotations

from typing import Any

from soak.arguments import Settings, parse
from soak.daemon import DaemonFigures, ProcFigures
from soak.dataset import Key
from soak.observed import Observed
from soak.tally import Tally
from soak.units import MIB


def settings(*argv: str) -> Settings:
    """The settings of ``scripts/soak *argv``."""
    return parse(list(argv))


def key(
    name: str = "http/k0", data: bytes = b"0123456789", target: str = "http", path: str = "/o0.bin"
) -> Key:
    return Key(name, data, target, path)


def figures(rss_mib: int = 100, threads: int = 10, fds: int = 20) -> ProcFigures:
    return ProcFigures(rss_mib * MIB, threads, fds)


def tally(**per_target: int) -> Tally:
    """A tally of ``per_target`` reads of 1 MiB each, 10 ms each."""
    made = Tally()
    made.per_target.update(per_target)
    made.reads = sum(per_target.values())
    made.bytes_read = made.reads * MIB
    made.latencies.extend([0.01] * made.reads)
    return made


def daemon(
    start: ProcFigures | None = None,
    warm: ProcFigures | None = None,
    end: ProcFigures | None = None,
    peak: ProcFigures | None = None,
) -> DaemonFigures:
    start = start or figures()
    warm = warm or figures(120, 12, 30)
    end = end or figures(130, 12, 32)
    return DaemonFigures(start, warm, end, peak or end, 20)


def observed(**changes: Any) -> Observed:
    """A clean run, but for ``changes``; without proxies, so no fault was injected."""
    fields: dict[str, Any] = {
        "tally": tally(http=100, s3=100),
        "proxies": {},
        "keys": 2016,
        "daemon": daemon(),
        "stats": {"open_files": 0, "retries": 3, "errors": 1},
        "hung": 0,
        "elapsed": 20.0,
        "alive": True,
        "exit_code": 0,
        "bound": 52.0,
    }
    return Observed(**{**fields, **changes})
