"""``refmount check``: validate a reference set without mounting it, and summarise it.

``validate`` loads and checks a set (``check_references``) and sizes its targets on request
(``ask_sizes``, a coroutine: the caller runs it), ``repository`` opens and checks an Icechunk
repository at one snapshot (``check_repository``), ``summary`` holds what they found
(``Summary``, also as JSON), ``report`` prints it (``format_summary``).
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
    "ask_sizes",
    "check_references",
    "check_repository",
    "format_summary",
]
