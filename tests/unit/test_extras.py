"""A feature without its extra is refused on the command line, in one line naming it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from refmount.cli.options import parse_args
from refmount.extras import DECODE, NETCDF, Extra


def without(monkeypatch: pytest.MonkeyPatch, absent: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == absent else real(name, *a)
    )


def test_everything_present_means_no_problem() -> None:
    assert DECODE.missing() is None
    assert NETCDF.missing() is None


@pytest.mark.parametrize(
    ("extra", "absent"),
    [(DECODE, "numcodecs"), (DECODE, "numpy"), (NETCDF, "h5py"), (NETCDF, "numpy")],
)
def test_a_missing_module_names_itself_and_the_extra(
    monkeypatch: pytest.MonkeyPatch, extra: Extra, absent: str
) -> None:
    without(monkeypatch, absent)
    assert extra.missing() == (
        f"{extra.flag} needs {absent}, which is not installed: pip install 'refmount[{extra.name}]'"
    )


@pytest.mark.parametrize("argv", [["--decode"], ["-o", "decode"]])
def test_the_command_line_is_refused_before_loading(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
) -> None:
    without(monkeypatch, "numcodecs")
    with pytest.raises(SystemExit) as caught:
        parse_args([*argv, "missing-refs.json", str(tmp_path)])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "refmount: error: --decode needs numcodecs, which is not installed: "
        "pip install 'refmount[decode]'\n"
    )


def test_without_decode_nothing_is_looked_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    without(monkeypatch, "numcodecs")
    assert not parse_args(["refs.json", str(tmp_path)]).config.decode
