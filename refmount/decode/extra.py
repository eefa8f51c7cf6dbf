"""Whether ``--decode`` can run here: the packages of the ``decode`` extra, looked up without
importing them, so that a command line asking for it is refused before anything loads."""

from __future__ import annotations

import importlib.util

EXTRA_MODULES = ("numcodecs", "numpy")
"""What ``--decode`` imports that refmount itself does not need: the ``decode`` extra."""

INSTALL = "pip install 'refmount[decode]'"


def missing_dependency() -> str | None:
    """Return why ``--decode`` cannot run here (one line naming the extra), or None."""
    for module in EXTRA_MODULES:
        if importlib.util.find_spec(module) is None:
            return f"--decode needs {module}, which is not installed: {INSTALL}"
    return None
