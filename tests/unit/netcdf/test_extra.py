"""Whether --netcdf can run: the netcdf extra's modules, looked up without importing them."""

from __future__ import annotations

import importlib.util

import pytest

from refmount.netcdf import extra


def test_nothing_is_missing_here() -> None:
    assert extra.missing_dependency() is None


def test_a_missing_module_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "h5py" else real(name)
    )
    assert extra.missing_dependency() == (
        "--netcdf needs h5py, which is not installed: pip install 'refmount[netcdf]'"
    )
