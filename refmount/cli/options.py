"""From a command line to checked values: ``-o`` split and sorted (refmount's own options,
the S3 shortcuts, local roots, FUSE options), every option value checked before anything is
mounted, and ``parse_args``, which turns a mount's argv into a ``MountCommand``. The ``check``
subcommand takes its ``-o`` options and checks its values through the same functions.
"""

from __future__ import annotations

import argparse
import grp
import json
import os
import pwd
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refmount.cli.arguments import build_parser
from refmount.cli.status import usage_error
from refmount.config import (
    DAY,
    FETCHERS,
    FORMATS,
    KIB,
    STDIN_REFS,
    MountConfig,
    ReadConfig,
    RepositoryVersion,
    RetryConfig,
    parse_duration,
    parse_size,
    parse_umask,
)
from refmount.extras import DECODE, NETCDF
from refmount.netcdf.naming import checked_name, default_name
from refmount.ops.kernel_tuning import KernelTuning
from refmount.urls import protocol_of

IGNORED_MOUNT_OPTIONS = frozenset(
    {"defaults", "auto", "noauto", "user", "users", "nouser", "nofail", "_netdev"}
    | {"ro", "rw", "dev", "suid"}
)
"""mount(8) options that mean nothing to refmount. mount(8) adds ``rw,dev,suid`` to every
mount not marked otherwise: the mount stays read-only, and nosuid,nodev (libfuse's defaults
for a tree without devices or set-user-ID files)."""

IGNORED_MOUNT_OPTION_PREFIXES = ("x-", "X-", "comment=")
"""fstab options meant for other programs (``x-systemd.*``, ``X-mount.*``, ``comment=``)."""


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


def json_object(name: str, text: str | None) -> dict[str, Any]:
    """Parse the JSON object option ``name`` gave (None: ``{}``); raise ``ValueError`` for
    anything else."""
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
        "cache_dir",
        "cache_dir_size",
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
        "pins",
        "fetcher",
        "no_tune_kernel",
        "tune_kernel",
        "tune_read_ahead",
        "xattr",
        "nonempty",
        "max_refs_size",
        "decode",
        "zarr_format",
        "netcdf",
        "netcdf_name",
        "netcdf_eager",
        "format",
        "branch",
        "tag",
        "snapshot",
    }
)
"""refmount options that ``-o name=value`` may set, named like their command-line flags."""

