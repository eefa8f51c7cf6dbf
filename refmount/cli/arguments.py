"""The ``refmount`` mount command's arguments: its usage, description and help, and
``build_parser``, the one declaration of its flags (the Python API derives its keywords from
it)."""

from __future__ import annotations

import argparse

from refmount.release import __version__

USAGE = """\
refmount [options] REFS MOUNTPOINT
       refmount [options] [--branch NAME | --tag NAME | --snapshot ID] REPO MOUNTPOINT
       refmount check [options] REFS
       refmount pin [options] REFS > pins.json
       refmount cache warm --cache-dir DIR [options] REFS [KEY_PREFIX...]
       refmount cache clear DIR
       refmount stats [--format {text,json,prometheus}] MOUNTPOINT"""

DESCRIPTION = """\
Mount a kerchunk/fsspec reference set as a read-only directory tree.

REFS is a reference file or directory: JSON version 0 or 1 (optionally gzip/zstd/bz2/xz
compressed) or a Parquet reference directory, local or at any fsspec URL (s3://, https://,
simplecache::...). Every key becomes a file; '/' in keys makes directories; reads become
byte-range reads of the targets.

REPO is an Icechunk repository (a local directory, recognised by its layout, or with
--format icechunk an s3:// or gs:// URL), mounted at one snapshot: the tip of --branch
(default main), --tag or --snapshot, resolved once at mount time. Its zarr.json files and
every chunk written are files; chunks are read through Icechunk, which checks each virtual
chunk against its commit. Needs: pip install 'refmount[icechunk]' (Python 3.12 or later).

subcommands (only as the first argument):
  check REFS     validate a reference set without mounting it and summarise it
                 (refmount check --help)
  pin REFS       print the version of every target, for --pins (refmount pin --help)
  cache warm REFS, cache clear DIR
                 fill a --cache-dir for a set, or empty one (refmount cache --help)
  stats MNT      show the counters and latencies of a mounted refmount
                 (refmount stats --help)
To mount a reference file literally called 'cache', 'check', 'pin' or 'stats', write
./check, or put '--' first: refmount -- check /mnt/data
"""

EPILOG = """\
-o takes comma-separated mount options. FUSE options (allow_other, allow_root,
auto_unmount, default_permissions, ...) go to the kernel; refmount's own options can be
given the same way, which is what /etc/fstab needs:
  cache_size=SIZE  cache_dir=DIR  cache_dir_size=SIZE  remote_protocol=P
  remote_options=JSON  target_options=JSON  target=URL  skip_invalid  log_level=LEVEL
  log_file=PATH  foreground
  timeout=DURATION  retries=N  attr_timeout=DURATION  local_root=DIR[:DIR...]
  uid=N  gid=N  umask=MASK  no_pin  fetcher=ENGINE  no_tune_kernel  tune_read_ahead=SIZE
  xattr  nonempty  decode  zarr_format=N  max_refs_size=SIZE  format=FORMAT  pins=FILE
  netcdf  netcdf_name=NAME  netcdf_eager
  branch=NAME  tag=NAME  snapshot=ID  authorize_container=PREFIX (repeatable)
and shortcuts for S3 (s3fs), applied to targets and to REFS:
  s3_endpoint_url=URL  s3_region=REGION  s3_anon  s3_requester_pays
default_permissions is always on: the kernel enforces the modes (0444 files, 0555
directories, less the umask). With allow_other or allow_root, local targets must lie
under a --local-root directory, or the mount is refused.

examples:
  refmount refs.json /mnt/data
  refmount -o allow_other,cache_size=2G s3://bucket/refs.parq /mnt/data
  refmount --remote-options '{"anon": true}' https://host/refs.json.zst /mnt/data
  refmount --tag v1 --authorize-container all /data/repo /mnt/data
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
        "--cache-dir",
        metavar="DIR",
        help="keep fetched ranges of remote targets in DIR (created 0700), shared by every "
        "mount naming it and kept across mounts; keyed by each target's pinned version",
    )
    parser.add_argument(
        "--cache-dir-size",
        metavar="SIZE",
        help="the most --cache-dir may hold (default: 10G or a tenth of its free space, "
        "whichever is smaller); least recently used targets go first",
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
        "--pins",
        metavar="FILE",
        help="pin each target to the version FILE records (written by refmount pin) instead "
        "of the one met at first use, so every mount of a cluster serves one version; a "
        "target that differs fails its reads with EIO",
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
    parser.add_argument(
        "--zarr-format",
        metavar="{2,3}",
        help="2: serve zarr v3 groups and arrays as zarr v2 (.zgroup, .zarray, .zattrs, "
        "chunks named I.J, codecs mapped) for readers of v2 only, such as GDAL 3.6 and "
        "netCDF-C 4.9; an array with no v2 form is served as stored, with a warning; with "
        "--decode, arrays are also decoded. 3 or absent: as stored",
    )
    parser.add_argument(
        "--netcdf",
        action="store_true",
        help="add one read-only file to the root: a netCDF-4 (HDF5) file of the whole set, "
        "for every netCDF and HDF5 program (named after REFS: refs.json gives refs.nc)",
    )
    parser.add_argument(
        "--netcdf-name",
        metavar="NAME",
        help="the netCDF file's name (implies --netcdf)",
    )
    parser.add_argument(
        "--netcdf-eager",
        action="store_true",
        help="lay the netCDF file out at mount, not at its first use (implies --netcdf)",
    )
    parser.add_argument(
        "--format",
        metavar="FORMAT",
        help="auto (default): an Icechunk repository is recognised by its layout, anything "
        "else is a kerchunk reference set; kerchunk or icechunk: say which",
    )
    parser.add_argument(
        "--branch", metavar="NAME", help="Icechunk: mount the tip of this branch (default main)"
    )
    parser.add_argument("--tag", metavar="NAME", help="Icechunk: mount the snapshot of this tag")
    parser.add_argument("--snapshot", metavar="ID", help="Icechunk: mount this snapshot")
    parser.add_argument(
        "--authorize-container",
        metavar="PREFIX",
        action="append",
        help="Icechunk: let virtual chunks be read from the repository's virtual chunk "
        "container with this URL prefix (repeatable; all: every container it declares); "
        "a chunk of any other container fails with EACCES",
    )
    parser.add_argument("--version", action="version", version=f"refmount {__version__}")
    return parser
