"""What the filesystem tests share: a ``RefFilesystem`` wired over a reference set, an in-memory
target and a reader, as the daemon wires them (``daemon.compose``) but with fakes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from refmount.config import ReadConfig, RetryConfig
from refmount.fuse.filesystem import Owner, RefFilesystem
from refmount.model import ReferenceSet
from refmount.namespace.tree import Tree
from refmount.read.reader import Reader
from tests.fakes import MemoryTarget

MTIME_NS = 1_700_000_000_000_000_000


@dataclass(frozen=True)
class Wired:
    """A filesystem and the target and reader behind it."""

    fs: RefFilesystem
    target: MemoryTarget
    reader: Reader


def wire(
    references: ReferenceSet,
    target: MemoryTarget | None = None,
    config: ReadConfig | None = None,
    retry: RetryConfig | None = None,
    *,
    owner: Owner | None = None,
    mtime_ns: int = MTIME_NS,
    **options: Any,
) -> Wired:
    """Build the tree of ``references`` and a filesystem reading ``target`` (empty by default)
    through a reader with ``config`` and ``retry`` (defaults: ``ReadConfig()``, no retries);
    ``options`` go to ``RefFilesystem`` (statistics, target_problem)."""
    target = target if target is not None else MemoryTarget()
    tree = Tree.build(references.keys(), references.grids, source=references.source)
    reader = Reader(target, config or ReadConfig(), retry or RetryConfig(retries=0))
    fs = RefFilesystem(
        tree, references, reader, owner=owner or Owner(uid=1, gid=1), mtime_ns=mtime_ns, **options
    )
    return Wired(fs, target, reader)
