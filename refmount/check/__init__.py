"""``refmount check``: validate a reference set without mounting it, and summarise it.

``validate`` loads and checks a set (``check_references``) and sizes its targets on request
(``ask_sizes``, a coroutine: the caller runs it), ``summary`` holds what it found
(``Summary``, also as JSON), ``report`` prints it (``format_summary``).
"""

from refmount.check.report import format_summary
from refmount.check.summary import UNREADABLE, ArrayInfo, Problem, Summary, TargetInfo
from refmount.check.validate import SizeOf, ask_sizes, check_references

__all__ = [
    "UNREADABLE",
    "ArrayInfo",
    "Problem",
    "SizeOf",
    "Summary",
    "TargetInfo",
    "ask_sizes",
    "check_references",
    "format_summary",
]
