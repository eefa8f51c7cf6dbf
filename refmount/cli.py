"""The ``refmount`` command: argv and ``-o`` options to a ``MountConfig``, logging, exit codes,
and detaching into the background once the mount answers."""

from __future__ import annotations

import argparse
import contextlib
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
from typing import IO, Any, NoReturn

from refmount.config import (
    DAY,
    FETCHERS,
    KIB,
    STDIN_REFS,
    MountConfig,
    ReadConfig,
    RetryConfig,
    default_max_refs_size,
    parse_duration,
    parse_size,
    parse_umask,
)
from refmount.errors import MountError, ReferenceFormatError, RefmountError
from refmount.ops.kernel_tuning import KernelTuning
from refmount.ops.logs import ProgressReporter, detach_logging, setup_logging
from refmount.release import __version__
from refmount.urls import protocol_of

log = logging.getLogger("refmount")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

READY_FD_VARIABLE = "REFMOUNT_READY_FD"
"""Set by a backgrounding parent: the pipe its daemon child reports readiness on."""

LIFELINE_FD_VARIABLE = "REFMOUNT_LIFELINE_FD"
"""Set by a parent that owns the mount (the Python API): a pipe whose end means 'unmount'."""


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
       refmount stats [--format {text,json,prometheus}] MOUNTPOINT"""

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
  uid=N  gid=N  umask=MASK  no_pin  fetcher=ENGINE  no_tune_kernel  tune_read_ahead=SIZE
  xattr  nonempty  decode  max_refs_size=SIZE
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

MOUNTPOINT must be an empty directory (unless -o nonempty) with no FUSE filesystem
mounted on it already; automount points and bind mounts are fine.

exit status: 0 mounted (or unmounted cleanly with -f), 1 the mount failed (the
mountpoint is refused before REFS is read), 2 bad arguments or option values, or a
malformed reference file.
"""


