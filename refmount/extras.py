"""Whether a feature's optional extra is installed: its packages looked up without importing
them, so that a command line asking for the feature is refused, in one line naming the
extra, before anything loads (``--decode``: ``DECODE``; ``--netcdf``: ``NETCDF``)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Extra:
    """The extra ``name`` that ``flag`` needs: the packages refmount itself does without."""

    flag: str
    name: str
    modules: tuple[str, ...]

    @property
    def install(self) -> str:
        """Return the command that installs the extra."""
        return f"pip install 'refmount[{self.name}]'"

    def missing(self) -> str | None:
        """Return why ``flag`` cannot run here (one line naming the extra), or None."""
        for module in self.modules:
            if importlib.util.find_spec(module) is None:
                return f"{self.flag} needs {module}, which is not installed: {self.install}"
        return None


DECODE = Extra("--decode", "decode", ("numcodecs", "numpy"))
NETCDF = Extra("--netcdf", "netcdf", ("h5py", "numpy"))
