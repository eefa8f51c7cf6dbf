"""Exit statuses of ``refmount`` and its subcommands, and the one line that tells a user why a
command line was refused."""

from __future__ import annotations

import sys
from typing import NoReturn

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


def usage_error(message: str) -> NoReturn:
    """Stop with one line and exit status 2: a bad option value, found before mounting."""
    print(f"refmount: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT)
