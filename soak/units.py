"""Units of the soak's figures; its sizes and durations are read as refmount's options are
(``refmount.config.parse_size`` and ``parse_duration``)."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
