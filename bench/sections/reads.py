"""The read sections, one per kind of target: local files, HTTP (nginx) and S3 (s3rver or moto),
each measured in rounds with the targets kept in the page cache."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import log
from bench.datasets import DataSet
from bench.figures import ReadFigures, median_of_rounds
from bench.raw import HttpRaw, LocalRaw, S3Raw
from bench.section import Context
from bench.sections.read_tools import Round
from bench.servers import (
    environment,
    nginx_serving,
    s3_environment,
    s3_key,
    s3_options,
    s3_server,
    s3_upload,
)
from bench.system import CpuMeter, CpuShare, Residency, resident
from bench.tools import Target, Tool


@dataclass
class ReadResult:
    """A read section's figures: the median of its rounds, each round, and the conditions."""

    figures: ReadFigures
    rounds: list[ReadFigures]
    residency: Residency
    cpu: CpuShare
    server: str | None = None
    server_note: str | None = None
    upload_s: float | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The section's JSON, as before figures were typed."""
        out: dict[str, object] = {}
        if self.server is not None:
            out["server"] = self.server
        if self.server_note is not None:
            out["s3_server_note"] = self.server_note
        if self.upload_s is not None:
            out["upload_s"] = self.upload_s
        out.update(self.figures.to_json())
        if self.residency.note is not None:
            out["residency"] = self.residency.note
        else:
            out["residency_at_start"] = self.residency.at_start
            out["residency_at_end"] = self.residency.at_end
        if len(self.rounds) > 1:
            out["rounds"] = [r.to_json() for r in self.rounds]
        out["cpu"] = dataclasses.asdict(self.cpu)
        return out


def local_target(data: DataSet) -> Target:
    """The local files as a target (its raw reader holds them open: close it)."""
    refs = data.write_refs("refs-local", str(data.big_file), str(data.many_file))
    raw = LocalRaw({"big": data.big_file, "many": data.many_file})
    return Target("local", "file", refs, [], {}, dict(os.environ), raw)


def measure_resident(target: Target, pinned: list[Path], context: Context) -> ReadResult:
    """Measure ``target`` with ``pinned`` kept in the page cache, in rounds, recording the
    residency and the CPU busy share of the section."""
    options = context.options
    with resident(pinned) as residency:
        meter = CpuMeter()
        rounds = []
        for number in range(options.rounds):
            if options.rounds > 1:
                log(f"{target.name}: round {number + 1} of {options.rounds}")
            measured = Round(target, context.data, context.workdir, options.budget, options.tools)
            rounds.append(measured.measure())
        return ReadResult(median_of_rounds(rounds), rounds, residency, meter.result())


def run_local(context: Context) -> ReadResult:
    """The local section: the generated files read in place."""
    data = context.data
    target = local_target(data)
    pinned = [data.big_file, data.many_file]
    if Tool.PLAIN in context.options.tools:
        pinned += data.write_plain_chunks()
    try:
        return measure_resident(target, pinned, context)
    finally:
        target.raw_reader.close()


def run_http(context: Context) -> ReadResult:
    """The HTTP section: the generated files served by nginx."""
    data, workdir = context.data, context.workdir
    with nginx_serving(data, workdir) as (server, urls):
        refs = data.write_refs("refs-http", urls["big"], urls["many"])
        raw = HttpRaw(urls)
        target = Target("http", "http", refs, [], {}, dict(os.environ), raw, server.pids)
        try:
            result = measure_resident(target, [data.big_file, data.many_file], context)
        finally:
            raw.close()
    result.server = server.name
    return result


def run_s3(context: Context) -> ReadResult:
    """The S3 section: the generated files uploaded to s3rver (or moto)."""
    data = context.data
    with s3_server(context.workdir) as server:
        env = s3_environment(s3_key(server))
        options = s3_options(server)
        started = time.perf_counter()
        urls = s3_upload(server, data)
        upload_s = time.perf_counter() - started
        refs = data.write_refs("refs-s3", urls["big"], urls["many"])
        refmount_options = ["-o", f"s3_endpoint_url={server.url}"]
        raw = S3Raw(urls, options)
        target = Target("s3", "s3", refs, refmount_options, options, env, raw, server.pids)
        pinned = [data.big_file, data.many_file]
        if server.directory is not None:
            pinned = [p for p in server.directory.rglob("*") if p.is_file() and ".bin" in p.name]
        with environment(env):  # the in-process fsspec and s3fs see the dummy credentials
            result = measure_resident(target, pinned, context)
    result.server, result.server_note, result.upload_s = server.name, server.note, upload_s
    return result
