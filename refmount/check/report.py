"""The readable report that ``refmount check`` prints of a ``Summary``."""

from __future__ import annotations

from refmount.check.summary import UNREADABLE, RepositoryInfo, Summary
from refmount.fuse.stats import human_bytes


def format_summary(summary: Summary) -> str:
    """Return a summary as the readable report that ``refmount check`` prints."""
    if summary.format == UNREADABLE:
        lines = [f"{summary.source}: cannot be read, so it cannot be mounted"]
    else:
        kind = _KINDS.get(summary.format, "JSON reference set")
        lines = [f"{summary.source}: {kind}"]
    if summary.malformed:
        if summary.format != UNREADABLE:
            lines.append("malformed: it cannot be mounted")
    elif summary.repository is not None:
        lines.extend(_repository(summary, summary.repository))
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
    if summary.served_as_v3 is not None:
        count = len(summary.served_as_v3)
        lines.append(f"{'--zarr-format 2':<12}{count:,} arrays served as stored (zarr v3)")
        lines.extend(
            f"  {path or '(root)'}  {codec}: {reason}"
            for path, codec, reason in summary.served_as_v3
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


_KINDS = {"parquet": "Parquet reference set", "icechunk": "Icechunk repository"}
"""How the report's first line names each ``Summary.format`` (else: a JSON set)."""


def _repository(summary: Summary, repository: RepositoryInfo) -> list[str]:
    """Return the lines of a repository that opened: snapshot, containers, chunks, arrays."""
    lines = [
        f"{'snapshot':<12}{repository.snapshot} ({repository.version})",
        f"{'containers':<12}{len(repository.containers):,} virtual chunk containers declared",
    ]
    for container in repository.containers:
        state = "authorized" if container.authorized else "not authorized"
        lines.append(f"  {container.prefix}  {state}  {container.chunks:,} chunks point into it")
    kinds = repository.chunk_kinds
    lines.append(
        f"{'chunks':<12}{summary.chunk_keys or 0:,} of {summary.chunk_positions:,} positions: "
        + ", ".join(f"{count:,} {kind}" for kind, count in kinds.items())
    )
    return [*lines, *_array_lines(summary)]


def _array_lines(summary: Summary) -> list[str]:
    """Return the count of arrays, then one line for each: shape, chunks, dtype, chunks."""
    lines = [f"{'arrays':<12}{len(summary.arrays):,}"]
    for array in summary.arrays:
        present = "?" if array.present is None else f"{array.present:,}"
        lines.append(
            f"  {array.path or '(root)'}  v{array.zarr_format}  shape {list(array.shape)}  "
            f"chunks {list(array.chunks)}  dtype {array.dtype}  "
            f"{present} of {array.chunk_count:,} chunks"
        )
    return lines


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
    lines = [f"{'keys':<12}{keys}", *_array_lines(summary)]
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
