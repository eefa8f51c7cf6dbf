"""The filesystem the kernel sees: the pyfuse3 adapter, FUSE semantics and the stats file."""
