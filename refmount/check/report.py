"""The readable report that ``refmount check`` prints of a ``Summary``."""

from __future__ import annotations

from refmount.check.summary import UNREADABLE, Summary
from refmount.fuse.stats import human_bytes


def format_summary(summary: Summary) -> str:
    """Return a summary as the readable report that ``refmount check`` prints."""
    if summary.format == UNREADABLE:
        lines = [f"{summary.source}: cannot be read, so it cannot be mounted"]
    else:
        kind = "Parquet" if summary.format == "parquet" else "JSON"
        lines = [f"{summary.source}: {kind} reference set"]
    if summary.malformed:
        if summary.format != UNREADABLE:
            lines.append("malformed: it cannot be mounted")
    else:
        lines.extend(_contents(summary))
    if summary.warnings:
        lines.append(f"{'warnings':<12}{len(summary.warnings):,}")
        lines.extend(f"  {warning}" for warning in summary.warnings)
    if summary.served_as_stored is not None:
        lines.append(f"{'--decode':<12}{len(summary.served_as_stored):,} arrays served as stored")
        lines.extend(
            f"  {path or '(root)'}  {codec}: {reason}"
            for path, codec, reason in summary.served_as_stored
        )
    if summary.netcdf_left_out is not None:
        lines.append(f"{'--netcdf':<12}{len(summary.netcdf_left_out):,} arrays left out")
        lines.extend(f"  {path or '(root)'}  {reason}" for path, reason in summary.netcdf_left_out)
        lines.extend(f"  {line}" for line in summary.netcdf_renamed)
    if summary.problems:
        lines.append(f"{'problems':<12}{len(summary.problems):,}")
        lines.extend(f"  {problem}" for problem in summary.problems)
    else:
        lines.append(f"{'problems':<12}none")
    return "\n".join(lines)


def _contents(summary: Summary) -> list[str]:
    """Return the lines of a set that loaded: keys, arrays, targets, references, total."""
    keys = f"{summary.explicit_keys:,} explicit"
    if summary.format == "parquet":
        if summary.chunk_keys is None:
            chunks = f"chunks not counted (--quick), {summary.chunk_positions:,} positions"
        else:
            chunks = f"{summary.chunk_keys:,} chunks of {summary.chunk_positions:,} positions"
        keys = f"{keys} (metadata) + {chunks}"
    else:
        keys = f"{keys}, of which {summary.chunk_keys or 0:,} are array chunks"
    lines = [f"{'keys':<12}{keys}", f"{'arrays':<12}{len(summary.arrays):,}"]
    for array in summary.arrays:
        present = "?" if array.present is None else f"{array.present:,}"
        lines.append(
            f"  {array.path or '(root)'}  v{array.zarr_format}  shape {list(array.shape)}  "
            f"chunks {list(array.chunks)}  dtype {array.dtype}  "
            f"{present} of {array.chunk_count:,} chunks"
        )
    lines.append(f"{'targets':<12}{len(summary.targets):,}")
    for target in sorted(summary.targets.values(), key=lambda t: -t.references):
        amount = "size unknown" if target.bytes is None else human_bytes(target.bytes)
        lines.append(f"  {target.references:>10,} refs  {amount:>12}  {target.url}")
    return [*lines, *_byte_counts(summary)]


def _byte_counts(summary: Summary) -> list[str]:
    """Return the lines counting references by kind, and the bytes they span in all."""
    if summary.whole_bytes is None:
        whole = "size unknown; --sizes asks the targets"
    else:
        whole = human_bytes(summary.whole_bytes)
    total = human_bytes(summary.total_bytes)
    unknown = (
        " + whole targets of unknown size"
        if summary.whole and (summary.whole_bytes is None)
        else ""
    )
    return [
        f"{'references':<12}{summary.ranges:,} ranges ({human_bytes(summary.range_bytes)}), "
        f"{summary.inline:,} inline ({human_bytes(summary.inline_bytes)}), "
        f"{summary.whole:,} whole-target" + (f" ({whole})" if summary.whole else ""),
        f"{'total':<12}{summary.total_bytes:,} bytes ({total}){unknown}",
    ]
