"""RefmountPlugin for real: a local cluster of three worker processes reads one host mount."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration import sources
from tests.support.icechunk_repos import build_repository, requires_icechunk
from tests.support.mounting import requires_fuse, unmount

pytestmark = [pytest.mark.fuse, requires_fuse]

distributed = pytest.importorskip("distributed")
xr = pytest.importorskip("xarray")

LEVELS = 5


def refmounts_on(mountpoint: Path) -> int:
    """Return how many refmount mounts the mount table shows on ``mountpoint``."""
    from refmount.daemon import mounts_on
    from refmount.dask import MOUNT_FSTYPE

    return sum(entry.fstype == MOUNT_FSTYPE for entry in mounts_on(mountpoint))


def read_level(mountpoint: str, level: int) -> Any:
    """A task: one level of ``temp``, read through the mount with xarray."""
    import xarray

    with xarray.open_zarr(mountpoint, consolidated=False, chunks=None) as ds:
        return ds["temp"].isel(level=level).values


def read_in_process(refs: dict[str, Any]) -> list[Any]:
    """The same reads done in this process with fsspec's ReferenceFileSystem."""
    import fsspec

    mapper = fsspec.filesystem("reference", fo=refs).get_mapper("")
    with xr.open_zarr(mapper, consolidated=False, chunks=None) as ds:
        return [ds["temp"].isel(level=level).values for level in range(LEVELS)]


def read_everywhere(client: Any, mountpoint: Path) -> list[Any]:
    futures = client.map(
        read_level, [str(mountpoint)] * LEVELS, range(LEVELS), pure=False, retries=2
    )
    return list(client.gather(futures))


