"""Units, the benchmark's files and its log line: what every other module of the benchmark uses."""

from __future__ import annotations

import sys
import time
from pathlib import Path

KIB = 1024
MIB = 1024 * KIB
ROOT = Path(__file__).resolve().parent.parent
"""The repository root."""
BENCH = ROOT / "bench"


def log(message: str) -> None:
    """One progress line on standard error (the table goes to standard output)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
