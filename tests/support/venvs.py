"""Fresh virtual environments with refmount's wheel and one extra, as a user installs it.

The development environment installs every extra and the test tools, which hides what a
user of one extra gets (a module another extra brought, an optional codec). Here the wheel
is built from the checkout and installed with pip into a new venv of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]

INSTALL_TIMEOUT = 900.0
"""pip may have to download and build wheels (pyfuse3 compiles against libfuse3)."""


@dataclass(frozen=True)
class Installation:
    """refmount installed into ``venv`` with ``extra`` (``""``: none)."""

    venv: Path
    extra: str

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def refmount(self) -> Path:
        return self.venv / "bin" / "refmount"

    def has_module(self, name: str) -> bool:
        """Return True when ``name`` can be imported in this installation."""
        probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({name!r}) is None)"
        return subprocess.run([self.python, "-c", probe], check=False).returncode == 0


def build_wheel(directory: Path) -> Path:
    """Build refmount's wheel from the checkout into ``directory``; return its path."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(directory), str(ROOT)],
        check=True,
        timeout=INSTALL_TIMEOUT,
        env=_quiet_pip(),
    )
    (wheel,) = directory.glob("refmount-*.whl")
    return wheel


def base_python() -> str:
    """Return the interpreter this environment was made from (not the venv's own)."""
    return getattr(sys, "_base_executable", None) or sys.executable


OLDEST = (3, 11)
"""The oldest Python refmount supports (``requires-python``)."""


def version_of(python: str) -> tuple[int, int] | None:
    """Return ``python``'s version, or None when it does not run (a pyenv shim of a version
    that is not selected fails, for one)."""
    result = subprocess.run(
        [python, "-c", "import sys, venv; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return None
    major, minor = result.stdout.split()
    return int(major), int(minor)


def python_at_least(minimum: tuple[int, int], oldest: bool = False) -> str | None:
    """Return an interpreter of at least ``minimum`` (the oldest such one with ``oldest``,
    else the newest): this environment's own, or ``python3.X`` on ``PATH``; None if none."""
    names = [f"python3.{minor}" for minor in range(minimum[1], 20)]
    found = [(version_of(name), name) for name in names if shutil.which(name)]
    found.append((version_of(base_python()), base_python()))
    usable = sorted((v, name) for v, name in found if v is not None and v >= minimum)
    if not usable:
        return None
    return usable[0][1] if oldest else usable[-1][1]


def install(wheel: Path, venv: Path, extra: str, python: str | None = None) -> Installation:
    """Make a venv at ``venv`` with ``python`` and pip-install ``wheel[extra]`` into it."""
    subprocess.run([python or base_python(), "-m", "venv", str(venv)], check=True)
    requirement = f"{wheel}[{extra}]" if extra else str(wheel)
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", requirement],
        check=False,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        env=_quiet_pip(),
    )
    if result.returncode != 0:
        raise AssertionError(f"pip install {requirement} failed:\n{result.stderr[-4000:]}")
    return Installation(venv, extra)


def _quiet_pip() -> dict[str, str]:
    """The environment for pip: no version check, no prompt; whatever index the machine sets."""
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
