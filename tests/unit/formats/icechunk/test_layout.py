"""Tests of recognising an Icechunk repository by its layout (no icechunk package needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.icechunk.layout import FileLimit, is_repository
from refmount.store.sources import FsspecSource


def layout(base: Path, *names: str) -> FsspecSource:
    base.mkdir()
    for name in names:
        if name.endswith("/"):
            (base / name).mkdir()
        else:
            (base / name).write_bytes(b"")
    return FsspecSource(str(base))


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (("repo", "snapshots/", "manifests/", "transactions/"), True),  # Icechunk 2
        (("refs/", "snapshots/", "manifests/", "chunks/"), True),  # Icechunk 1
        (("snapshots/", "manifests/", "transactions/"), True),  # its repo file lost
        (("snapshots/",), False),
        ((".zmetadata", "snapshots/", "manifests/"), False),  # arrays of a Parquet set
        (("repo", "manifests/"), False),
        ((".zmetadata", "x/"), False),  # a Parquet reference set
    ],
)
def test_a_repository_is_known_by_its_names(
    tmp_path: Path, names: tuple[str, ...], expected: bool
) -> None:
    assert is_repository(layout(tmp_path / "repo", *names)) is expected


def test_a_file_is_no_repository(tmp_path: Path) -> None:
    (tmp_path / "refs.json").write_text("{}")
    assert not is_repository(FsspecSource(str(tmp_path / "refs.json")))


def test_a_file_over_the_limit_is_refused_by_its_path() -> None:
    sizes = {"repo": 10, "snapshots/S": 11}
    limit = FileLimit(sizes.get, 10)
    limit.check("s3://bucket/repo/", "repo")
    limit.check("s3://bucket/repo/", "manifests/unknown")  # its size is left to Icechunk
    with pytest.raises(ReferenceFormatError) as caught:
        limit.check("s3://bucket/repo/", "snapshots/S")
    assert caught.value.source == "s3://bucket/repo/snapshots/S"
    assert "more than 10 bytes, the limit on a reference file" in str(caught.value)
