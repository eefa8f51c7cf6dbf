"""Tests of opening a repository at one snapshot: versions, containers and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from refmount.config import RepositoryVersion
from refmount.errors import ReferenceFormatError
from tests.support.icechunk_repos import BuiltRepository, build_repository, requires_icechunk

pytestmark = requires_icechunk


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltRepository:
    return build_repository(tmp_path_factory.mktemp("opening"))


def test_each_version_resolves_to_its_snapshot(built: BuiltRepository) -> None:
    from refmount.formats.icechunk.opening import open_snapshot

    url = str(built.path)
    assert open_snapshot(url, RepositoryVersion()).snapshot_id == built.second
    assert open_snapshot(url, RepositoryVersion(branch="dev")).snapshot_id == built.dev
    assert open_snapshot(url, RepositoryVersion(tag="v1")).snapshot_id == built.first
    opened = open_snapshot(url, RepositoryVersion(snapshot=built.first))
    assert opened.snapshot_id == built.first
    assert opened.written_at > 0


def test_containers_are_authorized_by_prefix_or_all(built: BuiltRepository) -> None:
    from refmount.formats.icechunk.opening import open_snapshot

    url, main = str(built.path), RepositoryVersion()
    declared = tuple(sorted((built.container, built.other_container)))
    assert open_snapshot(url, main).containers == declared
    assert open_snapshot(url, main).authorized == ()
    assert open_snapshot(url, main, [built.container]).authorized == (built.container,)
    assert open_snapshot(url, main, ["all"]).authorized == declared


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        (RepositoryVersion(branch="nope"), "cannot open branch nope: "),
        (RepositoryVersion(tag="nope"), "cannot open tag nope: "),
        (RepositoryVersion(snapshot="0000000000000000000Z"), "cannot open snapshot"),
    ],
)
def test_a_missing_version_is_one_line(
    built: BuiltRepository, version: RepositoryVersion, problem: str
) -> None:
    from refmount.formats.icechunk.opening import open_snapshot

    with pytest.raises(ReferenceFormatError) as caught:
        open_snapshot(str(built.path), version)
    assert str(caught.value).startswith(f"{built.path}: {problem}")
    assert "\n" not in str(caught.value)


def test_an_undeclared_container_is_refused(built: BuiltRepository) -> None:
    from refmount.formats.icechunk.opening import open_snapshot

    with pytest.raises(ReferenceFormatError, match="declares no such virtual chunk container"):
        open_snapshot(str(built.path), RepositoryVersion(), ["s3://elsewhere/"])


def test_no_repository_is_one_line(tmp_path: Path) -> None:
    from refmount.formats.icechunk.opening import open_snapshot

    with pytest.raises(ReferenceFormatError) as caught:
        open_snapshot(str(tmp_path), RepositoryVersion())
    assert str(caught.value).startswith(f"{tmp_path}: ")
    assert "\n" not in str(caught.value)


def test_storage_of_each_protocol() -> None:
    from refmount.formats.icechunk.opening import repository_storage

    options = {"endpoint_url": "http://127.0.0.1:9", "anon": True}
    assert repository_storage("s3://bucket/repo", options) is not None
    with pytest.raises(ReferenceFormatError, match="cannot open an Icechunk repository at a"):
        repository_storage("https://host/repo", {})


def test_container_credentials_come_from_the_prefixs_options() -> None:
    import icechunk
    from icechunk.credentials import S3Credentials

    from refmount.formats.icechunk.opening import container_credentials

    s3 = icechunk.s3_store(region="us-east-1")
    static = container_credentials(s3, {"key": "k", "secret": "s", "token": "t"})
    assert isinstance(static, S3Credentials.Static)
    assert isinstance(container_credentials(s3, {"anon": True}), S3Credentials.Anonymous)
    assert isinstance(container_credentials(s3, {"key": "k"}), S3Credentials.FromEnv)
    local = container_credentials(icechunk.local_filesystem_store("/data"), {"anon": True})
    assert local is icechunk.credentials.LocalFileSystemAccess