MAX_REFS_SIZE_HELP = (
    "largest reference file, as stored and once decompressed, and most memory its gen "
    "keys may take, e.g. 2G (default: 16G or half the available memory, whichever is less)"
)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``refmount`` command."""
    parser = argparse.ArgumentParser(
        prog="refmount",
        usage=USAGE,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "refs", metavar="REFS", help="reference file, directory or URL; - reads JSON from stdin"
    )
    parser.add_argument("mountpoint", metavar="MOUNTPOINT", help="empty directory (see --nonempty)")
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
        "--base",
        metavar="DIR",
        help="with REFS - (a JSON document on standard input): the directory or URL that "
        "relative target paths are relative to (without it they are refused; every node's "
        "mtime is the time of the mount)",
    )
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
    parser.add_argument("--max-refs-size", metavar="SIZE", help=MAX_REFS_SIZE_HELP)
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
        "--fetcher",
        metavar="ENGINE",
        help="auto (default): S3, HTTP(S), GCS and Azure targets are read through obstore "
        "where their options map onto it, everything else through fsspec; fsspec: "
        "everything through fsspec",
    )
    parser.add_argument(
        "--no-tune-kernel",
        action="store_true",
        help="keep the kernel's readahead and background request limits; by default, as "
        "root, they are raised through sysfs once mounted (readahead 16M, max_background "
        "64, congestion_threshold 48; fusectl mounted if missing)",
    )
    parser.add_argument(
        "--tune-kernel",
        action="store_true",
        help="the default as root; given, a failure to tune is logged as a warning",
    )
    parser.add_argument(
        "--tune-read-ahead",
        metavar="SIZE",
        help="the readahead the kernel tuning sets, e.g. 4M, 64M (implies --tune-kernel)",
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
        "--nonempty",
        action="store_true",
        help="mount even if MOUNTPOINT has entries (the mount hides them until unmounted); "
        "without it such a mountpoint is refused",
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
        "fetcher",
        "no_tune_kernel",
        "tune_kernel",
        "tune_read_ahead",
        "xattr",
        "nonempty",
        "max_refs_size",
        "decode",
    }
)
"""refmount options that ``-o name=value`` may set, named like their command-line flags."""

FLAG_OPTIONS = frozenset(
    {"skip_invalid", "foreground", "no_pin", "no_tune_kernel", "tune_kernel", "xattr"}
    | {"nonempty", "decode"}
    | {"s3_anon", "s3_requester_pays"}
)
"""``-o`` options that are switches: given as a bare name, never ``name=value``."""

LOG_LEVELS = ("debug", "info", "warning", "error")

MAX_ID = 2**32 - 2
"""The largest user or group id (``2**32 - 1`` is ``(uid_t) -1``, "no id")."""

MAX_RETRIES = 100
"""The most retries ``--retries`` accepts: more would only hide a dead target."""

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
    try:
        for text in args.options:
            for option in split_options(text):
                name, has_value, value = option.partition("=")
                own = name.replace("-", "_")
                if own in _OWN_OPTIONS or own in S3_SHORTCUTS or own == "local_root":
                    _check_option_form(name, own, value if has_value else None)
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
        _check_values(args, shortcuts)
    except ValueError as error:
        _usage_error(str(error))
    try:
        defaults = RetryConfig()
        read = ReadConfig(
            **({"cache_size": parse_size(args.cache_size)} if args.cache_size is not None else {})
        )
        retry = RetryConfig(
            timeout=defaults.timeout if args.timeout is None else _timeout(args.timeout),
            retries=defaults.retries if args.retries is None else _count("retries", args.retries),
        )
        if args.base is not None and args.refs != STDIN_REFS:
            raise ValueError("--base applies only to REFS - (a document on standard input)")
        config = MountConfig(
            refs=args.refs if args.refs == STDIN_REFS else _absolute(args.refs),
            mountpoint=Path(args.mountpoint).absolute(),
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
            attr_timeout=DAY if args.attr_timeout is None else parse_duration(args.attr_timeout),
            local_roots=tuple(_local_root(root) for root in roots),
            uid=None if args.uid is None else _id("uid", args.uid, pwd.getpwnam),
            gid=None if args.gid is None else _id("gid", args.gid, grp.getgrnam),
            umask=None if args.umask is None else parse_umask(str(args.umask)),
            pin_versions=not args.no_pin,
            xattrs=bool(args.xattr),
            nonempty=bool(args.nonempty),
            max_refs_size=_max_refs_size(args.max_refs_size),
            decode=bool(args.decode),
            base=None if args.base is None else _absolute(args.base),
            fetcher=_fetcher(args.fetcher),
        )
        args.kernel_tuning = kernel_tuning(args)
    except ValueError as error:
        _usage_error(str(error))
    return config, args


def _fetcher(name: str | None) -> str:
    if name is None:
        return "auto"
    if name not in FETCHERS:
        raise ValueError(f"fetcher must be one of {', '.join(FETCHERS)}, not {name!r}")
    return name


def _usage_error(message: str) -> NoReturn:
    """Stop with one line and exit status 2: a bad option value, found before mounting."""
    print(f"refmount: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT)


def _check_option_form(name: str, own: str, value: str | None) -> None:
    """Raise ``ValueError`` unless a switch has no value and any other option has one."""
    if own in FLAG_OPTIONS:
        if value is not None:
            raise ValueError(f"-o {name} is a switch and takes no value (not {name}={value})")
    elif value is None or not value.strip():
        raise ValueError(f"-o {name} needs a value: {name}=...")


def _check_values(args: argparse.Namespace, shortcuts: dict[str, str | bool]) -> None:
    """Raise ``ValueError`` for option values that would only fail once mounted."""
    for flag in ("refs", "target", "remote_protocol", "log_file", "base"):
        value = getattr(args, flag)
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"{_flag(flag)} must not be empty")
    if not args.mountpoint.strip():  # Path("") would be the current directory
        raise ValueError("MOUNTPOINT must not be empty")
    if args.log_level is not None and args.log_level not in LOG_LEVELS:
        raise ValueError(
            f"log_level must be one of {', '.join(LOG_LEVELS)}, not {args.log_level!r}"
        )
    if args.remote_protocol is not None:
        _check_protocol(args.remote_protocol)
    if args.log_file is not None:
        _check_log_file(args.log_file)
    endpoint = shortcuts.get("s3_endpoint_url")
    if isinstance(endpoint, str) and protocol_of(endpoint) not in ("http", "https"):
        raise ValueError(f"s3_endpoint_url must be an http:// or https:// URL, not {endpoint!r}")


def _check_protocol(name: str) -> None:
    from refmount.store.options import is_known_protocol  # imports fsspec: only when asked

    if not is_known_protocol(name):
        raise ValueError(f"--remote-protocol {name!r} is not a protocol fsspec knows")


def _flag(dest: str) -> str:
    return {"refs": "REFS"}.get(dest, "--" + dest.replace("_", "-"))


def _check_log_file(path: str) -> None:
    """Raise ``ValueError`` unless the daemon will be able to append to ``path``."""
    if os.path.isdir(path):
        raise ValueError(f"--log-file {path}: is a directory")
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            raise ValueError(f"--log-file {path}: not writable")
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(f"--log-file {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise ValueError(f"--log-file {path}: cannot create a file in {directory}")


def _timeout(text: str) -> float:
    seconds = parse_duration(str(text))
    if seconds <= 0:
        raise ValueError(f"timeout must be more than 0, not {text!r}")
    return seconds


def _max_refs_size(text: str | None) -> int | None:
    """Parse ``--max-refs-size`` (None: the default); a cap of 0 bytes is refused."""
    if text is None:
        return None
    size = parse_size(str(text))
    if size < 1:
        raise ValueError(f"--max-refs-size must be at least 1 byte, not {text!r}")
    return size


def kernel_tuning(args: argparse.Namespace) -> KernelTuning | None:
    """Return the kernel tuning to apply as root: the default one, the one
    ``--tune-kernel``/``--tune-read-ahead`` ask for, or None with ``--no-tune-kernel``."""
    asked = bool(args.tune_kernel) or args.tune_read_ahead is not None
    if args.no_tune_kernel:
        if asked:
            raise ValueError("no_tune_kernel contradicts tune_kernel and tune_read_ahead")
        return None
    if args.tune_read_ahead is not None:
        size = parse_size(str(args.tune_read_ahead))
        if size < KIB:
            raise ValueError(f"tune_read_ahead {args.tune_read_ahead}: at least 1K")
        return KernelTuning(read_ahead_kb=size // KIB, asked=True)
    return KernelTuning(asked=asked)


def _local_root(text: str) -> str:
    path = os.path.abspath(text)
    if not os.path.isdir(path):
        raise ValueError(f"--local-root {text}: not a directory")
    return path


def _id(name: str, text: str, by_name: Callable[[str], Any]) -> int:
    """Return a numeric user or group id, looking a name up if need be."""
    text = str(text)
    if text.isdigit():
        number = int(text)
        if number > MAX_ID:
            raise ValueError(f"{name} {text} is out of range (0 to {MAX_ID})")
        return number
    try:
        return int(by_name(text)[2])
    except KeyError:
        raise ValueError(f"{name} must be a number or a known name, not {text!r}") from None


def _count(name: str, text: str) -> int:
    if not str(text).isdigit():
        raise ValueError(f"{name} must be a whole number, not {text!r}")
    if int(text) > MAX_RETRIES:
        raise ValueError(f"{name} {text} is too many (at most {MAX_RETRIES})")
    return int(text)


def _absolute(url: str) -> str:
    """Make a local path absolute: the daemon's working directory means nothing."""
    return url if protocol_of(url) is not None else os.path.abspath(url)


