"""``python -m refmount``: the same as the ``refmount`` command."""

from refmount.cli import main

raise SystemExit(main())
