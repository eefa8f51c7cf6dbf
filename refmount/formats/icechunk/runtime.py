"""Icechunk's runtime threads and the end of the process: a process that exits right after
an Icechunk call (``refmount check``, a mount that fails to load) first lets them finish with
it (``settle_runtime``)."""

from __future__ import annotations

import time

RUNTIME_SETTLE = 0.05
"""Seconds ``settle_runtime`` gives Icechunk's runtime threads."""


def settle_runtime() -> None:
    """Let Icechunk's runtime threads finish with the calls made before going on.

    When an async call of Icechunk completes (a chunk table read to its end, or failing on a
    corrupted manifest), one of its threads then waits for the GIL to drop the Python objects
    the call held (pyo3-async-runtimes' task locals). A process that exits at once may be
    finalizing by then, and that drop crashes it (SIGSEGV or SIGABRT instead of its exit
    status). Sleeping releases the GIL, so the waiting thread runs first; a command about to
    exit can spare the moment.
    """
    time.sleep(RUNTIME_SETTLE)
