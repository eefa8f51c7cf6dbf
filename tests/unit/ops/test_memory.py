"""The memory a process may take: the machine's, its resource limits' and its control
group's, read from a made-up /proc and /sys/fs/cgroup; and the real ones of this process."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from refmount.ops import memory
from refmount.ops.memory import GIB, KIB, Headroom, Places

UNLIMITED = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)


def no_rlimits(_: int) -> tuple[int, int]:
    return UNLIMITED


def places(
    tmp_path: Path,
    available_kib: int | None = 4_000_000,
    status: str = "VmSize:\t  100000 kB\nVmData:\t   50000 kB\n",
    cgroup: str = "",
) -> Places:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    if available_kib is not None:
        (proc / "meminfo").write_text(
            f"MemTotal:       8000000 kB\nMemAvailable:   {available_kib} kB\n"
        )
    (proc / "self" / "status").write_text(status)
    (proc / "self" / "cgroup").write_text(cgroup)
    return Places(proc, tmp_path / "cgroup")


def group(root: Path, path: str, files: dict[str, str]) -> None:
    directory = root / path.strip("/")
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


def test_without_limits_the_cap_is_half_the_available_memory(tmp_path: Path) -> None:
    where = places(tmp_path)
    assert memory.headrooms(where, no_rlimits) == [
        Headroom("MemAvailable", 4_000_000 * KIB, 4_000_000 * KIB)
    ]
    assert memory.default_max_refs_size(where, no_rlimits) == 2_000_000 * KIB


def test_the_cap_never_exceeds_its_ceiling_and_has_one_without_any_source(
    tmp_path: Path,
) -> None:
    assert memory.default_max_refs_size(places(tmp_path / "a", 400_000_000), no_rlimits) == (
        16 * GIB
    )
    assert memory.default_max_refs_size(places(tmp_path / "b", None), no_rlimits) == 16 * GIB


def test_an_address_space_limit_counts_what_is_already_mapped(tmp_path: Path) -> None:
    def limits(which: int) -> tuple[int, int]:
        return (3 * GIB, 3 * GIB) if which == resource.RLIMIT_AS else UNLIMITED

    found = memory.headrooms(places(tmp_path), limits)
    assert Headroom("RLIMIT_AS", 3 * GIB - 100_000 * KIB, 3 * GIB) in found
    assert memory.default_max_refs_size(places(tmp_path / "x"), limits) == (
        (3 * GIB - 100_000 * KIB) // 2
    )


def test_a_data_limit_counts_the_data_segment(tmp_path: Path) -> None:
    def limits(which: int) -> tuple[int, int]:
        return (GIB, GIB) if which == resource.RLIMIT_DATA else UNLIMITED

    assert memory.smallest(memory.headrooms(places(tmp_path), limits)) == Headroom(
        "RLIMIT_DATA", GIB - 50_000 * KIB, GIB
    )


def test_cgroup_v2_takes_the_tightest_of_the_group_and_its_parents(tmp_path: Path) -> None:
    where = places(tmp_path, cgroup="0::/system.slice/refmount@data.service\n")
    group(where.cgroups, "/system.slice", {"memory.max": str(GIB), "memory.current": "0"})
    group(
        where.cgroups,
        "/system.slice/refmount@data.service",
        {
            "memory.max": "max",
            "memory.current": str(300 * 1024**2),
            "memory.stat": f"anon 1\ninactive_file {100 * 1024**2}\n",
        },
    )
    least = memory.smallest(memory.headrooms(where, no_rlimits))
    assert least == Headroom("cgroup v2 memory.max of /system.slice", GIB, GIB)  # the parent's
    group(where.cgroups, "/system.slice/refmount@data.service", {"memory.max": str(GIB)})
    least = memory.smallest(memory.headrooms(where, no_rlimits))
    assert least is not None
    assert least.bytes == GIB - 300 * 1024**2 + 100 * 1024**2  # inactive page cache counts free


def test_cgroup_v1_memory_controller_and_its_no_limit_value(tmp_path: Path) -> None:
    where = places(tmp_path, cgroup="4:memory:/kubepods/pod1\n1:cpu:/\n")
    root = where.cgroups / "memory"
    group(root, "/", {"memory.limit_in_bytes": "9223372036854771712"})
    group(
        root,
        "/kubepods/pod1",
        {
            "memory.limit_in_bytes": str(2 * GIB),
            "memory.usage_in_bytes": str(GIB),
            "memory.stat": "cache 5\ntotal_inactive_file 1024\n",
        },
    )
    cgroups = [h for h in memory.headrooms(where, no_rlimits) if h.source.startswith("cgroup")]
    assert cgroups == [
        Headroom("cgroup v1 memory.limit_in_bytes of /kubepods/pod1", GIB + 1024, 2 * GIB)
    ]


def test_unreadable_or_odd_files_are_skipped(tmp_path: Path) -> None:
    where = places(tmp_path, status="VmSize: lots\n", cgroup="garbage\n0::/../..\n")
    group(where.cgroups, "/", {"memory.max": "-1"})
    assert [h.source for h in memory.headrooms(where, no_rlimits)] == ["MemAvailable"]


def test_this_process_under_a_real_address_space_limit() -> None:
    """prlimit's limit reaches the child: the cap is half of what is left under it."""
    code = (
        "from refmount.ops import memory\n"
        "least = memory.smallest(memory.headrooms())\n"
        "print(least.source, least.bytes, memory.default_max_refs_size())\n"
    )
    limit = 3 * GIB
    result = subprocess.run(
        ["prlimit", f"--as={limit}", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    source, left, cap = result.stdout.split()
    assert source == "RLIMIT_AS"
    assert 0 < int(left) < limit
    assert int(cap) == int(left) // 2
    assert memory.describe_limit().startswith("the limit: ")
