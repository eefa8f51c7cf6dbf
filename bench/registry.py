"""Every section of the benchmark, in the order they run and their rows appear.

Adding a section is one module under ``bench/sections/`` that defines a ``Section`` (a name, a
function that measures and returns a result with ``to_json``, one that makes table rows of it,
and optionally lines for below the table) and one entry here; ``--only`` accepts its name.
"""

from __future__ import annotations

from typing import Any

from bench.section import Section
from bench.sections import (
    decode,
    disk_cache,
    gen,
    huge,
    icechunk,
    json_rss,
    latency,
    listing,
    netcdf,
)
from bench.sections.read_rows import rows_for, server_note, summary_for
from bench.sections.reads import run_http, run_local, run_s3


def read_section(name: str, run: Any, **extra: Any) -> Section[Any]:
    """A read section: ``run`` measures it, its rows and summary line are those of ``name``."""
    return Section(name, run, rows_for(name), summary_for(name), summarise_failure=True, **extra)


SECTIONS: tuple[Section[Any], ...] = (
    read_section("local", run_local),
    read_section("http", run_http),
    read_section("s3", run_s3, notes=server_note),
    latency.SECTION,
    disk_cache.SECTION,
    listing.SECTION,
    huge.SECTION,
    json_rss.SECTION,
    decode.SECTION,
    gen.SECTION,
    icechunk.SECTION,
    netcdf.SECTION,
)
NAMES = tuple(section.name for section in SECTIONS)
BY_NAME = {section.name: section for section in SECTIONS}
