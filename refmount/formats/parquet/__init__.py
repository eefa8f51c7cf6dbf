"""Parquet reference sets (fsspec's ``LazyReferenceMapper`` layout), read lazily with pyarrow.

``load`` reads ``.zmetadata`` and probes one record file; ``references`` is the
``ReferenceSet`` whose chunk rows come from record files on demand; ``records`` parses and
reads one record file; ``record_cache`` keeps the parsed ones.
"""

from refmount.formats.parquet.decoding import COLUMN_SETS
from refmount.formats.parquet.load import load_parquet
from refmount.formats.parquet.references import (
    SKIP_LOADS,
    ParquetReferenceSet,
    record_directory,
    record_name,
)

__all__ = [
    "COLUMN_SETS",
    "SKIP_LOADS",
    "ParquetReferenceSet",
    "load_parquet",
    "record_directory",
    "record_name",
]