READY_MESSAGE = b"ready\n"
"""What the daemon child writes on the readiness pipe once the mount answers."""

BACKGROUND_INTERPRETER_FLAGS = ("-P",)
"""How the background child's interpreter starts: ``-P`` (Python 3.11+, the project's minimum)
leaves out the one unsafe entry of ``sys.path``, the current directory that ``-m`` puts first,
so a ``refmount.py`` or ``refmount/`` where the command was started is never imported (as
whoever mounts, often root). ``-I`` would do that too, but it also drops ``PYTHONPATH`` and
the user's site directory, where a ``pip install --user`` or an administrator's
``PYTHONPATH`` puts the package: with ``-P`` the child finds ``refmount`` exactly where the
console script that started it did (a venv, a user install, or a ``pip install -e`` checkout,
whose import hook lives in site-packages)."""


def _inherited_fd(variable: str) -> int | None:
    """Take the descriptor a parent named in ``variable``: made non-inheritable at once, so
    no program we start holds it (libfuse runs ``fusermount3``, which stays alive with
    ``-o auto_unmount``); None when there is none."""
    text = os.environ.pop(variable, None)
    if text is None or not text.isdigit():
        return None
    fd = int(text)
    try:
        os.set_inheritable(fd, False)
    except OSError:  # not a descriptor we were given
        return None
    return fd


