"""Version 0 reference files: one JSON object mapping each key to its reference."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from refmount.errors import OnInvalid, ReferenceFormatError
from refmount.formats.compact import CompactReferences
from refmount.formats.options import PROGRESS_STEP, LoadOptions, Progress
from refmount.formats.values import ValueParser


def parse_refs(
    refs: dict[str, object],
    parser: ValueParser,
    on_invalid: OnInvalid | None,
    consume: bool = False,
    progress: Progress | None = None,
) -> CompactReferences:
    """Return the references of a ``refs`` mapping, in its order, stored compactly.

    A malformed value raises ``ReferenceFormatError``, or, when ``on_invalid`` is given, is
    handed to it and left out. With ``consume``, each value of ``refs`` is replaced by
    ``None`` once read, so that its memory is reused for the references (a parsed
    million-key file otherwise leaves the process noticeably bigger). ``progress`` is told
    ``(keys read, total)`` after every ``PROGRESS_STEP`` keys and at the end.
    """
    out = CompactReferences(unique_keys=True)  # the keys of one JSON object
    total = len(refs)
    if progress is None:
        _parse_items(iter(refs.items()), refs, out, parser, on_invalid, consume)
        return out
    items = iter(refs.items())
    done = 0
    while done < total:
        step = min(PROGRESS_STEP, total - done)
        _parse_items(itertools.islice(items, step), refs, out, parser, on_invalid, consume)
        done += step
        progress(done, total)
    return out


def _parse_items(
    items: Iterator[tuple[str, object]],
    refs: dict[str, object],
    out: CompactReferences,
    parser: ValueParser,
    on_invalid: OnInvalid | None,
    consume: bool,
) -> None:
    parse_into = parser.parse_into
    for key, value in items:
        if consume:
            refs[key] = None
        try:
            parse_into(key, value, out)
        except ReferenceFormatError as exc:
            if on_invalid is None:
                raise
            on_invalid(exc)


def load_v0(
    document: dict[str, object],
    source: str,
    base_url: str,
    options: LoadOptions,
    on_invalid: OnInvalid | None = None,
    consume: bool = False,
) -> CompactReferences:
    """Return the references of a Version 0 document (every top-level item is a key).

    ``consume`` empties the document's values as they are read (see ``parse_refs``).
    """
    parser = ValueParser(source, base_url, options)
    return parse_refs(document, parser, on_invalid, consume, options.progress)
