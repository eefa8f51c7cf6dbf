"""The huge section: a Parquet set of millions of references (5 M at full scale) mounted by
refmount: time to ready, one chunk, streamed and full listings, and the daemon's memory."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from bench.common import MIB, log
from bench.datasets import make_huge
from bench.goals import Row, absolute
from bench.measure import RssSampler, streamed_listing, timed_command
from bench.section import Context, Section
from bench.sections.reads import local_target
from bench.tools import Tool


@dataclass
class HugeFigures:
    """What refmount and fsspec did with the huge set (field names are the JSON's keys)."""

    references: int
    ready_s: float = 0.0
    rss_after_mount_mib: float | None = None
    chunk_read_s: float = 0.0
    chunk_ok: bool = False
    rss_after_chunk_mib: float | None = None
    ls_f_first_entry_s: float | str = ""
    ls_f_s: float | str = ""
    ls_f_entries_listed: int = 0
    ls_f_entries_per_s: float = 0.0
    ls_l_s: float | str = ""
    rss_peak_during_listing_mib: float = 0.0
    daemon_peak_rss_mib: float | None = None
    fsspec_open_and_cat_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        """Every field by name."""
        return dataclasses.asdict(self)


def run(context: Context) -> HugeFigures:
    """Mount the huge set, read one chunk, list it (``ls -f``, ``ls -l``), then open it with
    fsspec and read the same chunk."""
    references = max(100, int(5_000_000 * context.options.scale))
    log(f"huge: writing {references} Parquet references")
    root, key = make_huge(context.workdir / "huge", references, context.data.big_file)
    result = HugeFigures(references)
    target = local_target(context.data)
    target.raw_reader.close()
    timeout = context.options.ls_timeout
    with target.refmount(context.workdir, root) as mount:
        result.ready_s = mount.ready_seconds
        result.rss_after_mount_mib = mount.rss().get("VmRSS")
        started = time.perf_counter()
        chunk = (mount.path / "v" / key).read_bytes()
        result.chunk_read_s = time.perf_counter() - started
        result.chunk_ok = len(chunk) == 100
        result.rss_after_chunk_mib = mount.rss().get("VmRSS")
        with RssSampler(mount.process.pid) as sampler:
            streamed = streamed_listing(mount.path / "v", timeout)
            result.ls_f_first_entry_s = streamed.first_entry_s
            result.ls_f_s = streamed.all_s
            result.ls_f_entries_listed = streamed.entries_listed
            result.ls_f_entries_per_s = streamed.entries_per_s
            result.ls_l_s = timed_command(["ls", "-l", str(mount.path / "v")], timeout)
        result.rss_peak_during_listing_mib = sampler.peak
        result.daemon_peak_rss_mib = mount.rss().get("VmHWM")
    started = time.perf_counter()
    fs = target.reference_fs(root)
    fs.cat(f"v/{key}")
    result.fsspec_open_and_cat_s = time.perf_counter() - started
    return result


def rows(huge: HugeFigures) -> list[Row]:
    """Ready, the listings and the peak RSS, with the goals of the large sets."""
    under_a_second = absolute(lambda v: v < 1.0)
    return [
        Row(
            f"huge {huge.references} Parquet refs: ready",
            "s",
            {Tool.REFMOUNT: huge.ready_s, Tool.CAT: huge.fsspec_open_and_cat_s},
            False,
            "< 1 s",
            under_a_second,
        ),
        Row(
            "huge: ls -f time to first entry",
            "s",
            {Tool.REFMOUNT: huge.ls_f_first_entry_s},
            False,
            "streams (< 1 s)",
            under_a_second,
        ),
        Row("huge: ls -f all", "s", {Tool.REFMOUNT: huge.ls_f_s}, False),
        Row("huge: ls -f rate", "names/s", {Tool.REFMOUNT: huge.ls_f_entries_per_s}, True),
        Row("huge: ls -l all", "s", {Tool.REFMOUNT: huge.ls_l_s}, False),
        Row(
            "huge: daemon peak RSS (VmHWM)",
            "MiB",
            {Tool.REFMOUNT: huge.daemon_peak_rss_mib},
            False,
            "< 200 MB (190.7 MiB)",
            absolute(lambda v: v < 200e6 / MIB),
        ),
    ]


SECTION = Section("huge", run, rows)
