"""Exit statuses, and the one line of a refused command line."""

from __future__ import annotations

import pytest

from refmount.cli.status import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, usage_error


def test_exit_statuses_are_those_the_help_names() -> None:
    assert (EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT) == (0, 1, 2)


def test_a_usage_error_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        usage_error("--timeout must be more than 0")
    assert caught.value.code == EXIT_BAD_INPUT
    assert capsys.readouterr().err == "refmount: error: --timeout must be more than 0\n"
