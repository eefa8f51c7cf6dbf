"""refmount: mount a kerchunk/fsspec reference set as a read-only FUSE directory tree.

From Python: ``with refmount.mount("refs.json") as m: ...`` (see ``refmount.api``).

Layers, top to bottom (docs/architecture.md; enforced by import-linter, pyproject.toml):
api → cli → daemon, check → fuse → decode → read → store, namespace, formats → ops and the
vocabulary (model, config, errors, urls, names). Only fuse.adapter and daemon import
pyfuse3; only store imports fsspec; formats never touch targets.
"""

from refmount.api import Mount, mount
from refmount.errors import BadInputError, RefmountError, StartError
from refmount.release import __version__

__all__ = ["BadInputError", "Mount", "RefmountError", "StartError", "__version__", "mount"]
