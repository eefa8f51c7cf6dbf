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
    VIRTUAL_CHUNK,
    BuiltRepository,
    RemoteRepository,
    build_remote_repository,
    build_repository,
    build_s3_container_repository,
    open_remote_store,
    open_store,
    requires_icechunk,
    store_get,
    store_keys,
    touch_later,
)
from tests.support.mounting import mounted, read_errno, refmount_command, requires_fuse
from tests.support.servers import DUMMY_AWS_ENVIRONMENT, RangeHTTPServer, S3Bucket

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


@pytest.fixture
def remote(s3_bucket: S3Bucket, http_server: RangeHTTPServer) -> RemoteRepository:
    return build_remote_repository(s3_bucket.endpoint_url, s3_bucket.name, "repo", http_server)


@requires_icechunk
@pytest.mark.s3
@pytest.mark.http
def test_a_repository_on_s3_with_chunks_on_http_serves_icechunks_bytes(
    remote: RemoteRepository, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    store = open_remote_store(remote)
    keys = store_keys(store)
    endpoint = f"s3_endpoint_url={s3_bucket.endpoint_url}"
    with mounted(
        remote.url, tmp_path / "mnt", "-o", endpoint, "--authorize-container", "all"
    ) as mount:
        assert files_below(mount.path) == sorted(keys)
        for key in keys:
            data = store_get(store, key)
            assert (mount.path / key).stat().st_size == len(data), key
            assert (mount.path / key).read_bytes() == data, key
        read_with_zarr(mount.path, remote.arrays)
    check = subprocess.run(
        refmount_command(
            "check", "-o", endpoint, "--authorize-container", remote.container, remote.url
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"  {remote.container}  authorized  4 chunks point into it" in check.stdout
    assert f"  {remote.other_container}  not authorized  4 chunks point into it" in check.stdout


@requires_icechunk
@pytest.mark.s3
@pytest.mark.http
def test_a_changed_http_target_is_eio_and_an_unauthorized_container_eacces(
    remote: RemoteRepository,
    s3_bucket: S3Bucket,
    http_server: RangeHTTPServer,
    tmp_path: Path,
) -> None:
    with mounted(
        remote.url,
        tmp_path / "mnt",
        "-o",
        f"s3_endpoint_url={s3_bucket.endpoint_url},authorize_container={remote.container}",
    ) as mount:
        assert read_errno(mount.path / "virtual/v/c/0") is None
        assert read_errno(mount.path / "virtual/w/c/0") == errno.EACCES
        http_server.add(remote.data_path, bytes(4 * VIRTUAL_CHUNK * 4))  # a new ETag
        assert read_errno(mount.path / "virtual/v/c/1") == errno.EIO
        log = mount.log_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    changed = [line for line in errors if "'virtual/v/c/1'" in line]
    assert len(changed) == 1, log
    assert f"{remote.container}virtual.bin" in changed[0]
    refused = [line for line in errors if "'virtual/w/c/0'" in line]
    assert len(refused) == 1, log
    assert "--authorize-container" in refused[0]


@requires_icechunk
@pytest.mark.s3
@pytest.mark.http
def test_static_credentials_of_the_repository_come_from_target_options(
    remote: RemoteRepository,
    s3_bucket: S3Bucket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = open_remote_store(remote)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    options = ("-o", f"s3_endpoint_url={s3_bucket.endpoint_url}")
    without = subprocess.run(
        refmount_command("check", *options, "--format", "icechunk", remote.url),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert without.returncode == 2  # no credentials in the environment
    assert "credential" in without.stdout
    credentials = {
        "key": DUMMY_AWS_ENVIRONMENT["AWS_ACCESS_KEY_ID"],
        "secret": DUMMY_AWS_ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
    }
    with mounted(
        remote.url, tmp_path / "mnt", *options, "--target-options", json.dumps(credentials)
    ) as mount:
        assert (mount.path / "small/c/0").read_bytes() == store_get(store, "small/c/0")


@requires_icechunk
@pytest.mark.s3
def test_credentials_of_an_s3_container_come_from_remote_options(
    s3_bucket: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = np.arange(4 * VIRTUAL_CHUNK, dtype="<i4")
    s3_bucket.put("data/v.bin", values.tobytes())
    repo, prefix = build_s3_container_repository(tmp_path, s3_bucket.endpoint_url, s3_bucket.name)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    credentials = {
        "key": DUMMY_AWS_ENVIRONMENT["AWS_ACCESS_KEY_ID"],
        "secret": DUMMY_AWS_ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
    }
    with mounted(
        repo, tmp_path / "mnt", "--authorize-container", prefix, "--remote-options",
        json.dumps({"s3": credentials}),
    ) as mount:  # fmt: skip
        assert (mount.path / "v/c/2").read_bytes() == values[
            2 * VIRTUAL_CHUNK : 3 * VIRTUAL_CHUNK
        ].tobytes()
    with mounted(repo, tmp_path / "without", "--authorize-container", prefix) as mount:
        assert read_errno(mount.path / "v/c/2") == errno.EIO  # no credentials in the environment
