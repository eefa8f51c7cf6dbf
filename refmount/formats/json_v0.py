"""Version 0 reference files: one JSON object mapping each key to its reference."""

from __future__ import annotations

from refmount.errors import ReferenceFormatError
from refmount.formats.options import LoadOptions
from refmount.formats.values import OnInvalid, ValueParser
from refmount.model import Reference


def parse_refs(
    refs: dict[str, object],
    parser: ValueParser,
    on_invalid: OnInvalid | None,
    consume: bool = False,
) -> dict[str, Reference]:
    """Return the references of a ``refs`` mapping, in its order.

    A malformed value raises ``ReferenceFormatError``, or, when ``on_invalid`` is given, is
    handed to it and left out. With ``consume``, each value of ``refs`` is replaced by
    ``None`` once read, so that its memory is reused for the references (a parsed
    million-key file otherwise leaves the process noticeably bigger).
    """
    out: dict[str, Reference] = {}
    parse = parser.parse
    for key, value in refs.items():
        if consume:
            refs[key] = None
        try:
            out[key] = parse(key, value)
        except ReferenceFormatError as exc:
            if on_invalid is None:
                raise
            on_invalid(exc)
    return out


def load_v0(
    document: dict[str, object],
    source: str,
    base_url: str,
    options: LoadOptions,
    on_invalid: OnInvalid | None = None,
    consume: bool = False,
) -> dict[str, Reference]:
    """Return the references of a Version 0 document (every top-level item is a key).

    ``consume`` empties the document's values as they are read (see ``parse_refs``).
    """
    return parse_refs(document, ValueParser(source, base_url, options), on_invalid, consume)
