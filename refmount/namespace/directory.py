"""One directory while the namespace is built: its subdirectories, and its file names packed
as UTF-8 in arrival order, then sorted in batches (ascending runs merged), repeats dropped and
names that are also directories hidden. Only the namespace's build and tree use it."""

from __future__ import annotations

import itertools
import operator
from array import array
from collections.abc import Collection, Iterator

from refmount.packed import PackedBuilder, PackedStrings

BOTH = "is both a file and a directory"

_MERGE_WAYS = 16
"""The most sorted runs of one directory's file names merged at once; more are sorted in blocks
first, so that the merge stays cheap."""

_BATCH = 1 << 16
"""About how many names exist as Python objects at once while a directory's names are sorted."""

Problem = tuple[int, str, str]
"""A problem found while building: ``(event, key, problem)``.

``event`` is the index of the key (``len(keys) + grid id`` for a grid's array path) whose
arrival caused the problem. Together with the depth of ``key`` it gives the order in which
the problems are reported: a key's problems come shallowest first, and a key causes at most
one problem per depth.
"""


class BuildDir:
    """A directory while the tree is being built.

    Subdirectories are in ``dirs`` once there are two or more; while there is one it is
    ``lone`` (named ``lone_name``), so that a chain of directories with one subdirectory each
    (a key thousands of directories deep) costs no dict per directory (``subdir``, ``subdirs``
    and ``pop_subdir`` see both). File names are kept as UTF-8, about 15 bytes a name instead
    of the 100 or so of a ``str`` in a dict, which matters in a directory of a million chunks:
    ``files`` is empty while there is no file, is the one name while there is one, and
    otherwise a ``PackedBuilder`` of the names (a directory of one chunk is common too).
    UTF-8 bytes sort like the code points they encode, so encoded names compare as ``str``
    would; names are never empty.

    While keys arrive (``add_file``) the names are in arrival order, made of ascending runs.
    ``runs`` is None while there is one run; otherwise it holds where each later run starts
    (recorded up to ``_MERGE_WAYS + 1`` of them, enough to know there are too many to merge),
    and ``arrivals[j - runs[0]]`` is the key index of name ``j`` for names after the first run.
    A run is strictly ascending, so a name repeated is always in a later run than its first
    arrival, and its key index is there to report it.

    ``settle`` then sorts the names, drops repeats and hides the names that are also
    subdirectories: after it the file names are sorted without repeats, and the names in
    ``hidden`` (also subdirectories, or removed with ``remove``) are not part of the tree.
    """

    __slots__ = (
        "arrivals",
        "created",
        "dirs",
        "files",
        "hidden",
        "lone",
        "lone_name",
        "runs",
    )

    def __init__(self, created: int | None) -> None:
        self.created = created
        """The index of the key (or grid) whose arrival made this directory, when its parent
        may have had a file of the same name by then (None when it surely had not)."""
        self.dirs: dict[str, BuildDir] | None = None
        self.lone: BuildDir | None = None
        self.lone_name = ""
        self.files: bytes | PackedBuilder = b""
        self.arrivals: array[int] | None = None
        self.runs: array[int] | None = None
        self.hidden: set[str] | None = None

    # ----------------------------------------------------------------- while keys arrive

    def add_file(self, name: bytes, arrival: int) -> None:
        """Append the encoded file name that key number ``arrival`` ends with."""
        files = self.files
        if isinstance(files, bytes):
            if not files:
                self.files = name
                return
            lone = files
            files = self.files = PackedBuilder()
            files.append(lone)
        if not files.append_ascending(name):
            if self.runs is None:
                self.runs = array("q")
                self.arrivals = array("q")
            if len(self.runs) <= _MERGE_WAYS:
                self.runs.append(len(files) - 1)
        if self.arrivals is not None:
            self.arrivals.append(arrival)

    def subdirectory(self, name: str, arrival: int) -> BuildDir:
        """Return the subdirectory ``name``, made now (by key number ``arrival``) if need be."""
        child = self.subdir(name)
        if child is None:
            # With one run so far the names are sorted, and a name not there now is refused
            # later: only a file that came first can also be this directory.
            clash = bool(self.files) and (
                self.runs is not None or self.find(name.encode()) is not None
            )
            child = BuildDir(arrival if clash else None)
            if self.dirs is not None:
                self.dirs[name] = child
            elif self.lone is None:
                self.lone, self.lone_name = child, name
            else:
                self.dirs = {self.lone_name: self.lone, name: child}
                self.lone, self.lone_name = None, ""
        return child

    def subdir(self, name: str) -> BuildDir | None:
        """Return the subdirectory ``name``, if there is one."""
        if self.dirs is not None:
            return self.dirs.get(name)
        return self.lone if self.lone is not None and self.lone_name == name else None

    def subdirs(self) -> Collection[tuple[str, BuildDir]]:
        """Return the subdirectories, as ``(name, directory)``."""
        if self.dirs is not None:
            return self.dirs.items()
        return () if self.lone is None else ((self.lone_name, self.lone),)

    def pop_subdir(self, name: str) -> BuildDir | None:
        """Remove the subdirectory ``name`` and return it (None when there is none)."""
        if self.dirs is not None:
            return self.dirs.pop(name, None)
        child = self.subdir(name)
        if child is not None:
            self.lone, self.lone_name = None, ""
        return child

    # ----------------------------------------------------------------- once they are all in

    def settle(self, parts: list[str], problems: list[Problem]) -> None:
        """Sort the file names, drop repeats and hide names that are also directories.

        ``parts`` are the names of the directory's own path, joined only for a problem (a
        path string per directory would cost the square of the depth); each repeat, and each
        file that is also a directory, is added to ``problems``.
        """
        if self.runs is not None:
            for arrival, repeat in self._sort():
                problems.append((arrival, "/".join([*parts, repeat.decode()]), "duplicate key"))
            self.runs = self.arrivals = None
        for name, child in self.subdirs():
            if child.created is not None and self.find(name.encode()) is not None:
                self.hide(name)
                problems.append((child.created, "/".join([*parts, name]), BOTH))

    def _sort(self) -> list[tuple[int, bytes]]:
        """Sort the names of several runs, keep one of each; return the others' arrivals."""
        files, runs, arrivals = self.files, self.runs, self.arrivals
        assert isinstance(files, PackedBuilder)
        assert runs is not None
        assert arrivals is not None
        too_many = len(runs) > _MERGE_WAYS
        starts = _sort_blocks(files, arrivals, runs[0]) if too_many else [0, *runs]
        # The frozen copy replaces the builder's bytearray while the runs merge.
        names = _Runs(files.freeze(), arrivals, runs[0])
        del files
        self.files, repeats = names.merge(starts)
        return repeats

    # ----------------------------------------------------------------- names by position

    def file_count(self) -> int:
        """Return how many file names there are (hidden ones included)."""
        files = self.files
        return (1 if files else 0) if isinstance(files, bytes) else len(files)

    def name(self, index: int) -> bytes:
        """Return file name ``index``, encoded."""
        files = self.files
        return files if isinstance(files, bytes) else files.utf8(index)

    def position(self, name: bytes) -> int:
        """Return how many file names sort before ``name`` (once they are sorted)."""
        files = self.files
        if isinstance(files, bytes):
            return 1 if files and files < name else 0
        return files.bisect_left(name)

    def find(self, name: bytes) -> int | None:
        """Return the position of a file name (hidden or not), or None."""
        position = self.position(name)
        found = position < self.file_count() and self.name(position) == name
        return position if found else None

    # ----------------------------------------------------------------- after settling

    def hide(self, name: str) -> None:
        """Leave the file ``name`` out of the tree."""
        if self.hidden is None:
            self.hidden = set()
        self.hidden.add(name)

    def has_file(self, name: str) -> bool:
        """Return True when ``name`` is a file of this directory."""
        if self.hidden is not None and name in self.hidden:
            return False
        if self.subdir(name) is not None:
            return False
        return self.find(name.encode()) is not None

    def listed_ranges(self) -> list[tuple[int, int]]:
        """Return the ranges ``[start, stop)`` of file positions that are not hidden."""
        skipped = (self.find(name.encode()) for name in self.hidden or ())
        ranges = []
        start = 0
        for position in sorted(found for found in skipped if found is not None):
            ranges.append((start, position))
            start = position + 1
        ranges.append((start, self.file_count()))
        return [(start, stop) for start, stop in ranges if start < stop]

    def file_names(self) -> Iterator[str]:
        """Yield the names of the files, sorted, hidden ones left out."""
        hidden = self.hidden or set()
        for index in range(self.file_count()):
            name = self.name(index).decode()
            if name not in hidden:
                yield name


