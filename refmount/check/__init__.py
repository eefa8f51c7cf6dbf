"""``refmount check``: validate a reference set without mounting it, and summarise it.

``validate`` loads and checks a set (``check_references``) and sizes its targets on request
(``ask_sizes``, a coroutine: the caller runs it), ``summary`` holds what it found
(``Summary``, also as JSON), ``report`` prints it (``format_summary``), ``versions`` records
the targets' versions (``record_versions``, for ``refmount pin``) and compares them with a
pins file (``compare_with_pins``); ``targets`` asks every target, a few at a time.
"""

from refmount.check.report import format_summary
from refmount.check.summary import UNREADABLE, ArrayInfo, Problem, Summary, TargetInfo
from refmount.check.validate import SizeOf, ask_sizes, check_references
from refmount.check.versions import VersionOf, compare_with_pins, record_versions

__all__ = [
    "UNREADABLE",
    "ArrayInfo",
    "Problem",
    "SizeOf",
    "Summary",
    "TargetInfo",
    "VersionOf",
    "ask_sizes",
    "check_references",
    "compare_with_pins",
    "format_summary",
    "record_versions",
]
