"""The soak's command: ``python -m soak`` (``scripts/soak``) runs it in a scratch directory,
prints the report and exits 0 when every check passes, 1 when one fails, 2 when it could not
run."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from soak.arguments import parse
from soak.report import report
from soak.run import log_path, run
from soak.summary import Summary

LOG_TAIL = 3000
"""How many characters of the daemon's log to show when the soak could not run."""


def main(argv: list[str] | None = None) -> int:
    """Run the soak ``argv`` asks for; the exit status."""
    settings = parse(argv)
    with tempfile.TemporaryDirectory(prefix="refmount-soak-") as tmp:
        try:
            summary = Summary.of(settings, run(settings, Path(tmp)))
        except RuntimeError as error:
            log = log_path(settings, Path(tmp))
            tail = log.read_text(errors="replace")[-LOG_TAIL:] if log.exists() else ""
            print(f"soak could not run: {error}\n{tail}", file=sys.stderr)
            return 2
    print(report(summary))
    if settings.json:
        settings.json.write_text(json.dumps(summary.to_json(), indent=2) + "\n")
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
