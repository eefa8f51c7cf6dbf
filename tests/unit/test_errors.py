"""Tests of the exception tree: what each error says and carries."""

from __future__ import annotations

import errno

from refmount.errors import FilesystemError, ReferenceFormatError


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
