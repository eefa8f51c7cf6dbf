"""The listing section: ``ls -l`` of the 'many' directory (as many names as the many set has
4 KiB chunks) through refmount (JSON, Parquet), the pyfuse3 floor, fsspec.fuse and tmpfs."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from bench.goals import Row, all_of, at_least
from bench.measure import timed_command
from bench.mounts import Mount, floor_mount
from bench.section import Context, Section
from bench.sections.reads import local_target
from bench.tools import Tool


@dataclass
class Listed:
    """One ``ls -l``: the first (cold) and second (warm) time, or why there is none."""

    cold_s: float | str | None = None
    warm_s: float | str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        """The fields that are set."""
        fields = {"cold_s": self.cold_s, "warm_s": self.warm_s, "error": self.error}
        return {k: v for k, v in fields.items() if v is not None}

    @property
    def cold(self) -> float | str | None:
        """The cold time, or the error in its place."""
        return self.cold_s if self.cold_s is not None else self.error


@dataclass
class ListingFigures:
    """Each party's ``ls -l`` of ``entries`` names."""

    entries: int
    ls_l: dict[str, Listed] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """``{"entries": ..., "ls_l": {party: {...}}}``."""
        return {"entries": self.entries, "ls_l": {k: v.to_json() for k, v in self.ls_l.items()}}


def listed_twice(mounting: Callable[[], AbstractContextManager[Mount]], timeout: float) -> Listed:
    """``ls -l`` of the mount's ``many`` directory twice (cold, warm), or why it failed."""
    try:
        with mounting() as mount:
            directory = str(mount.path / "many")
            cold = timed_command(["ls", "-l", directory], timeout)
            return Listed(cold, timed_command(["ls", "-l", directory], timeout))
    except Exception as error:
        return Listed(error=repr(error)[:300])


def tmpfs_listing(entries: int, timeout: float) -> Listed:
    """``ls -l`` of ``entries`` empty files in /dev/shm, after the same warm-up as the mounts."""
    shm = Path(tempfile.mkdtemp(prefix="refmount-bench-", dir="/dev/shm"))
    try:
        for i in range(entries):
            (shm / str(i)).touch()
        timed_command(["ls", "-l", str(shm)], timeout)
        return Listed(timed_command(["ls", "-l", str(shm)], timeout))
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def run(context: Context) -> ListingFigures:
    """``ls -l`` by each party the options ask for, and tmpfs."""
    data, workdir, options = context.data, context.workdir, context.options
    target = local_target(data)
    target.raw_reader.close()
    result = ListingFigures(data.many_chunks)
    timeout = options.ls_timeout
    if Tool.REFMOUNT in options.tools:
        for name, refs in (("refmount", "many"), ("refmount_parquet", "many_parq")):
            path = target.refs[refs]
            mounting = functools.partial(target.refmount, workdir, path)
            result.ls_l[name] = listed_twice(mounting, timeout)
    if Tool.FLOOR in options.tools:
        result.ls_l["floor"] = listed_twice(
            lambda: floor_mount(workdir, data.big_file, listed=data.many_chunks), timeout
        )
    if Tool.FUSE in options.tools:
        try:
            with target.fsspec_fuse(workdir, target.refs["many"], "many/") as mount:
                cold = timed_command(["ls", "-l", str(mount.path)], timeout)
                result.ls_l["fuse"] = Listed(cold)
        except Exception as error:
            result.ls_l["fuse"] = Listed(error=repr(error)[:300])
    result.ls_l["tmpfs"] = tmpfs_listing(data.many_chunks, timeout)
    return result


def rows(result: ListingFigures) -> list[Row]:
    """Cold and warm ``ls -l`` of refmount (JSON, Parquet) against tmpfs, fuse and the floor."""
    ls = result.ls_l
    none = Listed()
    out = []
    for label, mine in (("JSON", "refmount"), ("Parquet", "refmount_parquet")):
        cold = {
            Tool.REFMOUNT: ls.get(mine, none).cold,
            Tool.FUSE: ls.get("fuse", none).cold,
            Tool.RAW: ls.get("tmpfs", none).cold,
            Tool.FLOOR: ls.get("floor", none).cold,
        }
        warm = {
            Tool.REFMOUNT: ls.get(mine, none).warm_s,
            Tool.RAW: ls.get("tmpfs", none).cold,
            Tool.FLOOR: ls.get("floor", none).warm_s,
        }
        title = f"ls -l {result.entries} entries ({label})"
        cold_goal = all_of(at_least(Tool.RAW, 0.5), at_least(Tool.FUSE, 3.0))
        out.append(
            Row(f"{title}, raw = tmpfs", "s", cold, False, "≤ 2x tmpfs, vs fuse ≥ 3x", cold_goal)
        )
        out.append(Row(f"{title}, again", "s", warm, False, "≤ 2x tmpfs", at_least(Tool.RAW, 0.5)))
    return out


SECTION = Section("listing", run, rows)