FLAG_OPTIONS = frozenset(
    {"skip_invalid", "foreground", "no_pin", "no_tune_kernel", "tune_kernel", "xattr"}
    | {"nonempty", "decode", "netcdf", "netcdf_eager"}
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


def s3_options(shortcuts: Mapping[str, str | bool]) -> dict[str, Any]:
    """Return the s3fs storage options that the ``-o`` S3 shortcuts stand for."""
    options: dict[str, Any] = {}
    for name, value in shortcuts.items():
        option, inner = S3_SHORTCUTS[name]
        if inner is None:
            options[option] = value
        else:
            options.setdefault(option, {})[inner] = value
    return options


@dataclass(frozen=True, slots=True)
class OptionWords:
    """What ``-o`` gave besides the options that set a flag: the S3 shortcuts, local roots,
    and the options that are not refmount's (FUSE options, for the kernel)."""

    s3: dict[str, str | bool] = field(default_factory=dict)
    local_roots: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    fuse: list[str] = field(default_factory=list)


def take_options(args: argparse.Namespace, names: Collection[str]) -> OptionWords:
    """Apply the ``-o`` text of ``args.options`` to ``args``; return what remains of it.

    An option of ``names`` (named like its flag: ``cache_size`` is ``--cache-size``) sets
    that flag unless the command line or an earlier ``-o`` did; ``local_root`` and
    ``authorize_container``, when among ``names``, add roots and containers. The S3
    shortcuts are collected, and the rest, less the options mount(8) adds or meant for
    other programs, are FUSE options. Raises ``ValueError`` for a
    switch given a value, or another option of ``names`` or shortcut given none.
    """
    words = OptionWords()
    for text in args.options:
        for option in split_options(text):
            name, has_value, value = option.partition("=")
            own = name.replace("-", "_")
            if own in names or own in S3_SHORTCUTS:
                _check_option_form(name, own, value if has_value else None)
            if own == "local_root" and own in names:
                words.local_roots.extend(root for root in value.split(":") if root)
            elif own == "authorize_container" and own in names:
                words.containers.append(value)
            elif own in names:
                if getattr(args, own) in (None, False):  # a command-line flag wins over -o
                    setattr(args, own, value if has_value else True)
            elif own in S3_SHORTCUTS:
                words.s3[own] = value if has_value else True
            elif name not in IGNORED_MOUNT_OPTIONS and not option.startswith(
                IGNORED_MOUNT_OPTION_PREFIXES
            ):
                words.fuse.append(option)
    return words


@dataclass(frozen=True, slots=True)
class MountCommand:
    """A mount's command line, checked: the daemon's configuration, and what the command
    uses besides: the log file of the background daemon (None: it chooses), and the kernel
    tuning to apply once mounted (None: ``--no-tune-kernel``)."""

    config: MountConfig
    log_file: str | None
    tuning: KernelTuning | None


def parse_args(argv: Sequence[str]) -> MountCommand:
    """Return the mount command that ``argv`` asks for; raises ``SystemExit(2)`` on bad usage."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        words = take_options(args, _OWN_OPTIONS | {"local_root", "authorize_container"})
        check_values(args, words.s3)
    except ValueError as error:
        usage_error(str(error))
    roots = [root for text in args.local_root or () for root in text.split(":") if root]
    roots += words.local_roots
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
            refs=args.refs if args.refs == STDIN_REFS else absolute(args.refs),
            mountpoint=Path(args.mountpoint).absolute(),
            foreground=bool(args.foreground),
            fuse_options=tuple(words.fuse),
            remote_protocol=args.remote_protocol,
            remote_options=json_object("--remote-options", args.remote_options),
            refs_options=json_object("--target-options", args.target_options),
            s3_options=s3_options(words.s3),
            target=None if args.target is None else absolute(args.target),
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
            pins=None if args.pins is None else absolute(args.pins),
            cache_dir=None if args.cache_dir is None else absolute(args.cache_dir),
            cache_dir_size=None if args.cache_dir_size is None else parse_size(args.cache_dir_size),
            xattrs=bool(args.xattr),
            nonempty=bool(args.nonempty),
            max_refs_size=max_refs_size(args.max_refs_size),
            decode=bool(args.decode),
            base=None if args.base is None else absolute(args.base),
            fetcher=_fetcher(args.fetcher),
            format=format_choice(args.format),
            version=RepositoryVersion(args.branch, args.tag, args.snapshot),
            authorize_containers=tuple((args.authorize_container or []) + words.containers),
            zarr_format=zarr_format(args.zarr_format),
            netcdf=netcdf_name(args),
            netcdf_eager=bool(args.netcdf_eager),
        )
        tuning = kernel_tuning(args)
    except ValueError as error:
        usage_error(str(error))
    return MountCommand(config=config, log_file=args.log_file, tuning=tuning)


def netcdf_name(args: argparse.Namespace) -> str | None:
    """Return the name of the ``--netcdf`` file, or None without one; raise ``ValueError``
    for a name no file can have."""
    if args.netcdf_name is not None:
        return checked_name(args.netcdf_name)
    if args.netcdf or args.netcdf_eager:
        return default_name(args.refs)
    return None


def _fetcher(name: str | None) -> str:
    if name is None:
        return "auto"
    if name not in FETCHERS:
        raise ValueError(f"fetcher must be one of {', '.join(FETCHERS)}, not {name!r}")
    return name


def zarr_format(value: str | None) -> int | None:
    """Return the ``--zarr-format`` asked for (None: as stored); ``ValueError`` unless 2 or 3."""
    if value is None:
        return None
    if value.strip() not in ("2", "3"):
        raise ValueError(f"--zarr-format must be 2 or 3, not {value!r}")
    return int(value)


def format_choice(name: str | None) -> str:
    """Return the ``--format`` asked for (None: ``auto``); raise ``ValueError`` for a name
    that is not one of ``FORMATS``."""
    if name is None:
        return "auto"
    if name not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {name!r}")
    return name


def _check_option_form(name: str, own: str, value: str | None) -> None:
    """Raise ``ValueError`` unless a switch has no value and any other option has one."""
    if own in FLAG_OPTIONS:
        if value is not None:
            raise ValueError(f"-o {name} is a switch and takes no value (not {name}={value})")
    elif value is None or not value.strip():
        raise ValueError(f"-o {name} needs a value: {name}=...")


def check_values(args: argparse.Namespace, shortcuts: Mapping[str, str | bool]) -> None:
    """Raise ``ValueError`` for option values that would only fail once mounted (or, for
    ``refmount check``, once loading); a flag the command lacks is not checked."""
    for flag in ("refs", "target", "remote_protocol", "log_file", "base", "branch", "tag"):
        value = getattr(args, flag, None)
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"{_flag(flag)} must not be empty")
    for flag in ("pins", "cache_dir"):
        value = getattr(args, flag, None)
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"{_flag(flag)} must not be empty")
    mountpoint = getattr(args, "mountpoint", None)
    if mountpoint is not None and not mountpoint.strip():  # Path("") would be the current dir
        raise ValueError("MOUNTPOINT must not be empty")
    log_level = getattr(args, "log_level", None)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, not {log_level!r}")
    if args.remote_protocol is not None:
        _check_protocol(args.remote_protocol)
    log_file = getattr(args, "log_file", None)
    if log_file is not None:
        _check_log_file(log_file)
    if getattr(args, "pins", None) is not None and getattr(args, "no_pin", False):
        raise ValueError("--pins and --no-pin exclude each other")
    if getattr(args, "cache_dir", None) is not None and getattr(args, "no_pin", False):
        raise ValueError(
            "--cache-dir needs pinning (a cached range is kept under its target's version): "
            "not with --no-pin"
        )
    if (
        getattr(args, "cache_dir_size", None) is not None
        and getattr(args, "cache_dir", None) is None
    ):
        raise ValueError("--cache-dir-size needs --cache-dir")
    if getattr(args, "decode", False):
        missing = DECODE.missing()
        if missing is not None:
            raise ValueError(missing)
    if any(getattr(args, flag, None) for flag in ("netcdf", "netcdf_name", "netcdf_eager")):
        missing = NETCDF.missing()
        if missing is not None:
            raise ValueError(missing)
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


def max_refs_size(text: str | None) -> int | None:
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


def absolute(url: str) -> str:
    """Make a local path absolute: the daemon's working directory means nothing."""
    return url if protocol_of(url) is not None else os.path.abspath(url)
