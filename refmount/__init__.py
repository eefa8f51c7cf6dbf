"""refmount: mount a kerchunk/fsspec reference set as a read-only FUSE directory tree.

Layering (enforced by import-linter, see pyproject.toml): cli → daemon → fuse_ops →
filesystem → reader → {store, cache, tree, formats} → {model, config, errors}. Only fuse_ops
and daemon import pyfuse3; only store imports fsspec; formats never touch targets.
"""

__version__ = "0.1.0"