class _Runs:
    """One directory's file names while they are sorted: ascending runs of UTF-8 names.

    The names before ``first`` are the first run, each the first arrival of its name; the
    key index of name ``j >= first`` is ``arrivals[j - first]``.
    """

    __slots__ = ("arrivals", "first", "name", "names", "table")

    def __init__(self, table: PackedStrings, arrivals: array[int], first: int) -> None:
        self.table = table
        self.name = table.utf8
        """Return name ``index``."""
        self.names = table.utf8_run
        """Return names ``start … stop - 1``."""
        self.arrivals = arrivals
        self.first = first

    def arrival(self, index: int) -> int:
        """Return the key index of name ``index`` (-1 in the first run, which came first)."""
        return -1 if index < self.first else self.arrivals[index - self.first]

    def merge(self, starts: list[int]) -> tuple[PackedBuilder, list[tuple[int, bytes]]]:
        """Merge the sorted runs that begin at ``starts``, keeping one name of each.

        Return the names sorted without repeats, and the ``(key index, name)`` of each repeat
        dropped.
        """
        merged = PackedBuilder()
        repeats: list[tuple[int, bytes]] = []
        bounds = [[start, stop] for start, stop in itertools.pairwise([*starts, len(self.table)])]
        while bounds:
            merged.extend(self._next_batch(bounds, repeats))
            bounds = [bound for bound in bounds if bound[0] < bound[1]]
        return merged, repeats

    def _next_batch(self, bounds: list[list[int]], repeats: list[tuple[int, bytes]]) -> list[bytes]:
        """Take the next names in sorted order from the runs ``[start, stop)`` in ``bounds``.

        Every run gives up its names up to a cutoff, the smallest of the runs' names a step
        ahead, so that the batch holds every name up to the cutoff and no run gives more
        than a step (or a few more: a sorted block may hold a name twice). The batch comes
        back sorted without repeats; ``(key index, name)`` of each repeat goes to ``repeats``.
        """
        step = max(1, _BATCH // len(bounds))
        cutoff = min(self.name(min(start + step, stop) - 1) for start, stop in bounds)
        taken: list[tuple[int, int]] = []
        batch: list[bytes] = []
        for bound in bounds:
            start, stop = bound
            bound[0] = self.table.bisect_right(cutoff, start, stop)
            taken.append((start, bound[0]))
            batch += self.names(start, bound[0])
        batch.sort()
        if any(map(operator.eq, batch, itertools.islice(batch, 1, None))):
            batch = self._without_repeats(taken, repeats)
        return batch

    def _without_repeats(
        self, taken: list[tuple[int, int]], repeats: list[tuple[int, bytes]]
    ) -> list[bytes]:
        """Sort the names ``taken``, keeping each one's first arrival; others go to ``repeats``."""
        named = sorted(
            (self.name(index), self.arrival(index))
            for start, stop in taken
            for index in range(start, stop)
        )
        unique: list[bytes] = []
        for name, arrival in named:
            if unique and unique[-1] == name:
                repeats.append((arrival, name))
            else:
                unique.append(name)
        return unique


def _sort_blocks(names: PackedBuilder, arrivals: array[int], first: int) -> list[int]:
    """Sort the names after the first run in place, in blocks; return where the runs start.

    For names that arrived in too many runs to merge at once: the blocks are few enough to
    merge, and small enough to sort as Python objects. The arrivals move with their names.
    """
    count = len(names)
    size = max(_BATCH, -(-(count - first) // _MERGE_WAYS))
    starts = [0]
    for start in range(first, count, size):
        stop = min(start + size, count)
        block = names.utf8_run(start, stop)
        order = sorted(range(len(block)), key=block.__getitem__)
        names.replace_run(start, stop, [block[position] for position in order])
        moved = arrivals[start - first : stop - first]
        arrivals[start - first : stop - first] = array("q", [moved[position] for position in order])
        starts.append(start)
    return starts
