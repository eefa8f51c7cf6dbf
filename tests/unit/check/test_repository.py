"""Tests of checking an Icechunk repository: the snapshot resolved, its containers (each
authorized or not, with the chunks that point into it), the chunks by kind, the arrays; a
repository that cannot be opened at that version is malformed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from refmount.check import REPOSITORY_FORMAT, ContainerInfo, check_repository, format_summary
from refmount.config import RepositoryVersion
from tests.support.icechunk_repos import BuiltRepository, build_repository, requires_icechunk


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltRepository:
    return build_repository(tmp_path_factory.mktemp("check"))


@requires_icechunk
def test_the_snapshot_containers_chunks_and_arrays_are_summarised(built: BuiltRepository) -> None:
    summary = check_repository(str(built.path), RepositoryVersion(), [built.container])
    assert summary.format == REPOSITORY_FORMAT
    assert summary.ok
    repository = summary.repository
    assert repository is not None
    assert (repository.snapshot, repository.version) == (built.second, "branch main")
    assert repository.containers == [
        ContainerInfo(built.container, True, 4),
        ContainerInfo(built.other_container, False, 4),
    ]
    assert repository.chunk_kinds == {"native": 5, "virtual": 8, "inline": 2}
    arrays = {array.path: array for array in summary.arrays}
    assert sorted(arrays) == ["obs/temp", "small", "sparse", "virtual/v", "virtual/w"]
    sparse = arrays["sparse"]
    assert (sparse.shape, sparse.chunks, sparse.dtype) == ((100, 100), (50, 50), "int32")
    assert (sparse.present, sparse.chunk_count) == (1, 4)
    assert (summary.chunk_keys, summary.chunk_positions) == (15, 18)
    [warning] = summary.warnings
    assert f"--authorize-container {built.other_container}" in warning
    assert "4 virtual chunks" in warning
    document = summary.to_json()
    assert json.loads(json.dumps(document))["repository"]["snapshot"] == built.second


@requires_icechunk
def test_all_authorizes_every_container_and_leaves_no_warning(built: BuiltRepository) -> None:
    summary = check_repository(str(built.path), RepositoryVersion(tag="v1"), ["all"])
    assert summary.repository is not None
    assert summary.repository.snapshot == built.first
    assert all(container.authorized for container in summary.repository.containers)
    assert summary.warnings == []
    assert summary.served_as_stored is None  # not asked
    decoded = check_repository(str(built.path), RepositoryVersion(), ["all"], decode_cache=1 << 30)
    assert decoded.served_as_stored == []  # every array of it decodes
    text = format_summary(summary)
    assert text.splitlines()[:2] == [
        f"{built.path}: Icechunk repository",
        f"snapshot    {built.first} (tag v1)",
    ]
    assert f"  {built.container}  authorized  4 chunks point into it" in text
    assert "chunks      15 of 18 positions: 5 native, 8 virtual, 2 inline" in text


@requires_icechunk
@pytest.mark.parametrize(
    ("version", "authorize", "problem"),
    [
        (RepositoryVersion(branch="nope"), (), "cannot open branch nope"),
        (RepositoryVersion(snapshot="not-an-id"), (), "cannot open snapshot not-an-id"),
        (RepositoryVersion(), ("file:///elsewhere/",), "declares no such virtual chunk"),
    ],
)
def test_a_version_or_container_that_does_not_exist_is_malformed(
    built: BuiltRepository, version: RepositoryVersion, authorize: tuple[str, ...], problem: str
) -> None:
    summary = check_repository(str(built.path), version, authorize)
    assert summary.malformed
    assert not summary.ok
    [found] = summary.problems
    assert problem in found.problem
    assert "malformed: it cannot be mounted" in format_summary(summary)


@requires_icechunk
def test_virtual_chunks_in_no_declared_container_are_a_problem(tmp_path: Path) -> None:
    import icechunk
    import zarr

    path = tmp_path / "repo"
    repository = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repository.writable_session("main")
    root = zarr.group(store=session.store)
    root.create_array("a", shape=(4,), chunks=(2,), dtype="u1", compressors=None)
    session.store.set_virtual_ref(
        "a/c/0", "s3://nowhere/x.bin", offset=0, length=2, validate_container=False
    )
    session.commit("homeless")
    summary = check_repository(str(path), RepositoryVersion())
    assert not summary.malformed
    assert not summary.ok
    [problem] = summary.problems
    assert problem.key == "a"
    assert "1 virtual chunks lie in no virtual chunk container" in problem.problem


def test_check_imports_without_numpy_or_icechunk() -> None:
    """``refmount check`` of a kerchunk set needs neither (no extra installed)."""
    code = (
        "import sys\n"
        "sys.modules.update(numpy=None, icechunk=None, zarr=None)\n"
        "import refmount.check, refmount.cli.check\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
