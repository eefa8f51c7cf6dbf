"""The ``refmount`` command: argv and ``-o`` options to a ``MountConfig``, logging, exit codes,
and detaching into the background once the mount answers."""

from __future__ import annotations

import argparse
import errno
import grp
import json
import logging
import logging.handlers
import os
import pwd
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from refmount import __version__
from refmount.config import (
    DAY,
    KIB,
    MountConfig,
    ReadConfig,
    RetryConfig,
    parse_duration,
    parse_size,
    parse_umask,
)
from refmount.console import ProgressReporter, detach_logging, setup_logging
from refmount.errors import MountError, ReferenceFormatError, RefmountError
from refmount.kernel import KernelTuning
from refmount.urls import protocol_of

log = logging.getLogger("refmount")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

READY_FD_VARIABLE = "REFMOUNT_READY_FD"
"""Set by a backgrounding parent: the pipe its daemon child reports readiness on."""

IGNORED_MOUNT_OPTIONS = frozenset(
    {"defaults", "auto", "noauto", "user", "users", "nouser", "nofail", "_netdev"}
    | {"ro", "rw", "dev", "suid"}
)
"""mount(8) options that mean nothing to refmount. mount(8) adds ``rw,dev,suid`` to every
mount not marked otherwise: the mount stays read-only, and nosuid,nodev (libfuse's defaults
for a tree without devices or set-user-ID files)."""

IGNORED_MOUNT_OPTION_PREFIXES = ("x-", "X-", "comment=")
"""fstab options meant for other programs (``x-systemd.*``, ``X-mount.*``, ``comment=``)."""

SUBCOMMANDS = ("check", "stats")
"""Words that, as the first argument, select a subcommand instead of naming REFS."""

USAGE = """\
refmount [options] REFS MOUNTPOINT
       refmount check [options] REFS
       refmount stats [--json] MOUNTPOINT"""

DESCRIPTION = """\
Mount a kerchunk/fsspec reference set as a read-only directory tree.

REFS is a reference file or directory: JSON version 0 or 1 (optionally gzip/zstd/bz2/xz
compressed) or a Parquet reference directory, local or at any fsspec URL (s3://, https://,
simplecache::...). Every key becomes a file; '/' in keys makes directories; reads become
byte-range reads of the targets.

subcommands (only as the first argument):
  check REFS     validate a reference set without mounting it and summarise it
                 (refmount check --help)
  stats MNT      show the counters and latencies of a mounted refmount
                 (refmount stats --help)
To mount a reference file literally called 'check' or 'stats', write ./check, or put
'--' first: refmount -- check /mnt/data
"""

