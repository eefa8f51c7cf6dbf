"""Open a reference set of any supported format: JSON (plain or compressed) or Parquet."""

from __future__ import annotations

from refmount.formats.json_refs import load_json
from refmount.formats.options import LoadOptions
from refmount.formats.sniff import is_parquet
from refmount.model import ReferenceSet, ReferenceSource


def load(source: ReferenceSource, options: LoadOptions) -> ReferenceSet:
    """Return the reference set that ``source`` holds.

    A directory, or a name ending in ``.parq``/``.parquet`` without ``.json`` in it, is a
    Parquet reference set; anything else is a JSON file, whose compression is recognised
    from its first bytes. Raises ``ReferenceFormatError`` when the set is malformed.
    """
    if is_parquet(source.url, source.is_directory()):
        from refmount.formats.parquet import load_parquet

        return load_parquet(source, options)
    return load_json(source, options)