def _readiness_reporter(args: argparse.Namespace) -> Callable[[], None]:
    """Take the readiness pipe a backgrounding parent gave us (if any); return what to call
    once the mount answers.

    The parent waits for ``READY_MESSAGE``, not for the end of the pipe, so it returns even
    if a program we started held the pipe.
    """
    fd = _inherited_fd(READY_FD_VARIABLE)
    if fd is None:
        return lambda: None

    def ready() -> None:
        detach_logging(args.log_file, str(args.mountpoint))
        os.write(fd, READY_MESSAGE)
        os.close(fd)

    return ready


def background_command(argv: Sequence[str]) -> list[str]:
    """Return the command line of the daemon child that ``run_in_background`` starts."""
    return [
        sys.executable,
        *BACKGROUND_INTERPRETER_FLAGS,
        "-m",
        "refmount",
        "--foreground",
        *argv,
    ]


def launch(
    argv: Sequence[str],
    *,
    stdin: int | bytes | None = subprocess.DEVNULL,
    stderr: int | IO[bytes] | None = None,
    lifeline: int | None = None,
) -> tuple[subprocess.Popen[bytes], bool]:
    """Start the daemon for ``argv`` as a child in its own session; return it and whether it
    is mounted, once it is mounted or has failed.

    ``stdin`` is what the child reads (bytes: a reference document for REFS ``-``, written
    through a pipe only the child reads; None: ours). ``lifeline`` is the read end of a pipe
    whose end makes the daemon unmount (the caller keeps the write end and closes the read
    end after this returns).
    """
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    env[READY_FD_VARIABLE] = str(write_end)
    fds = [write_end]
    if lifeline is not None:
        env[LIFELINE_FD_VARIABLE] = str(lifeline)
        fds.append(lifeline)
    document = stdin if isinstance(stdin, bytes) else None
    child = subprocess.Popen(
        background_command(argv),
        stdin=subprocess.PIPE if isinstance(stdin, bytes) else stdin,
        stderr=stderr,
        pass_fds=fds,
        env=env,
        start_new_session=True,
    )
    os.close(write_end)
    if document is not None and child.stdin is not None:
        with contextlib.suppress(BrokenPipeError):  # the child stopped before reading it
            child.stdin.write(document)
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.readline()  # the message, or EOF once the child is gone
    return child, message == READY_MESSAGE


