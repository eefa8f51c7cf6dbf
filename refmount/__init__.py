"""refmount: mount a kerchunk/fsspec reference set as a read-only FUSE directory tree.

From Python: ``with refmount.mount("refs.json") as m: ...`` (see ``refmount.api``).

The package's layers and the rules between them are import-linter's contracts in
pyproject.toml (the one list of them); docs/architecture.md walks through the modules.
"""

from refmount.api import Mount, mount
from refmount.errors import BadInputError, RefmountError, StartError
from refmount.release import __version__

__all__ = ["BadInputError", "Mount", "RefmountError", "StartError", "__version__", "mount"]