EPILOG = """\
-o takes comma-separated mount options. FUSE options (allow_other, allow_root,
auto_unmount, default_permissions, ...) go to the kernel; refmount's own options can be
given the same way, which is what /etc/fstab needs:
  cache_size=SIZE  remote_protocol=P  remote_options=JSON  target_options=JSON
  target=URL  skip_invalid  log_level=LEVEL  log_file=PATH  foreground
  timeout=DURATION  retries=N  attr_timeout=DURATION  local_root=DIR[:DIR...]
  uid=N  gid=N  umask=MASK  no_pin  tune_kernel  tune_read_ahead=SIZE  xattr
  decode
and shortcuts for S3 (s3fs), applied to targets and to REFS:
  s3_endpoint_url=URL  s3_region=REGION  s3_anon  s3_requester_pays
default_permissions is always on: the kernel enforces the modes (0444 files, 0555
directories, less the umask). With allow_other or allow_root, local targets must lie
under a --local-root directory, or the mount is refused.

examples:
  refmount refs.json /mnt/data
  refmount -o allow_other,cache_size=2G s3://bucket/refs.parq /mnt/data
  refmount --remote-options '{"anon": true}' https://host/refs.json.zst /mnt/data
  fusermount3 -u /mnt/data          # unmount

exit status: 0 mounted (or unmounted cleanly with -f), 1 the mount failed,
2 bad arguments or a malformed reference file.
"""


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``refmount`` command."""
    parser = argparse.ArgumentParser(
        prog="refmount",
        usage=USAGE,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("refs", metavar="REFS", help="reference file, directory or URL")
    parser.add_argument("mountpoint", metavar="MOUNTPOINT", type=Path, help="empty directory")
    parser.add_argument(
        "-f", "--foreground", action="store_true", help="stay attached instead of detaching"
    )
    parser.add_argument(
        "-o",
        dest="options",
        action="append",
        default=[],
        metavar="OPT[,OPT...]",
        help="mount options, see below",
    )
    parser.add_argument(
        "--remote-protocol",
        metavar="P",
        help="protocol for target URLs that have none (default: local paths, relative "
        "to the reference file's directory)",
    )
    parser.add_argument(
        "--remote-options",
        metavar="JSON",
        help="fsspec storage options for targets: one object for every protocol, or "
        'per protocol: \'{"s3": {...}, "https": {...}}\'',
    )
    parser.add_argument(
        "--target-options", metavar="JSON", help="fsspec storage options for opening REFS"
    )
    parser.add_argument("--target", metavar="URL", help="target of references whose URL is null")
    parser.add_argument(
        "--cache-size",
        metavar="SIZE",
        help="memory for fetched data, e.g. 512M (default), 4G",
    )
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip keys that cannot be mounted (with one warning each) instead of refusing",
    )
    parser.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="how much to log (default: info); debug also shows tracebacks",
    )
    parser.add_argument(
        "--log-file",
        metavar="PATH",
        help="log here once in the background (default: syslog's /dev/log, else the "
        "journal's socket, else a rotated file, 10 MiB x 4, named after the mountpoint in "
        "/var/log/refmount as root or ~/.local/state/refmount, whose path the command prints)",
    )
    parser.add_argument(
        "--attr-timeout",
        metavar="DURATION",
        help="how long the kernel may cache names and attributes (default: 1 day; the "
        "reference set never changes while mounted)",
    )
    parser.add_argument(
        "--timeout",
        metavar="DURATION",
        help="time limit of one request to a target, e.g. 30s (default), 500ms",
    )
    parser.add_argument(
        "--retries",
        metavar="N",
        help="how many times a failed request is tried again (default 4) on connection "
        "errors, timeouts, 5xx, 408, 429 and short bodies, with exponential backoff",
    )
    parser.add_argument(
        "--local-root",
        metavar="DIR",
        action="append",
        help="with -o allow_other or allow_root: a directory local targets may lie in "
        "(repeatable, or DIR:DIR...); any other local target refuses the mount",
    )
    parser.add_argument("--uid", metavar="N", help="owner of every file (default: you)")
    parser.add_argument("--gid", metavar="N", help="group of every file (default: yours)")
    parser.add_argument(
        "--umask",
        metavar="MASK",
        help="octal bits taken away from 0444 (files) and 0555 (directories), e.g. 027",
    )
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="do not pin each target's ETag or mtime at first use (a target that changes "
        "while mounted may then mix two versions)",
    )
    parser.add_argument(
        "--tune-kernel",
        action="store_true",
        help="as root: raise the connection's readahead (16M) and background request "
        "limits (max_background 64, congestion_threshold 48) through sysfs once mounted",
    )
    parser.add_argument(
        "--tune-read-ahead",
        metavar="SIZE",
        help="the readahead --tune-kernel sets, e.g. 4M, 64M (implies --tune-kernel)",
    )
    parser.add_argument(
        "--xattr",
        action="store_true",
        help="give every file the extended attributes user.refmount.{kind,url,offset,length}; "
        "off by default, because it makes the kernel ask the daemon about ACL and "
        "security attributes once per file (ls -l on a big directory gets several times "
        "slower)",
    )
    parser.add_argument(
        "--decode",
        action="store_true",
        help="serve arrays decoded (no compressor or filters, little-endian, C order) for "
        "readers that lack their codecs; off by default (the referenced bytes as stored)",
    )
    parser.add_argument("--version", action="version", version=f"refmount {__version__}")
    return parser


def split_options(text: str) -> list[str]:
    """Split ``-o`` text on commas that are not inside JSON brackets or quotes."""
    parts: list[str] = []
    depth = 0
    quote = False
    current: list[str] = []
    for char in text:
        if char == '"':
            quote = not quote
        elif not quote and char in "{[":
            depth += 1
        elif not quote and char in "}]":
            depth -= 1
        if char == "," and depth == 0 and not quote:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _json_object(name: str, text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{name} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object")
    return value


_OWN_OPTIONS = frozenset(
    {
        "cache_size",
        "remote_protocol",
        "remote_options",
        "target_options",
        "target",
        "skip_invalid",
        "log_level",
        "log_file",
        "foreground",
        "attr_timeout",
        "timeout",
        "retries",
        "uid",
        "gid",
        "umask",
        "no_pin",
        "tune_kernel",
        "tune_read_ahead",
        "xattr",
        "decode",
    }
)
"""refmount options that ``-o name=value`` may set, named like their command-line flags."""

S3_SHORTCUTS = {
    "s3_anon": ("anon", None),
    "s3_endpoint_url": ("endpoint_url", None),
    "s3_region": ("client_kwargs", "region_name"),
    "s3_requester_pays": ("requester_pays", None),
}
"""``-o`` shortcuts for the S3 storage options of s3fs (for targets and the reference file)."""


def _s3_options(shortcuts: dict[str, str | bool]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, value in shortcuts.items():
        option, inner = S3_SHORTCUTS[name]
        if inner is None:
            options[option] = value
        else:
            options.setdefault(option, {})[inner] = value
    return options


def parse_args(argv: Sequence[str]) -> tuple[MountConfig, argparse.Namespace]:
    """Return the mount configuration for ``argv``; raises ``SystemExit(2)`` on bad usage."""
    parser = build_parser()
    args = parser.parse_args(argv)
    fuse: list[str] = []
    shortcuts: dict[str, str | bool] = {}
    roots = [root for text in args.local_root or () for root in text.split(":") if root]
    for text in args.options:
        for option in split_options(text):
            name, has_value, value = option.partition("=")
            own = name.replace("-", "_")
            if own == "local_root":
                roots.extend(root for root in value.split(":") if root)
            elif own in _OWN_OPTIONS:
                if getattr(args, own) in (None, False):  # a command-line flag wins over -o
                    setattr(args, own, value if has_value else True)
            elif own in S3_SHORTCUTS:
                shortcuts[own] = value if has_value else True
            elif name not in IGNORED_MOUNT_OPTIONS and not option.startswith(
                IGNORED_MOUNT_OPTION_PREFIXES
            ):
                fuse.append(option)
    try:
        defaults = RetryConfig()
        read = ReadConfig(
            **({"cache_size": parse_size(args.cache_size)} if args.cache_size else {})
        )
        retry = RetryConfig(
            timeout=parse_duration(args.timeout) if args.timeout else defaults.timeout,
            retries=_count("retries", args.retries) if args.retries else defaults.retries,
        )
        config = MountConfig(
            refs=_absolute(args.refs),
            mountpoint=args.mountpoint.absolute(),
            foreground=bool(args.foreground),
            fuse_options=tuple(fuse),
            remote_protocol=args.remote_protocol,
            remote_options=_json_object("--remote-options", args.remote_options),
            target_options=_json_object("--target-options", args.target_options),
            s3_options=_s3_options(shortcuts),
            target=None if args.target is None else _absolute(args.target),
            skip_invalid=bool(args.skip_invalid),
            log_level=args.log_level or "info",
            read=read,
            retry=retry,
            attr_timeout=parse_duration(args.attr_timeout) if args.attr_timeout else DAY,
            local_roots=tuple(_local_root(root) for root in roots),
            uid=None if args.uid is None else _id("uid", args.uid, pwd.getpwnam),
            gid=None if args.gid is None else _id("gid", args.gid, grp.getgrnam),
            umask=None if args.umask is None else parse_umask(str(args.umask)),
            pin_versions=not args.no_pin,
            xattrs=bool(args.xattr),
            decode=bool(args.decode),
        )
        args.kernel_tuning = kernel_tuning(args)
    except ValueError as error:
        parser.error(str(error))
    return config, args


def kernel_tuning(args: argparse.Namespace) -> KernelTuning | None:
    """Return the kernel tuning that ``--tune-kernel``/``--tune-read-ahead`` ask for, or None."""
    if args.tune_read_ahead:
        size = parse_size(str(args.tune_read_ahead))
        if size < KIB:
            raise ValueError(f"tune_read_ahead {args.tune_read_ahead}: at least 1K")
        return KernelTuning(read_ahead_kb=size // KIB)
    return KernelTuning() if args.tune_kernel else None


def _local_root(text: str) -> str:
    path = os.path.abspath(text)
    if not os.path.isdir(path):
        raise ValueError(f"--local-root {text}: not a directory")
    return path


def _id(name: str, text: str, by_name: Callable[[str], Any]) -> int:
    """Return a numeric user or group id, looking a name up if need be."""
    text = str(text)
    if text.isdigit():
        return int(text)
    try:
        return int(by_name(text)[2])
    except KeyError:
        raise ValueError(f"{name} must be a number or a known name, not {text!r}") from None


def _count(name: str, text: str) -> int:
    if not str(text).isdigit():
        raise ValueError(f"{name} must be a whole number, not {text!r}")
    return int(text)


def _absolute(url: str) -> str:
    """Make a local path absolute: the daemon's working directory means nothing."""
    return url if protocol_of(url) is not None else os.path.abspath(url)


