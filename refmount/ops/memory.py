"""How much memory this process may still take: the machine's, its resource limits' and its
control group's, whichever is smallest. The default cap on a reference file comes from it.

A daemon under ``prlimit --as``, systemd's ``MemoryMax=`` or a Kubernetes memory limit
cannot use the machine's memory: sizing a cap from ``/proc/meminfo`` alone lets a bomb run
into ``MemoryError`` (or the OOM killer) instead of being refused at the cap. Each source is
read where it is published and skipped when absent or unreadable:

- ``MemAvailable`` of ``/proc/meminfo``;
- ``RLIMIT_AS`` less the address space in use (``VmSize``), ``RLIMIT_DATA`` less the data
  segment in use (``VmData``), from ``/proc/self/status``;
- the control group's limit less its working set, for the process's group and each of its
  ancestors (a parent's limit binds its children): cgroup v2's ``memory.max`` and
  ``memory.current``, or v1's ``memory.limit_in_bytes`` and ``memory.usage_in_bytes``, less
  the inactive file pages of ``memory.stat`` (page cache the kernel reclaims before it runs
  out, as the kubelet counts it).
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

KIB = 1024
GIB = 1024**3

MAX_REFS_SIZE_CEILING = 16 * GIB
"""The default cap on a reference file never exceeds this (see ``default_max_refs_size``)."""

V1_UNLIMITED = 1 << 62
"""cgroup v1 writes "no limit" as a page-rounded ``LLONG_MAX``; anything above this is none."""

Limit = Callable[[int], tuple[int, int]]
"""``getrlimit``: ``(soft, hard)`` of a resource."""


@dataclass(frozen=True, slots=True)
class Headroom:
    """One source's answer: ``bytes`` more this process may take, where that comes from, and
    the limit itself (the whole of it, used or not)."""

    source: str
    bytes: int
    limit: int

    def __str__(self) -> str:
        return f"{self.source} of {self.limit:,} bytes"


@dataclass(frozen=True, slots=True)
class Places:
    """Where the limits are published (other roots in tests)."""

    proc: Path = Path("/proc")
    cgroups: Path = Path("/sys/fs/cgroup")


def headrooms(places: Places = Places(), getrlimit: Limit = resource.getrlimit) -> list[Headroom]:
    """Return every limit that applies to this process, each as the memory it leaves."""
    found: list[Headroom] = []
    available = _field(places.proc / "meminfo", "MemAvailable")
    if available is not None:
        found.append(Headroom("MemAvailable", available, available))
    status = places.proc / "self" / "status"
    for name, resource_id, used in (
        ("RLIMIT_AS", resource.RLIMIT_AS, "VmSize"),
        ("RLIMIT_DATA", resource.RLIMIT_DATA, "VmData"),
    ):
        soft = getrlimit(resource_id)[0]
        if soft != resource.RLIM_INFINITY and soft >= 0:
            found.append(Headroom(name, max(0, soft - (_field(status, used) or 0)), soft))
    found.extend(_cgroup_headrooms(places))
    return found


def smallest(found: list[Headroom]) -> Headroom | None:
    """Return the limit that leaves the least memory, or None when none is known."""
    return min(found, key=lambda headroom: headroom.bytes, default=None)


def default_max_refs_size(places: Places = Places(), getrlimit: Limit = resource.getrlimit) -> int:
    """Return the default cap on a reference file's raw and inflated size, in bytes.

    It is ``min(16 GiB, half of the smallest headroom)``, read when the command starts;
    with no limit known it is 16 GiB. No honest reference set comes near it, and a hostile
    one stops there instead of taking the memory the process may use.
    """
    least = smallest(headrooms(places, getrlimit))
    if least is None:
        return MAX_REFS_SIZE_CEILING
    return max(1, min(MAX_REFS_SIZE_CEILING, least.bytes // 2))


def describe_limit(places: Places = Places(), getrlimit: Limit = resource.getrlimit) -> str:
    """Say in a few words which limit binds this process's memory, for messages."""
    least = smallest(headrooms(places, getrlimit))
    return "no memory limit is known" if least is None else f"the limit: {least}"


def _field(path: Path, name: str) -> int | None:
    """Return a ``Name:  N kB`` field of a ``/proc`` file, in bytes, or None."""
    try:
        with open(path, encoding="ascii") as lines:
            for line in lines:
                key, _, rest = line.partition(":")
                if key == name:
                    return int(rest.split()[0]) * KIB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headrooms(places: Places) -> Iterator[Headroom]:
    """Yield the headroom of each limited control group this process is in, ancestors too."""
    try:
        memberships = (places.proc / "self" / "cgroup").read_text(encoding="ascii")
    except (OSError, ValueError):
        return
    for line in memberships.splitlines():
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        if controllers == "" and path:  # v2: "0::/path"
            root, limit_file, usage_file = places.cgroups, "memory.max", "memory.current"
            version, inactive = "cgroup v2 memory.max", "inactive_file"
        elif "memory" in controllers.split(","):  # v1: "N:memory:/path"
            root = places.cgroups / "memory"
            limit_file, usage_file = "memory.limit_in_bytes", "memory.usage_in_bytes"
            version, inactive = "cgroup v1 memory.limit_in_bytes", "total_inactive_file"
        else:
            continue
        for group in _ancestors(root, path):
            limit = _number(group / limit_file)
            if limit is None or limit >= V1_UNLIMITED:
                continue
            usage = _number(group / usage_file) or 0
            reclaimable = min(usage, _stat(group / "memory.stat", inactive))
            name = "/" + group.relative_to(root).as_posix().removeprefix(".")
            yield Headroom(f"{version} of {name}", max(0, limit - usage + reclaimable), limit)


def _ancestors(root: Path, path: str) -> Iterator[Path]:
    """Yield the group's directory under ``root`` and each parent's, up to ``root``."""
    parts = [part for part in path.split("/") if part and part not in (".", "..")]
    for depth in range(len(parts), -1, -1):
        directory = root.joinpath(*parts[:depth])
        if directory.is_dir():
            yield directory


def _stat(path: Path, name: str) -> int:
    """Return the ``name N`` line of a ``memory.stat`` file (0 when absent or unreadable)."""
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(" ")
            if key == name and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _number(path: Path) -> int | None:
    """Return the integer a control file holds; None for ``max``, absent or unreadable."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
