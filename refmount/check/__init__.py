"""``refmount check``: validate a reference set without mounting it, and summarise it.

``validate`` loads and checks a set (``check_references``) and sizes its targets on request
(``ask_sizes``, a coroutine: the caller runs it), ``repository`` opens and checks an Icechunk
repository at one snapshot (``check_repository``), ``summary`` holds what they found
(``Summary``, also as JSON), ``report`` prints it (``format_summary``), ``versions`` records
the targets' versions (``record_versions``, for ``refmount pin``) and compares them with a
pins file (``compare_with_pins``); ``targets`` asks every target, a few at a time.
"""

from refmount.check.report import format_summary
from refmount.check.repository import REPOSITORY_FORMAT, check_repository
from refmount.check.summary import (
    UNREADABLE,
    ArrayInfo,
    ContainerInfo,
    Problem,
    RepositoryInfo,
    Summary,
    TargetInfo,
)
from refmount.check.validate import SizeOf, ask_sizes, check_references
from refmount.check.versions import VersionOf, compare_with_pins, record_versions

__all__ = [
    "REPOSITORY_FORMAT",
    "UNREADABLE",
    "ArrayInfo",
    "ContainerInfo",
    "Problem",
    "RepositoryInfo",
    "SizeOf",
    "Summary",
    "TargetInfo",
    "VersionOf",
    "ask_sizes",
    "check_references",
    "check_repository",
    "compare_with_pins",
    "format_summary",
    "record_versions",
]
