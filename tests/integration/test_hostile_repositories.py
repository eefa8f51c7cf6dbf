"""Hostile Icechunk repositories, bounded like hostile reference files: a corrupted,
truncated or missing snapshot, manifest or repository file, a file too large to read, a
branch, tag or snapshot that does not exist, a malformed snapshot id. Each stops the mount
with one line naming the repository (or its file) and the problem, exit status 2, in bounded
time and memory. On a shared mount, ``file://`` containers outside ``--local-root`` (also
by ``..``) are refused."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.bounded import Bounded, run_bounded
from tests.support.icechunk_repos import BuiltRepository, build_repository, requires_icechunk
from tests.support.mounting import is_mounted, mounted, requires_fuse

pytestmark = [pytest.mark.fuse, requires_fuse, requires_icechunk]

PEAK_KIB = 300 * 1024
"""The most RSS a child may reach on a hostile repository (an idle load of the test
repository takes about 150 MiB: zarr, numpy and Icechunk's runtime)."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltRepository:
    return build_repository(tmp_path_factory.mktemp("hostile"))


def tip_snapshot(repo: Path, built: BuiltRepository) -> Path:
    return repo / "snapshots" / built.second


def tip_manifests(built: BuiltRepository) -> list[str]:
    """Return the ids of the manifests that ``main``'s tip reads."""
    import icechunk

    repository = icechunk.Repository.open(icechunk.local_filesystem_storage(str(built.path)))
    return [manifest.id for manifest in repository.list_manifest_files(built.second)]


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def every_manifest(change: Callable[[Path], None]) -> Callable[[Path, BuiltRepository], None]:
    def apply(repo: Path, built: BuiltRepository) -> None:
        for manifest in (repo / "manifests").iterdir():
            change(manifest)

    return apply


def huge(path: Path) -> None:
    """Make ``path`` a 2 GiB file (sparse: it takes no disk) with a bad start."""
    with open(path, "r+b") as file:
        file.truncate(0)
        file.write(b"not a snapshot")
        file.truncate(2 << 30)


CORRUPTIONS: dict[str, tuple[Callable[[Path, BuiltRepository], None], str]] = {
    "snapshot-garbage": (lambda r, b: garbage(tip_snapshot(r, b)), "invalid magic numbers"),
    "snapshot-truncated": (lambda r, b: truncate(tip_snapshot(r, b)), "cannot open branch main"),
    "snapshot-missing": (lambda r, b: tip_snapshot(r, b).unlink(), "not found"),
    "manifests-garbage": (every_manifest(garbage), "invalid magic numbers"),
    "manifests-truncated": (every_manifest(truncate), "cannot read"),
    "manifests-missing": (every_manifest(Path.unlink), "object not found"),
    "repo-file-garbage": (lambda r, b: garbage(r / "repo"), "cannot open the repository"),
    "repo-file-truncated": (lambda r, b: truncate(r / "repo"), "cannot open the repository"),
    "repo-file-missing": (lambda r, b: (r / "repo").unlink(), "repository doesn't exist"),
}


def assert_refused(outcome: Bounded, named: Path, problem: str) -> None:
    """Exit status 2, one line naming the repository (or its file) and the problem."""
    assert outcome.status == 2, outcome.stderr
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith(f"refmount: error: {named}: "), lines[0]
    assert problem in lines[0], lines[0]
    assert outcome.peak_kib < PEAK_KIB, outcome.peak_kib


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_a_corrupted_repository_stops_the_mount_in_one_line(
    built: BuiltRepository, tmp_path: Path, case: str
) -> None:
    corrupt, problem = CORRUPTIONS[case]
    repo = tmp_path / "repo"
    shutil.copytree(built.path, repo)
    corrupt(repo, built)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    outcome = run_bounded(tmp_path, "-f", str(repo), str(mountpoint))
    assert_refused(outcome, repo, problem)
    assert not is_mounted(mountpoint)
    checked = run_bounded(tmp_path, "check", str(repo))
    assert checked.status == 2
    assert problem in checked.stdout


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        (("--branch", "nope"), "cannot open branch nope: ref not found"),
        (("-o", "tag=nope"), "cannot open tag nope: ref not found"),
        (("--snapshot", "not-an-id!"), "invalid snapshot id"),
        (("--snapshot", "../../../etc/passwd"), "invalid snapshot id"),
        (("--snapshot", "A" * 20), "snapshot id not found"),
    ],
)
def test_a_version_that_does_not_exist_stops_the_mount_in_one_line(
    built: BuiltRepository, tmp_path: Path, version: tuple[str, str], problem: str
) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    outcome = run_bounded(tmp_path, "-f", *version, str(built.path), str(mountpoint))
    assert_refused(outcome, built.path, problem)


def test_a_file_too_large_to_read_is_refused_before_icechunk_reads_it(
    built: BuiltRepository, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(built.path, repo)
    snapshot = tip_snapshot(repo, built)
    huge(snapshot)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    outcome = run_bounded(tmp_path, "-f", str(repo), str(mountpoint))  # the default cap
    assert_refused(outcome, snapshot, "the limit on a reference file (--max-refs-size")
    manifest = repo / "manifests" / tip_manifests(built)[0]
    huge(manifest)
    snapshot.write_bytes((built.path / "snapshots" / built.second).read_bytes())
    given = run_bounded(tmp_path, "-f", "-o", "max_refs_size=1M", str(repo), str(mountpoint))
    assert_refused(given, manifest, "is more than 1,048,576 bytes")


def test_shared_mounts_refuse_file_containers_outside_the_local_roots(
    built: BuiltRepository, tmp_path: Path
) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    shared = ("-f", "-o", "allow_other", "--local-root", str(built.data.parent))
    outcome = run_bounded(
        tmp_path, *shared, "--authorize-container", "all", str(built.path), str(mountpoint)
    )
    assert_refused(outcome, built.path, f"virtual chunk container {built.other_container}: ")
    assert f"{built.other.parent} is outside the local roots" in outcome.stderr
    with mounted(
        built.path, mountpoint, *shared[1:], "--authorize-container", built.container
    ) as mount:
        assert (mount.path / "virtual/v/c/0").stat().st_size > 0


def test_a_container_that_leaves_the_local_roots_by_dot_dot_is_refused(tmp_path: Path) -> None:
    import icechunk
    import zarr
    from icechunk.credentials import LocalFileSystemAccess

    (tmp_path / "public").mkdir()
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret/s.bin").write_bytes(b"secret!!")
    prefix = f"file://{tmp_path}/public/../secret/"
    config = icechunk.RepositoryConfig.default()
    store = icechunk.local_filesystem_store(str(tmp_path / "secret"))
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config,
        authorize_virtual_chunk_access={prefix: LocalFileSystemAccess},
    )
    session = repository.writable_session("main")
    zarr.group(store=session.store).create_array(
        "a", shape=(8,), chunks=(8,), dtype="u1", compressors=None
    )
    session.store.set_virtual_ref(  # Icechunk folds the location's "..", not the prefix's
        "a/c/0", f"{prefix}s.bin", offset=0, length=8, validate_container=False
    )
    session.commit("escape")
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    outcome = run_bounded(
        tmp_path,
        *("-f", "-o", "allow_other", "--local-root", str(tmp_path / "public")),
        *("--authorize-container", "all", str(tmp_path / "repo"), str(mountpoint)),
    )
    assert_refused(outcome, tmp_path / "repo", "virtual chunk container")
    assert f"{tmp_path}/secret is outside the local roots" in outcome.stderr
