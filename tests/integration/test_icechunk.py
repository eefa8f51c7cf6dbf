"""End-to-end: the real CLI mounts an Icechunk repository built with the icechunk package;
files and bytes equal Icechunk's ``store.get``, zarr-python reads the original values, each
version serves its own snapshot, and Icechunk's refusals reach readers as errnos."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support.icechunk_repos import (
    ICECHUNK_MISSING,
    BuiltRepository,
    build_repository,
    open_store,
    requires_icechunk,
    store_get,
    store_keys,
    touch_later,
)
from tests.support.mounting import mounted, read_errno, refmount_command, requires_fuse

pytestmark = [pytest.mark.fuse, requires_fuse]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltRepository:
    return build_repository(tmp_path_factory.mktemp("icechunk"))


def files_below(root: Path) -> list[str]:
    return sorted(
        str((Path(directory) / name).relative_to(root))
        for directory, _, names in os.walk(root)
        for name in names
    )


def read_with_zarr(root: Path, arrays: dict[str, np.ndarray]) -> None:
    import zarr

    group = zarr.open_group(str(root), mode="r")
    for path, expected in arrays.items():
        array = group[path]
        assert isinstance(array, zarr.Array)
        np.testing.assert_array_equal(array[...], expected, err_msg=path)


@requires_icechunk
def test_every_file_is_icechunks_bytes_and_zarr_reads_the_values(
    built: BuiltRepository, tmp_path: Path
) -> None:
    store = open_store(built, built.second, (built.container, built.other_container))
    keys = store_keys(store)
    with mounted(built.path, tmp_path / "mnt", "--xattr", "--authorize-container", "all") as mount:
        assert files_below(mount.path) == sorted(keys)
        for key in keys:
            path = mount.path / key
            data = store_get(store, key)
            assert path.stat().st_size == len(data), key
            assert path.read_bytes() == data, key
        assert not (mount.path / "sparse/c/0/0").exists()  # never written
        read_with_zarr(mount.path, built.arrays[built.second])
        snapshot = os.getxattr(mount.path, "user.refmount.snapshot")
        assert snapshot == built.second.encode()
        stats = subprocess.run(
            refmount_command("stats", str(mount.path)), capture_output=True, text=True, check=True
        )
        assert f"snapshot        {built.second}" in stats.stdout
    assert f"snapshot {built.second}" in mount.log_text()


@requires_icechunk
def test_each_version_serves_its_snapshot_and_a_commit_changes_nothing(tmp_path: Path) -> None:
    import icechunk
    import zarr

    built = build_repository(tmp_path / "built")
    versions = {
        "main": (["--branch", "main"], built.second),
        "tag": (["-o", "tag=v1"], built.first),
        "dev": (["--branch", "dev"], built.dev),
        "snapshot": (["--snapshot", built.first], built.first),
    }
    for name, (options, snapshot) in versions.items():
        with mounted(
            built.path, tmp_path / name, "--authorize-container", "all", *options
        ) as mount:
            read_with_zarr(mount.path, built.arrays[snapshot])
            if name == "main":
                repository = icechunk.Repository.open(
                    icechunk.local_filesystem_storage(str(built.path))
                )
                session = repository.writable_session("main")
                small = zarr.open_group(store=session.store, mode="a")["small"]
                assert isinstance(small, zarr.Array)
                small[...] = np.array([0, 0, 0, 0], dtype="u1")
                session.commit("while mounted")
                read_with_zarr(mount.path, built.arrays[snapshot])


@requires_icechunk
def test_refusals_reach_readers_as_errnos(tmp_path: Path) -> None:
    built = build_repository(tmp_path / "built")
    with mounted(built.path, tmp_path / "mnt", "--authorize-container", built.container) as mount:
        assert read_errno(mount.path / "virtual/w/c/0") == errno.EACCES
        assert read_errno(mount.path / "virtual/v/c/0") is None
        touch_later(built.data)
        assert read_errno(mount.path / "virtual/v/c/1") == errno.EIO  # committed with checksum
        assert read_errno(mount.path / "virtual/v/c/3") is None  # without one
        log = mount.log_text()
    assert "'virtual/w/c/1'" not in log
    refused = next(line for line in log.splitlines() if "'virtual/w/c/0'" in line)
    assert "--authorize-container" in refused
    changed = next(line for line in log.splitlines() if "'virtual/v/c/1'" in line)
    assert str(built.data) in changed


@requires_icechunk
def test_chunks_read_in_order_are_fetched_ahead_and_a_changed_target_is_still_eio(
    tmp_path: Path,
) -> None:
    built = build_repository(tmp_path / "built")
    store = open_store(built, built.second, (built.container,))
    chunks = [f"virtual/v/c/{index}" for index in range(4)]
    options = ("--authorize-container", built.container)
    with mounted(built.path, tmp_path / "first", *options) as mount:
        for key in chunks:  # one after the other, as a reader in key order does
            assert (mount.path / key).read_bytes() == store_get(store, key), key
        stats = json.loads((mount.path / ".refmount-stats").read_bytes())
    assert stats["bytes_prefetched"] >= 2 * 1000  # from the second chunk on, the rest ahead
    touch_later(built.data)
    with mounted(built.path, tmp_path / "second", *options) as mount:
        # chunks 0 and 1 were committed with a checksum, 2 and 3 without
        assert [read_errno(mount.path / key) for key in chunks] == [
            errno.EIO,
            errno.EIO,
            None,
            None,
        ]
        assert (mount.path / chunks[3]).read_bytes() == store_get(store, chunks[3])
        stats = json.loads((mount.path / ".refmount-stats").read_bytes())
        log = mount.log_text()
    assert stats["bytes_prefetched"] >= 1000
    changed = next(line for line in log.splitlines() if "'virtual/v/c/1'" in line)
    assert str(built.data) in changed


@pytest.mark.skipif(ICECHUNK_MISSING is None, reason="the icechunk package is installed")
def test_without_the_package_a_repository_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "snapshots").mkdir(parents=True)
    (repo / "repo").write_bytes(b"")
    (tmp_path / "mnt").mkdir()
    result = subprocess.run(
        refmount_command("-f", str(repo), str(tmp_path / "mnt")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"refmount: error: {repo}: an Icechunk repository needs")
    assert "pip install 'refmount[icechunk]'" in lines[0]
