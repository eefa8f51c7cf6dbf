"""Building the namespace: keys into compact directories, problems in key order, numbering.

The static nodes are numbered breadth-first, each directory's children sorted by name. A
directory of a million chunks must not cost a ``str`` and a dict entry per name while it is
built: ``BuildDir`` (``directory``) keeps its file names as UTF-8 and sorts them in batches.
Only ``refmount.namespace.tree`` uses this module.
"""

from __future__ import annotations

import collections
import itertools
import operator
from array import array
from collections.abc import Iterable

from refmount.model import ROOT_INODE
from refmount.names import key_problem
from refmount.namespace.directory import BOTH, BuildDir, Problem
from refmount.packed import PackedBuilder


def insert_keys(root: BuildDir, keys: Iterable[str], problems: list[Problem]) -> int:
    """Add every file key below ``root``; return how many keys there were.

    Keys FUSE cannot represent, and files whose name is already a directory, go to
    ``problems`` now; repeats, and files that later become directories, when settling.
    """
    index = -1
    last_path: str | None = None  # consecutive keys are often in the same directory
    directory = root
    for index, key in enumerate(keys):
        problem = key_problem(key)
        if problem is not None:
            problems.append((index, key, problem))
            continue
        cut = key.rfind("/")
        path = key[:cut] if cut > 0 else ""  # a valid key does not start with "/"
        if path != last_path:
            directory = descend(root, path.split("/") if path else [], index)
            last_path = path
        leaf = key[cut + 1 :]
        if directory.subdir(leaf) is not None:
            problems.append((index, key, BOTH))
        else:
            directory.add_file(leaf.encode(), index)
    return index + 1


def descend(root: BuildDir, parts: list[str], arrival: int) -> BuildDir:
    """Walk the directories ``parts``, making those missing (by key number ``arrival``)."""
    directory = root
    for part in parts:
        directory = directory.subdirectory(part, arrival)
    return directory


def settle(root: BuildDir, problems: list[Problem]) -> None:
    """Settle every directory (see ``BuildDir.settle``), adding what they find to ``problems``."""
    parts: list[str] = []  # the path of the directory whose children ``stack[-1]`` yields
    root.settle(parts, problems)
    stack = [iter(root.subdirs())]
    while stack:
        for name, child in stack[-1]:
            parts.append(name)
            child.settle(parts, problems)
            if child.subdirs():
                stack.append(iter(child.subdirs()))
                break
            parts.pop()
        else:
            stack.pop()
            if parts:
                parts.pop()


def in_order(problems: list[Problem]) -> list[tuple[str, str]]:
    """Return ``(key, problem)`` in the order the problems arose as the keys arrived."""
    problems.sort(key=lambda found: (found[0], found[1].count("/")))
    return [(key, problem) for _, key, problem in problems]


class Columns:
    """The columns of ``Tree`` while the static nodes are numbered, with the names encoded.

    Index 0 is unused so that inode == index; index 1 is the root.
    """

    __slots__ = ("child_count", "first_child", "is_dir", "names", "parents")

    def __init__(self) -> None:
        self.names = PackedBuilder()
        self.names.extend([b"", b""])
        self.parents = array("q", [0, ROOT_INODE])
        self.first_child = array("q", [0, 0])
        self.child_count = array("q", [0, 0])
        self.is_dir = bytearray([0, 1])

    def add_files(self, parent: int, directory: BuildDir, start: int, stop: int) -> None:
        """Add the file names ``start … stop - 1`` of ``directory`` as children of ``parent``."""
        count = stop - start
        if count <= 1:
            if count == 1:
                self.add(parent, directory.name(start), is_dir=False)
            return
        files = directory.files
        assert isinstance(files, PackedBuilder)  # there are two names or more
        self.names.extend_from(files, start, stop)
        self.parents.extend(itertools.repeat(parent, count))
        self.first_child.extend(itertools.repeat(0, count))
        self.child_count.extend(itertools.repeat(0, count))
        self.is_dir.extend(itertools.repeat(0, count))

    def add(self, parent: int, name: bytes, *, is_dir: bool) -> int:
        """Add the node ``name`` as a child of ``parent``; return its inode."""
        inode = len(self.parents)
        self.names.append(name)
        self.parents.append(parent)
        self.first_child.append(0)
        self.child_count.append(0)
        self.is_dir.append(is_dir)
        return inode


def number_static(root: BuildDir) -> Columns:
    """Number the settled nodes breadth-first, each directory's children sorted by name."""
    columns = Columns()
    queue = [root]  # the directories in the order of their inodes
    inodes = array("q", [ROOT_INODE])
    position = 0
    while position < len(queue):
        inode = inodes[position]
        first = len(columns.parents)
        columns.first_child[inode] = first
        _number_children(columns, inode, queue[position], queue, inodes)
        columns.child_count[inode] = len(columns.parents) - first
        position += 1
    return columns


def _number_children(
    columns: Columns, inode: int, directory: BuildDir, queue: list[BuildDir], inodes: array[int]
) -> None:
    """Add the children of ``directory`` (inode ``inode``); queue its subdirectories.

    The file names are sorted already: the subdirectories go in between them, the hidden
    names are left out, and the runs of file names in between are copied in bulk.
    """
    dirs = directory.subdirs()
    if not dirs and directory.hidden is None:
        columns.add_files(inode, directory, 0, directory.file_count())
        return
    ranges = collections.deque(directory.listed_ranges())
    for name, child in sorted(dirs, key=operator.itemgetter(0)):
        encoded = name.encode()
        at = directory.position(encoded) if ranges else 0
        while ranges and ranges[0][0] < at:
            start, stop = ranges.popleft()
            if stop > at:
                ranges.appendleft((at, stop))
            columns.add_files(inode, directory, start, min(stop, at))
        inodes.append(columns.add(inode, encoded, is_dir=True))
        queue.append(child)
    for start, stop in ranges:
        columns.add_files(inode, directory, start, stop)


def remove(root: BuildDir, path: str) -> list[str]:
    """Remove the node at ``path`` from the settled tree; return the file keys it held."""
    *parents, name = path.split("/")
    directory = root
    for part in parents:
        child = directory.subdir(part)
        if child is None:
            return []
        directory = child
    child = directory.pop_subdir(name)
    if child is not None:
        return _file_keys(child, path)
    if directory.has_file(name):
        directory.hide(name)
        return [path]
    return []


def _file_keys(directory: BuildDir, path: str) -> list[str]:
    """Return the sorted keys of the files in and below ``directory``, whose path is ``path``."""
    keys: list[str] = []
    stack = [(path, directory)]
    while stack:
        prefix, current = stack.pop()
        keys.extend(f"{prefix}/{name}" for name in current.file_names())
        stack.extend((f"{prefix}/{name}", child) for name, child in current.subdirs())
    return sorted(keys)
