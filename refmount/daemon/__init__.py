"""The daemon: a loaded reference set mounted and served until it is unmounted.

``loading`` reads a set for a mount; ``mountpoint`` says where a mount may go;
``fuse_options`` are what libfuse gets; ``compose`` wires a mount's parts (``open_mount``,
the one place that does); ``serve`` runs its lifecycle (``mount_and_serve``). Their log
lines all say ``refmount.daemon:``.
"""

from refmount.daemon.compose import MountParts, cache_dir_problem, open_mount, prepare_targets
from refmount.daemon.fuse_options import DEFAULT_FUSE_OPTIONS, fuse_options, fuse_options_problem
from refmount.daemon.loading import Loaded, check_local_targets, load_references
from refmount.daemon.mountpoint import MountEntry, check_mountpoint, mounts_on
from refmount.daemon.serve import mount_and_serve, tune_kernel

__all__ = [
    "DEFAULT_FUSE_OPTIONS",
    "Loaded",
    "MountEntry",
    "MountParts",
    "cache_dir_problem",
    "check_local_targets",
    "check_mountpoint",
    "fuse_options",
    "fuse_options_problem",
    "load_references",
    "mount_and_serve",
    "mounts_on",
    "open_mount",
    "prepare_targets",
    "tune_kernel",
]
