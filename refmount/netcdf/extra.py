"""Whether ``--netcdf`` can run here: the packages of the ``netcdf`` extra, looked up without
importing them, so that a command line asking for it is refused before anything loads."""

from __future__ import annotations

import importlib.util

EXTRA_MODULES = ("h5py", "numpy")
"""What ``--netcdf`` imports that refmount itself does not need: the ``netcdf`` extra."""

INSTALL = "pip install 'refmount[netcdf]'"


def missing_dependency() -> str | None:
    """Return why ``--netcdf`` cannot run here (one line naming the extra), or None."""
    for module in EXTRA_MODULES:
        if importlib.util.find_spec(module) is None:
            return f"--netcdf needs {module}, which is not installed: {INSTALL}"
    return None