def test_plugin_mounts_once_per_host_and_the_last_nanny_unmounts(tmp_path: Path) -> None:
    from refmount.dask import RefmountPlugin

    source = sources.netcdf4(tmp_path / "data")
    expected = read_in_process(source.refs_dict())
    mountpoint = tmp_path / "mnt"
    with (
        distributed.LocalCluster(
            n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.register_plugin(RefmountPlugin(source.refs, mountpoint, cache_size="64M"))
        assert refmounts_on(mountpoint) == 1
        for got, want in zip(read_everywhere(client, mountpoint), expected, strict=True):
            np.testing.assert_array_equal(got, want)
        pids = client.run(os.getpid)
        assert len(set(pids.values())) == 3
        victim = next(iter(pids.values()))
        os.kill(victim, signal.SIGKILL)
        for got, want in zip(read_everywhere(client, mountpoint), expected, strict=True):
            np.testing.assert_array_equal(got, want)
        deadline = time.monotonic() + 60
        while len(client.scheduler_info()["workers"]) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)  # the nanny restarts its worker: the mount is left alone
        assert victim not in client.run(os.getpid).values()
        assert refmounts_on(mountpoint) == 1
    deadline = time.monotonic() + 60
    while refmounts_on(mountpoint) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert refmounts_on(mountpoint) == 0


def test_nannies_share_the_mount_and_only_the_last_one_unmounts(tmp_path: Path) -> None:
    import pickle

    from refmount.dask import RefmountPlugin

    source = sources.netcdf4(tmp_path / "data")
    mountpoint = tmp_path / "mnt"
    plugin = RefmountPlugin(source.refs, mountpoint)
    first, second = (pickle.loads(pickle.dumps(plugin)) for _ in range(2))  # two nannies
    try:
        first.attach()
        second.attach()
        first.attach()  # a second setup of one nanny changes nothing
        assert refmounts_on(mountpoint) == 1
        first.detach()
        first.detach()
        assert refmounts_on(mountpoint) == 1  # the second nanny still holds it
        assert read_level(str(mountpoint), 0).shape == (11, 13)
        second.detach()
        assert refmounts_on(mountpoint) == 0
    finally:
        for nanny in (first, second):
            nanny.detach()
        unmount(mountpoint)


def test_a_nanny_killed_by_sigkill_lets_go_of_its_share(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    from refmount.dask import RefmountPlugin

    source = sources.netcdf4(tmp_path / "data")
    mountpoint = tmp_path / "mnt"
    refs = source.refs_dict()  # in memory: the command reads it from its stdin
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from refmount.dask import RefmountPlugin
        refs = json.loads(sys.stdin.read())
        RefmountPlugin(refs, {str(mountpoint)!r}, base={str(source.refs.parent)!r}).attach()
        print("attached", flush=True)
        time.sleep(600)
        """
    )
    nanny = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    plugin = RefmountPlugin(refs, mountpoint, base=str(source.refs.parent))
    try:
        assert nanny.stdin is not None
        assert nanny.stdout is not None
        nanny.stdin.write(json.dumps(refs))
        nanny.stdin.close()
        assert nanny.stdout.readline() == "attached\n"
        plugin.attach()
        assert refmounts_on(mountpoint) == 1
        nanny.kill()
        nanny.wait()
        assert refmounts_on(mountpoint) == 1  # the mount belongs to the host, not the nanny
        assert read_level(str(mountpoint), 4).shape == (11, 13)
        plugin.detach()  # the killed nanny's shared lock went with it: this is the last
        assert refmounts_on(mountpoint) == 0
    finally:
        if nanny.poll() is None:
            nanny.kill()
            nanny.wait()
        if nanny.stdout is not None:
            nanny.stdout.close()
        plugin.detach()
        unmount(mountpoint)


def test_unknown_keyword_is_refused_on_the_client(tmp_path: Path) -> None:
    from refmount.dask import RefmountPlugin

    with pytest.raises(TypeError, match="cache_sise"):
        RefmountPlugin(tmp_path / "refs.json", tmp_path / "mnt", cache_sise="1G")


@requires_icechunk
def test_workers_read_a_repository_through_the_plugins_mount(tmp_path: Path) -> None:
    from refmount.dask import RefmountPlugin

    built = build_repository(tmp_path / "built")
    expected = built.arrays[built.dev]
    mountpoint = tmp_path / "mnt"
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        plugin = RefmountPlugin(built.path, mountpoint, branch="dev", authorize_container=["all"])
        client.register_plugin(plugin)
        assert refmounts_on(mountpoint) == 1
        paths = sorted(expected)
        futures = client.map(read_array, [str(mountpoint)] * len(paths), paths, pure=False)
        for path, got in zip(paths, client.gather(futures), strict=True):
            np.testing.assert_array_equal(got, expected[path], err_msg=path)
    deadline = time.monotonic() + 60
    while refmounts_on(mountpoint) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert refmounts_on(mountpoint) == 0


def read_array(mountpoint: str, path: str) -> Any:
    """A task: one array of a mounted repository, read with zarr-python in a worker."""
    import zarr

    return zarr.open_array(f"{mountpoint}/{path}", mode="r")[...]


def read_every_file(mountpoint: str) -> dict[str, int]:
    """A task: read every file of the mount; return each one's length, or minus its errno."""
    found: dict[str, int] = {}
    for directory, _, names in os.walk(mountpoint):
        for name in names:
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as file:
                    found[os.path.relpath(path, mountpoint)] = len(file.read())
            except OSError as error:
                found[os.path.relpath(path, mountpoint)] = -(error.errno or 0)
    return found


def test_pins_carried_by_the_plugin_keep_every_host_on_the_recorded_version(
    tmp_path: Path,
) -> None:
    """The record is taken, then the target changes: the plugin's mount serves EIO for every
    chunk of it (never the new bytes), while metadata, held in the set, still reads."""
    import errno
    import subprocess
    import sys

    from refmount.dask import RefmountPlugin

    source = sources.netcdf4(tmp_path / "data")
    recorded = subprocess.run(
        [sys.executable, "-m", "refmount", "pin", str(source.refs)],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    pins = json.loads(recorded)
    target = next(iter(pins["targets"]))
    stat = os.stat(target)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a new version
    mountpoint = tmp_path / "mnt"
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.register_plugin(RefmountPlugin(source.refs, mountpoint, pins=pins))
        read = client.submit(read_every_file, str(mountpoint), pure=False).result()
        chunks = {
            key: size
            for key, size in read.items()
            if key.startswith("temp/") and not key.rpartition("/")[2].startswith(".")
        }
        assert len(chunks) == 3 * 3 * 3
        assert set(chunks.values()) == {-errno.EIO}, read
        assert read["temp/.zarray"] > 0
    unmount(mountpoint)
