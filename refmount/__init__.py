"""refmount: mount a kerchunk/fsspec reference set as a read-only FUSE directory tree.

From Python: ``with refmount.mount("refs.json") as m: ...`` (see ``refmount.api``).

Layering (enforced by import-linter, see pyproject.toml): api → cli → daemon → fuse_ops →
filesystem → reader → {store, cache, tree, formats} → {model, config, errors}. Only fuse_ops
and daemon import pyfuse3; only store imports fsspec; formats never touch targets.
"""

from refmount.api import Mount, mount
from refmount.errors import BadInputError, RefmountError, StartError
from refmount.release import __version__

__all__ = ["BadInputError", "Mount", "RefmountError", "StartError", "__version__", "mount"]