def _readiness_reporter(args: argparse.Namespace) -> Callable[[], None]:
    """Return what to call once the mount answers (tell a waiting parent, if any)."""
    text = os.environ.pop(READY_FD_VARIABLE, None)
    if text is None:
        return lambda: None
    fd = int(text)

    def ready() -> None:
        detach_logging(args.log_file, str(args.mountpoint))
        os.write(fd, b"ready\n")
        os.close(fd)

    return ready


def run_in_background(argv: Sequence[str]) -> int:
    """Start the daemon as a child in its own session; return once it is mounted or failed."""
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    env[READY_FD_VARIABLE] = str(write_end)
    child = subprocess.Popen(
        [sys.executable, "-m", "refmount", "--foreground", *argv],
        stdin=subprocess.DEVNULL,
        pass_fds=(write_end,),
        env=env,
        start_new_session=True,
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read()
    if message.startswith(b"ready"):
        return EXIT_OK
    return child.wait() or EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``refmount`` command; return its exit status.

    A first argument of ``check`` or ``stats`` selects that subcommand; anything else
    (including ``--`` before a reference file called ``check``) is a mount.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "check":
        return check_main(argv[1:])
    if argv and argv[0] == "stats":
        return stats_main(argv[1:])
    config, args = parse_args(argv)
    if not config.foreground:
        return run_in_background(argv)
    setup_logging(config.log_level, journald="JOURNAL_STREAM" in os.environ)
    debug = config.log_level == "debug"
    from refmount import daemon  # the heavy imports, only once the arguments are good

    try:
        loaded = daemon.load_references(config, ProgressReporter(config.refs, sys.stderr))
        daemon.mount_and_serve(
            config, loaded, _readiness_reporter(args), getattr(args, "kernel_tuning", None)
        )
    except ReferenceFormatError as error:
        _report(error, debug)
        return EXIT_BAD_INPUT
    except (MountError, RefmountError) as error:
        _report(error, debug)
        return EXIT_FAILURE
    return EXIT_OK


def _report(error: Exception, debug: bool) -> None:
    if debug:
        log.error("refmount failed", exc_info=error)
    print(f"refmount: error: {error}", file=sys.stderr)


# ---------------------------------------------------------------------- check

CHECK_DESCRIPTION = """\
Validate a reference set without mounting it: load it as a mount would, but collect every
problem (each with its key) instead of stopping at the first, and summarise the set: keys,
arrays (shape, chunks, dtype), targets and the bytes referenced.
"""

CHECK_EPILOG = """\
-o accepts the mount's options; those that concern reading REFS and its targets apply
(remote_protocol, remote_options, target_options, target, s3_endpoint_url, s3_region,
s3_anon, s3_requester_pays), and decode and cache_size; the others are ignored.

exit status: 0 no problems, 2 the set is malformed or has problems (or bad arguments).
"""

_CHECK_OPTIONS = (
    "remote_protocol",
    "remote_options",
    "target_options",
    "target",
    "decode",
    "cache_size",
)


def build_check_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``refmount check``."""
    parser = argparse.ArgumentParser(
        prog="refmount check",
        description=CHECK_DESCRIPTION,
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("refs", metavar="REFS", help="reference file, directory or URL")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="do not read the record files of a Parquet set (chunks are not counted)",
    )
    parser.add_argument(
        "--sizes",
        action="store_true",
        help="ask every target for its size: sizes whole-target references and finds "
        "ranges that end beyond their target",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT...]")
    parser.add_argument("--remote-protocol", metavar="P", help="as for mounting")
    parser.add_argument("--remote-options", metavar="JSON", help="as for mounting (--sizes)")
    parser.add_argument("--target-options", metavar="JSON", help="as for mounting")
    parser.add_argument("--target", metavar="URL", help="as for mounting")
    parser.add_argument(
        "--decode",
        action="store_true",
        help="list the arrays a --decode mount would serve as stored, and why",
    )
    parser.add_argument(
        "--cache-size", metavar="SIZE", help="as for mounting (--decode: its quarter rule)"
    )
    return parser


def check_main(argv: Sequence[str]) -> int:
    """Run ``refmount check``; return 0 for a clean set, 2 for problems or bad arguments."""
    parser = build_check_parser()
    args = parser.parse_args(argv)
    shortcuts: dict[str, str | bool] = {}
    for text in args.options:
        for option in split_options(text):
            name, has_value, value = option.partition("=")
            own = name.replace("-", "_")
            if own in _CHECK_OPTIONS:
                if getattr(args, own) in (None, False):
                    setattr(args, own, value if has_value else True)
            elif own in S3_SHORTCUTS:
                shortcuts[own] = value if has_value else True
    try:
        target_options = _json_object("--target-options", args.target_options)
        remote_options = _json_object("--remote-options", args.remote_options)
        cache_size = parse_size(args.cache_size) if args.cache_size else ReadConfig().cache_size
    except ValueError as error:
        parser.error(str(error))
    setup_logging("warning", journald="JOURNAL_STREAM" in os.environ)
    from refmount import check  # the heavy imports, only once the arguments are good
    from refmount.formats import LoadOptions
    from refmount.store import FsspecSource, StorageOptions, Store

    refs = _absolute(args.refs)
    s3 = _s3_options(shortcuts)
    try:
        source = FsspecSource(refs, StorageOptions(target_options, s3))
    except (OSError, ValueError, ImportError) as error:
        print(f"refmount: error: {refs}: cannot open: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = LoadOptions(
        target=None if args.target is None else _absolute(args.target),
        remote_protocol=args.remote_protocol,
        progress=ProgressReporter(refs, sys.stderr),
    )
    store = Store(StorageOptions(remote_options, s3)) if args.sizes else None
    summary = check.check_references(
        source,
        options,
        quick=args.quick,
        size_of=None if store is None else store.size,
        scan_progress=ProgressReporter(refs, sys.stderr, unit="chunk rows", verb="scanning"),
        decode_cache=cache_size if args.decode else None,
    )
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(check.format_summary(summary))
    return EXIT_OK if summary.ok else EXIT_BAD_INPUT


# ---------------------------------------------------------------------- stats

STATS_DESCRIPTION = """\
Show the counters and latencies of a mounted refmount: requests, errors and latency
percentiles per FUSE operation, reads, bytes served, target fetches, cache hits, retries.
They are read from the file .refmount-stats in the mount's root (a JSON snapshot taken
when it is opened; the file is not listed), so no network port is involved:
cat MOUNTPOINT/.refmount-stats shows the same. exit status: 0 shown, 1 MOUNTPOINT is not a
refmount mount.
"""


def stats_main(argv: Sequence[str]) -> int:
    """Run ``refmount stats``; return 0, or 1 when MOUNTPOINT is not a refmount mount."""
    from refmount.stats import STATS_FILE, format_snapshot

    parser = argparse.ArgumentParser(
        prog="refmount stats",
        description=STATS_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("mountpoint", metavar="MOUNTPOINT", type=Path, help="a refmount mount")
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    args = parser.parse_args(argv)
    mountpoint: Path = args.mountpoint
    try:
        raw = (mountpoint / STATS_FILE).read_bytes()
        snapshot = json.loads(raw)
        if not isinstance(snapshot, dict) or "operations" not in snapshot:
            raise ValueError(
                f"{STATS_FILE} is not refmount's statistics (the reference set has a key "
                "of that name, which hides them)"
            )
    except OSError as error:
        print(f"refmount: error: {_stats_problem(mountpoint, error)}", file=sys.stderr)
        return EXIT_FAILURE
    except ValueError as error:
        print(f"refmount: error: {mountpoint}: unreadable statistics: {error}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(snapshot, indent=2))
    else:
        print(format_snapshot(snapshot))
    return EXIT_OK


def _stats_problem(mountpoint: Path, error: OSError) -> str:
    """Explain why ``mountpoint`` has no statistics to show."""
    from refmount.stats import STATS_FILE

    if error.errno == errno.ENOTCONN:
        return (
            f"{mountpoint} is a stale FUSE mount (Transport endpoint is not connected): "
            "its daemon is gone"
        )
    if not mountpoint.exists():
        return f"{mountpoint} does not exist"
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        if not os.path.ismount(mountpoint):
            return (
                f"{mountpoint} is not a refmount mount (not a mountpoint; give the "
                "directory the set is mounted on)"
            )
        return f"{mountpoint} is not a refmount mount (it has no {STATS_FILE} file)"
    return f"{mountpoint}: {error.strerror or error}"
