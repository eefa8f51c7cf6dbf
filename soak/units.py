"""Units, and sizes and durations as refmount's options write them (``64M``, ``10s``)."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


def parse_size(text: str) -> int:
    """Bytes in ``text``: a number with an optional unit K, M or G (``4M``, ``1.5GiB``, ``512``)."""
    units = {"": 1, "K": KIB, "M": MIB, "G": GIB}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1] if text and text[-1] in units else ""
    return int(float(text.removesuffix(unit)) * units[unit])


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number of seconds (``10``, ``10s``) or of milliseconds (``500ms``)."""
    text = text.strip().lower()
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.removesuffix("s"))