def run_in_background(argv: Sequence[str], stdin_refs: bool = False) -> int:
    """Start the daemon as a child in its own session; return once it is mounted or failed.

    With ``stdin_refs`` (REFS ``-``) the child reads the reference document from our stdin.
    """
    child, ready = launch(argv, stdin=None if stdin_refs else subprocess.DEVNULL)
    return EXIT_OK if ready else child.wait() or EXIT_FAILURE


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
        return run_in_background(argv, stdin_refs=config.refs == STDIN_REFS)
    on_ready = _readiness_reporter(args)  # first: nothing we start may inherit the pipe
    lifeline = _inherited_fd(LIFELINE_FD_VARIABLE)
    setup_logging(config.log_level, journald="JOURNAL_STREAM" in os.environ)
    debug = config.log_level == "debug"
    from refmount import daemon  # the heavy imports, only once the arguments are good

    problem = daemon.fuse_options_problem(daemon.fuse_options(config))
    if problem is not None:
        print(f"refmount: error: FUSE options: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        daemon.check_mountpoint(config.mountpoint, config.nonempty)  # cheaper than loading
        loaded = daemon.load_references(config, ProgressReporter(config.refs, sys.stderr))
        tuning = getattr(args, "kernel_tuning", None)
        daemon.mount_and_serve(config, loaded, on_ready, tuning, lifeline)
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
    "max_refs_size",
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
    parser.add_argument("--max-refs-size", metavar="SIZE", help="as for mounting")
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
    try:
        for text in args.options:
            for option in split_options(text):
                name, has_value, value = option.partition("=")
                own = name.replace("-", "_")
                if own in _CHECK_OPTIONS or own in S3_SHORTCUTS:
                    _check_option_form(name, own, value if has_value else None)
                if own in _CHECK_OPTIONS:
                    if getattr(args, own) in (None, False):  # a flag given wins over -o
                        setattr(args, own, value if has_value else True)
                elif own in S3_SHORTCUTS:
                    shortcuts[own] = value if has_value else True
        for flag in ("refs", "target", "remote_protocol"):
            value = getattr(args, flag)
            if isinstance(value, str) and not value.strip():
                raise ValueError(f"{_flag(flag)} must not be empty")
        if args.remote_protocol is not None:
            _check_protocol(args.remote_protocol)
        target_options = _json_object("--target-options", args.target_options)
        remote_options = _json_object("--remote-options", args.remote_options)
        cap = _max_refs_size(args.max_refs_size) or default_max_refs_size()
        cache_size = parse_size(args.cache_size) if args.cache_size else ReadConfig().cache_size
    except ValueError as error:
        _usage_error(str(error))
    setup_logging("warning", journald="JOURNAL_STREAM" in os.environ)
    from refmount import check  # the heavy imports, only once the arguments are good
    from refmount.formats import LoadOptions
    from refmount.store.options import StorageOptions
    from refmount.store.sources import FsspecSource
    from refmount.store.store import Store

    refs = _absolute(args.refs)
    s3 = _s3_options(shortcuts)
    try:
        source = FsspecSource(refs, StorageOptions(target_options, s3), cap)
    except (OSError, ValueError, ImportError) as error:
        print(f"refmount: error: {refs}: cannot open: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = LoadOptions(
        target=None if args.target is None else _absolute(args.target),
        remote_protocol=args.remote_protocol,
        progress=ProgressReporter(refs, sys.stderr),
        max_size=cap,
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
cat MOUNTPOINT/.refmount-stats shows the same. --format prometheus prints Prometheus' text
exposition format (counters, and a latency histogram per operation), for node_exporter's
textfile collector, e.g. every minute from cron or a systemd timer:
  refmount stats --format prometheus /mnt/data > /var/lib/node_exporter/refmount.prom.tmp
  mv /var/lib/node_exporter/refmount.prom.tmp /var/lib/node_exporter/refmount.prom
exit status: 0 shown, 1 MOUNTPOINT is not a refmount mount.
"""

STATS_FORMATS = ("text", "json", "prometheus")


class StatsUnavailable(RefmountError):
    """``MOUNTPOINT`` has no statistics to show; the message says why."""


def read_snapshot(mountpoint: Path) -> dict[str, Any]:
    """Return the statistics snapshot of the refmount mounted on ``mountpoint`` (what
    ``refmount stats --json`` prints); raise ``StatsUnavailable`` explaining why not."""
    from refmount.fuse.stats import STATS_FILE

    try:
        raw = (mountpoint / STATS_FILE).read_bytes()
        snapshot = json.loads(raw)
        if not isinstance(snapshot, dict) or "operations" not in snapshot:
            raise ValueError(
                f"{STATS_FILE} is not refmount's statistics (the reference set has a key "
                "of that name, which hides them)"
            )
    except OSError as error:
        raise StatsUnavailable(_stats_problem(mountpoint, error)) from None
    except ValueError as error:
        raise StatsUnavailable(f"{mountpoint}: unreadable statistics: {error}") from None
    return snapshot


def stats_main(argv: Sequence[str]) -> int:
    """Run ``refmount stats``; return 0, or 1 when MOUNTPOINT is not a refmount mount."""
    from refmount.fuse.stats import format_snapshot, prometheus_text

    parser = argparse.ArgumentParser(
        prog="refmount stats",
        description=STATS_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("mountpoint", metavar="MOUNTPOINT", type=Path, help="a refmount mount")
    parser.add_argument(
        "--format",
        choices=STATS_FORMATS,
        default="text",
        help="text (default): tables; json: the snapshot; prometheus: the text exposition "
        "format, every sample labelled with the mountpoint",
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="--format json"
    )
    args = parser.parse_args(argv)
    mountpoint: Path = args.mountpoint
    try:
        snapshot = read_snapshot(mountpoint)
    except StatsUnavailable as error:
        print(f"refmount: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    if args.format == "json":
        print(json.dumps(snapshot, indent=2))
    elif args.format == "prometheus":
        labels = {"mountpoint": os.path.abspath(mountpoint)}
        sys.stdout.write(prometheus_text(snapshot, labels))
    else:
        print(format_snapshot(snapshot))
    return EXIT_OK


def _stats_problem(mountpoint: Path, error: OSError) -> str:
    """Explain why ``mountpoint`` has no statistics to show."""
    from refmount.fuse.stats import STATS_FILE

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
