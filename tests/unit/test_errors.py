"""Tests of the exception tree: what each error says and carries."""

from __future__ import annotations

import errno

import pytest

from refmount.errors import (
    FilesystemError,
    RecentFailureError,
    ReferenceFormatError,
    ShortReadError,
    TargetAccessError,
    TargetChangedError,
    TargetError,
    TargetReadError,
)


def test_a_format_error_names_the_file_and_key_on_one_line() -> None:
    error = ReferenceFormatError(
        "refs.parq/x/refs.0.parq", None, "not readable: Couldn't deserialize thrift.\n"
    )
    assert str(error) == "refs.parq/x/refs.0.parq: not readable: Couldn't deserialize thrift."
    keyed = ReferenceFormatError("refs.json", "a/0", "bad value:\n  [1, 2\n")
    assert str(keyed) == "refs.json: key 'a/0': bad value: [1, 2"
    assert keyed.problem == "bad value: [1, 2"


def test_filesystem_errors_carry_their_errno() -> None:
    assert FilesystemError(errno.ENOENT).errno == errno.ENOENT
    assert str(FilesystemError(errno.ENOENT)) == "ENOENT"


@pytest.mark.parametrize(
    ("error", "words", "retryable"),
    [
        (TargetReadError("s3://b/o", "timed out", retryable=True), "reading: timed out", True),
        (TargetAccessError("s3://b/o", "denied"), "s3://b/o): denied", False),
        (TargetChangedError("s3://b/o", "ETag a", "ETag b"), "reading: the target changed", False),
        (ShortReadError("s3://b/o", 10, 4), "reading: target returned 4 bytes", True),
    ],
)
def test_a_target_error_names_the_key_the_url_and_what_failed(
    error: TargetError, words: str, retryable: bool
) -> None:
    assert str(error).startswith("s3://b/o: ")  # the store and the read path know the URL
    assert error.key is None
    error.during("reading").after_attempts(3).for_key("x/0.0")  # a refusal stays as it is
    assert str(error).startswith("key 'x/0.0' (s3://b/o): ")
    assert words in str(error)
    assert str(error).endswith(" (after 3 attempts)")
    assert error.retryable is retryable


def test_a_recent_failure_repeats_the_failure_with_its_errno() -> None:
    refused = TargetAccessError("/etc/x", "outside the local roots")
    again = RecentFailureError(refused).for_key("k")
    assert again.errno == errno.EACCES
    assert str(again) == "key 'k' (/etc/x): failed a moment ago: outside the local roots"
