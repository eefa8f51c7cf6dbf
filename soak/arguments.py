"""The command line of the soak: ``python -m soak`` (``scripts/soak``), its options and the
settings they make."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from refmount.config import parse_duration, parse_size

TARGETS = ("http", "s3")
"""The kinds of target the soak can read from."""


@dataclass(frozen=True)
class Settings:
    """The options, as given (``parse`` makes them; its defaults are the only ones). Sizes and
    durations keep refmount's spelling (``--cache-size 64M`` is passed on as it is); the
    properties read them as numbers."""

    seconds: float
    threads: int
    fault_share: float
    retries: int
    timeout: str
    fetcher: str
    cache_size: str
    targets: tuple[str, ...]
    objects: int
    object_size: str
    keys: int
    max_key_size: str
    rss_slack: str
    fd_slack: int
    thread_slack: int
    seed: int
    json: Path | None
    log: Path | None

    def __post_init__(self) -> None:
        """Read every size and duration once, so that one the soak cannot read raises
        ValueError here, before anything starts."""
        for size in (self.cache_size, self.object_size, self.max_key_size, self.rss_slack):
            parse_size(size)
        parse_duration(self.timeout)

    @property
    def timeout_seconds(self) -> float:
        """``--timeout`` in seconds."""
        return parse_duration(self.timeout)

    @property
    def cache_bytes(self) -> int:
        """``--cache-size`` in bytes."""
        return parse_size(self.cache_size)

    @property
    def object_bytes(self) -> int:
        """``--object-size`` in bytes."""
        return parse_size(self.object_size)

    @property
    def max_key_bytes(self) -> int:
        """``--max-key-size`` in bytes."""
        return parse_size(self.max_key_size)

    @property
    def rss_slack_bytes(self) -> int:
        """``--rss-slack`` in bytes."""
        return parse_size(self.rss_slack)


def parser() -> argparse.ArgumentParser:
    """The options and their defaults."""
    parser = argparse.ArgumentParser(
        prog="scripts/soak",
        description="Mount a generated reference set with the real refmount command and read "
        "it with many threads for a while, through fault-injecting proxies in front of an HTTP "
        "range server and a local S3 server (moto), all on 127.0.0.1. Checks: no wrong bytes, "
        "no errors but injected faults that outlasted the retries, bounded memory, no file "
        "descriptor or thread leak. Exit status 0 when every check passes, 1 otherwise.",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to read (60)")
    parser.add_argument("--threads", type=int, default=64, help="concurrent readers (64)")
    parser.add_argument(
        "--fault-share",
        type=float,
        default=0.05,
        help="share of requests each proxy fails with a 503, a reset, a truncated body, an "
        "ignored range with a huge body, an endless body, a gzip bomb or a stall (0.05)",
    )
    parser.add_argument("--retries", type=int, default=4, help="refmount --retries (4)")
    parser.add_argument("--timeout", default="10s", help="refmount --timeout (10s)")
    parser.add_argument(
        "--fetcher", default="auto", choices=("auto", "fsspec"), help="refmount --fetcher (auto)"
    )
    parser.add_argument("--cache-size", default="64M", help="refmount --cache-size (64M)")
    parser.add_argument(
        "--targets", default="http,s3", help="comma-separated: http, s3 (both by default)"
    )
    parser.add_argument("--objects", type=int, default=8, help="target objects per target (8)")
    parser.add_argument("--object-size", default="4M", help="size of each target object (4M)")
    parser.add_argument("--keys", type=int, default=1000, help="range keys per target (1000)")
    parser.add_argument("--max-key-size", default="1M", help="largest range key (1M)")
    parser.add_argument(
        "--rss-slack",
        default="160M",
        help="allowed daemon RSS above start + cache (160M: with 64 readers, up to 64 FUSE "
        "requests of 1 MiB answered at once and up to 32 connections per host and fetch "
        "engine, each with its buffers, are outside the cache budget)",
    )
    parser.add_argument(
        "--fd-slack", type=int, default=64, help="allowed open fds above the warm-up count (64)"
    )
    parser.add_argument(
        "--thread-slack", type=int, default=8, help="allowed threads above the warm-up count (8)"
    )
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--json", type=Path, help="also write the figures and checks here")
    parser.add_argument("--log", type=Path, help="keep the daemon's log here")
    return parser


def parse(argv: list[str] | None = None) -> Settings:
    """The settings ``argv`` asks for; exit with status 2 and a usage line when they are wrong."""
    command = parser()
    args = command.parse_args(argv)
    targets = tuple(name.strip() for name in args.targets.split(",") if name.strip())
    if not targets or set(targets) - set(TARGETS):
        command.error("--targets takes http, s3 or http,s3")
    if not 0.0 <= args.fault_share <= 1.0:
        command.error("--fault-share must be between 0 and 1")
    if args.seconds <= 0 or args.threads <= 0:
        command.error("--seconds and --threads must be positive")
    try:
        return Settings(**{**vars(args), "targets": targets})
    except ValueError as error:  # a size or duration the soak cannot read
        command.error(str(error))
