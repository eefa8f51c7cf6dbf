"""Reference-set formats: JSON v0/v1 (plain or compressed) and Parquet; no I/O on targets."""

from refmount.formats.load import load
from refmount.formats.options import LoadOptions

__all__ = ["LoadOptions", "load"]
