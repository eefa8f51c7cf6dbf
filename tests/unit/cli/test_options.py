"""``-o`` splitting and every option value's check: a mount's argv to a ``MountCommand``
(no mounting)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from refmount.cli.options import parse_args, split_options
from refmount.config import GIB, MIB, RepositoryVersion
from refmount.ops.kernel_tuning import KernelTuning


def test_split_options_keeps_json_together() -> None:
    text = 'allow_other,remote_options={"s3": {"anon": true, "x": [1,2]}},cache_size=1G'
    assert split_options(text) == [
        "allow_other",
        'remote_options={"s3": {"anon": true, "x": [1,2]}}',
        "cache_size=1G",
    ]
    assert split_options('target="a,b",ro') == ['target="a,b"', "ro"]
    assert split_options(" , a ,, b ") == ["a", "b"]


def test_defaults(tmp_path: Path) -> None:
    config = parse_args(["refs.json", str(tmp_path)]).config
    assert config.refs == os.path.abspath("refs.json")
    assert config.mountpoint == tmp_path
    assert not config.foreground
    assert config.fuse_options == ()
    assert config.read.cache_size == 512 * MIB
    assert config.remote_options == {}


def test_remote_references_stay_urls(tmp_path: Path) -> None:
    for url in ("s3://bucket/refs.json", "simplecache::https://h/r.json"):
        config = parse_args([url, str(tmp_path)]).config
        assert config.refs == url


def test_own_options_through_o(tmp_path: Path) -> None:
    config = parse_args(
        [
            "-o",
            "allow_other,cache_size=2G,remote_protocol=s3,skip_invalid,foreground",
            "-o",
            'remote_options={"anon": true},target=/data/t.nc,defaults,auto,_netdev',
            "refs.json",
            str(tmp_path),
        ]
    ).config
    assert config.fuse_options == ("allow_other",)
    assert config.read.cache_size == 2 * GIB
    assert config.remote_protocol == "s3"
    assert config.remote_options == {"anon": True}
    assert config.target == "/data/t.nc"
    assert config.skip_invalid
    assert config.foreground


def test_repository_options(tmp_path: Path) -> None:
    config = parse_args(["repo", str(tmp_path)]).config
    assert (config.format, config.version, config.authorize_containers) == (
        "auto",
        RepositoryVersion(),
        (),
    )
    config = parse_args(
        [
            "--format",
            "icechunk",
            "--tag",
            "v1",
            "--authorize-container",
            "s3://bucket/data/",
            "-o",
            "authorize_container=file:///data/,authorize_container=all",
            "repo",
            str(tmp_path),
        ]
    ).config
    assert config.format == "icechunk"
    assert config.version == RepositoryVersion(tag="v1")
    assert config.authorize_containers == ("s3://bucket/data/", "file:///data/", "all")
    config = parse_args(["-o", "format=kerchunk,snapshot=ABC", "repo", str(tmp_path)]).config
    assert (config.format, config.version.snapshot) == ("kerchunk", "ABC")


def test_command_line_flags_win_over_o(tmp_path: Path) -> None:
    config = parse_args(
        ["--cache-size", "1G", "-o", "cache_size=2G", "refs.json", str(tmp_path)]
    ).config
    assert config.read.cache_size == GIB


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--remote-options", "{bad"], "--remote-options is not valid JSON"),
        (["--remote-options", "[1]"], "must be a JSON object"),
        (["--cache-size", "lots"], "not a size"),
        (["--attr-timeout", "soon"], "not a duration"),
        (["--format", "hdf5"], "format must be one of auto, kerchunk, icechunk"),
        (["--branch", "dev", "--tag", "v1"], "at most one of --branch, --tag and --snapshot"),
        (["-o", "tag=v1,snapshot=ABC"], "not --tag and --snapshot"),
        (["--branch", " "], "--branch must not be empty"),
    ],
)
def test_bad_arguments_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args([*argv, "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


def test_local_target_is_made_absolute(tmp_path: Path) -> None:
    config = parse_args(["--target", "data.nc", "refs.json", str(tmp_path)]).config
    assert config.target == os.path.abspath("data.nc")
    config = parse_args(["--target", "s3://b/data.nc", "refs.json", str(tmp_path)]).config
    assert config.target == "s3://b/data.nc"


def test_timeout_retries_and_s3_shortcuts(tmp_path: Path) -> None:
    config = parse_args(
        [
            "--timeout",
            "2s",
            "-o",
            "retries=7,s3_endpoint_url=http://127.0.0.1:9000,s3_region=eu-west-1,s3_anon",
            "-o",
            "s3_requester_pays",
            "s3://bucket/refs.json",
            str(tmp_path),
        ]
    ).config
    assert config.retry.timeout == 2.0
    assert config.retry.retries == 7
    assert config.s3_options == {
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"region_name": "eu-west-1"},
        "anon": True,
        "requester_pays": True,
    }
    assert config.fuse_options == ()


def test_bad_retries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--retries", "-1", "refs.json", str(tmp_path)])
    assert "retries must be a whole number" in capsys.readouterr().err


# ---------------------------------------------------------------------- REFS named check; xattr


def test_a_reference_file_called_check_is_mounted_with_dashes_or_a_path(tmp_path: Path) -> None:
    for argv, refs in (
        (["--", "check", str(tmp_path)], "check"),
        (["./stats", str(tmp_path)], "./stats"),
    ):
        config = parse_args(argv).config
        assert config.refs == os.path.abspath(refs)
        assert config.mountpoint == tmp_path


def test_xattrs_are_off_unless_asked_for() -> None:
    assert not parse_args(["refs.json", "/mnt"]).config.xattrs
    assert parse_args(["--xattr", "refs.json", "/mnt"]).config.xattrs
    assert parse_args(["-o", "ro,xattr", "refs.json", "/mnt"]).config.xattrs
    assert "xattr" not in parse_args(["-o", "xattr", "refs.json", "/mnt"]).config.fuse_options


# ---------------------------------------------------------------------- mount(8), roots, ids


def test_options_mount_adds_are_ignored(tmp_path: Path) -> None:
    config = parse_args(
        [
            "-o",
            "rw,dev,suid,x-systemd.automount,X-mount.mkdir,comment=x",
            "refs.json",
            str(tmp_path),
        ]
    ).config
    assert config.fuse_options == ()


def test_local_roots_uid_gid_umask_and_no_pin(tmp_path: Path) -> None:
    a, b, c = (tmp_path / name for name in "abc")
    for directory in (a, b, c):
        directory.mkdir()
    config = parse_args(
        [
            "--local-root",
            str(a),
            "-o",
            f"allow_other,local_root={b}:{c},uid=1234,gid=5678,umask=027,no_pin",
            "refs.json",
            str(tmp_path),
        ]
    ).config
    assert config.local_roots == (str(a), str(b), str(c))
    assert config.fuse_options == ("allow_other",)  # uid/gid/umask never reach libfuse
    assert config.shared
    assert (config.uid, config.gid, config.umask) == (1234, 5678, 0o027)
    assert not config.pin_versions
    flags = parse_args(
        ["--uid", "root", "--gid", "0", "--umask", "0o077", "--no-pin", "refs.json", str(a)]
    ).config
    assert (flags.uid, flags.gid, flags.umask, flags.pin_versions) == (0, 0, 0o077, False)
    defaults = parse_args(["-o", "allow_root", "refs.json", str(a)]).config
    assert defaults.shared
    assert defaults.local_roots == ()
    assert (defaults.uid, defaults.gid, defaults.umask) == (None, None, None)
    assert defaults.pin_versions
    assert not parse_args(["refs.json", str(a)]).config.shared


@pytest.mark.parametrize(
    "option",
    [
        ["--local-root", "/nonexistent/refmount-root"],
        ["-o", "local_root=/nonexistent/refmount-root"],
        ["--umask", "999"],
        ["-o", "umask=abc"],
        ["--uid", "no-such-user-refmount"],
        ["-o", "gid=no-such-group-refmount"],
    ],
)
def test_bad_roots_ids_and_masks_exit_2(
    tmp_path: Path, option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args([*option, "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("refmount: error:")


# ---------------------------------------------------------------------- kernel tuning


def test_kernel_tuning_is_on_by_default_and_not_asked_for(tmp_path: Path) -> None:
    command = parse_args(["refs.json", str(tmp_path)])
    assert command.tuning == KernelTuning(asked=False)


@pytest.mark.parametrize(
    "argv", [["--no-tune-kernel"], ["-o", "no_tune_kernel"], ["-o", "ro,no_tune_kernel"]]
)
def test_no_tune_kernel_turns_it_off(tmp_path: Path, argv: list[str]) -> None:
    command = parse_args([*argv, "refs.json", str(tmp_path)])
    assert command.tuning is None
    assert "no_tune_kernel" not in command.config.fuse_options


def test_no_tune_kernel_with_tune_kernel_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args(["-o", "no_tune_kernel,tune_read_ahead=4M", "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    assert "contradicts" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["--tune-kernel"], ["-o", "tune_kernel"], ["-o", "ro,tune_kernel,allow_other"]],
)
def test_tune_kernel_flag_and_option(tmp_path: Path, argv: list[str]) -> None:
    command = parse_args([*argv, "refs.json", str(tmp_path)])
    assert command.tuning == KernelTuning(asked=True)
    assert (
        "tune_kernel" not in command.config.fuse_options
    )  # not passed to the kernel as a FUSE option


@pytest.mark.parametrize(
    ("argv", "kb"),
    [(["-o", "tune_read_ahead=4M"], 4096), (["--tune-read-ahead", "64M", "--tune-kernel"], 65536)],
)
def test_tune_read_ahead_sets_the_size_and_implies_tuning(
    tmp_path: Path, argv: list[str], kb: int
) -> None:
    command = parse_args([*argv, "refs.json", str(tmp_path)])
    assert command.tuning == KernelTuning(read_ahead_kb=kb, asked=True)


@pytest.mark.parametrize(("size", "words"), [("lots", "not a size"), ("512", "at least 1K")])
def test_bad_tune_read_ahead_is_a_usage_error(
    tmp_path: Path, size: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args(["-o", f"tune_read_ahead={size}", "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    assert words in capsys.readouterr().err


# ---------------------------------------------------------------------- every value checked

HUGE = "9" * 400  # float() of it is infinity


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--uid", "4294967295"], "uid 4294967295 is out of range (0 to 4294967294)"),
        (["-o", "gid=99999999999999999999"], "gid 99999999999999999999 is out of range"),
        (["--uid", "-1"], "uid must be a number or a known name, not '-1'"),
        (["--uid", ""], "uid must be a number or a known name, not ''"),
        (["--cache-size", HUGE], "is too large"),
        (["--cache-size", ""], "not a size: ''"),
        (["-o", "cache_size=nan"], "not a size: 'nan'"),
        (["-o", "cache_size=-1"], "not a size: '-1'"),
        (["--tune-read-ahead", HUGE], "is too large"),
        (["--tune-read-ahead", ""], "not a size: ''"),
        (["--timeout", "0"], "timeout must be more than 0"),
        (["--timeout", "inf"], "not a duration: 'inf'"),
        (["--timeout", HUGE], "is too long"),
        (["--timeout", ""], "not a duration: ''"),
        (["-o", "attr_timeout=NaN"], "not a duration: 'NaN'"),
        (["--attr-timeout", HUGE], "is too long"),
        (["--retries", "1000"], "retries 1000 is too many (at most 100)"),
        (["--retries", HUGE], "is too many"),
        (["--retries", ""], "retries must be a whole number, not ''"),
        (["-o", "log_level=loud"], "log_level must be one of debug, info, warning, error"),
        (["--log-file", ""], "--log-file must not be empty"),
        (["--log-file", "/nonexistent/refmount/x.log"], "directory /nonexistent/refmount"),
        (["--target", ""], "--target must not be empty"),
        (["--remote-protocol", ""], "--remote-protocol must not be empty"),
        (["--remote-protocol", "nosuchproto"], "'nosuchproto' is not a protocol fsspec knows"),
        (["--remote-options", ""], "--remote-options is not valid JSON"),
        (["--remote-options", "NaN"], "--remote-options must be a JSON object"),
        (["--target-options", "{"], "--target-options is not valid JSON"),
        (["--umask", "-1"], "not a umask: '-1'"),
        (["-o", "s3_endpoint_url=localhost:9000"], "must be an http:// or https:// URL"),
        (["-o", "foreground=no"], "-o foreground is a switch and takes no value"),
        (["-o", "skip_invalid=0"], "-o skip_invalid is a switch"),
        (["-o", "s3_anon=false"], "-o s3_anon is a switch"),
        (["-o", "xattr=1"], "-o xattr is a switch"),
        (["-o", "nonempty=yes"], "-o nonempty is a switch"),
    ]
    + [
        (["-o", name], f"-o {name} needs a value: {name}=...")
        for name in (
            "cache_size",
            "timeout",
            "attr_timeout",
            "retries",
            "remote_options",
            "target_options",
            "target",
            "remote_protocol",
            "log_level",
            "log_file",
            "uid",
            "gid",
            "umask",
            "tune_read_ahead",
            "local_root",
            "s3_endpoint_url",
            "s3_region",
        )
    ]
    + [(["-o", "cache_size="], "-o cache_size needs a value")],
)
def test_every_bad_value_exits_2_with_one_line(
    tmp_path: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args([*argv, "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("refmount: error: ")
    assert message in lines[0]


def test_empty_refs_or_mountpoint_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in ((["", "/mnt"], "REFS must not be empty"), (["r.json", ""], "MOUNTPOINT")):
        with pytest.raises(SystemExit) as caught:
            parse_args(argv)
        assert caught.value.code == 2
        assert message in capsys.readouterr().err


def test_values_at_the_edges_are_accepted(tmp_path: Path) -> None:
    config = parse_args(
        ["-o", "uid=4294967294,gid=0,retries=100,timeout=1ms,attr_timeout=0", "r.json", "/mnt"]
    ).config
    assert (config.uid, config.gid, config.retry.retries) == (4294967294, 0, 100)
    assert config.retry.timeout == 0.001
    assert config.attr_timeout == 0.0
    log = tmp_path / "new.log"
    command = parse_args(["--log-file", str(log), "--remote-protocol", "s3", "r", "/m"])
    assert command.log_file == str(log)
    assert command.config.remote_protocol == "s3"
    assert not log.exists()  # checked, not created


def test_max_refs_size_by_flag_or_o(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["refs.json", str(tmp_path)]).config.max_refs_size is None  # the default
    config = parse_args(["--max-refs-size", "2G", "refs.json", str(tmp_path)]).config
    assert config.max_refs_size == 2 << 30
    config = parse_args(["-o", "max_refs_size=64M", "refs.json", str(tmp_path)]).config
    assert config.max_refs_size == 64 << 20
    for bad in ("0", "lots"):
        with pytest.raises(SystemExit) as caught:
            parse_args(["--max-refs-size", bad, "refs.json", str(tmp_path)])
        assert caught.value.code == 2
    assert "--max-refs-size must be at least 1 byte" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--decode"], ["-o", "decode"], ["-o", "ro,decode"]])
def test_decode_is_a_flag_and_a_mount_option(tmp_path: Path, argv: list[str]) -> None:
    assert not parse_args(["refs.json", str(tmp_path)]).config.decode
    config = parse_args([*argv, "refs.json", str(tmp_path)]).config
    assert config.decode
    assert "decode" not in config.fuse_options


@pytest.mark.parametrize(
    ("argv", "name", "eager"),
    [
        (["--netcdf"], "refs.nc", False),
        (["-o", "netcdf"], "refs.nc", False),
        (["--netcdf-name", "all.nc"], "all.nc", False),
        (["-o", "netcdf_name=all.nc"], "all.nc", False),
        (["--netcdf-eager"], "refs.nc", True),
        (["-o", "ro,netcdf_eager"], "refs.nc", True),
    ],
)
def test_netcdf_options_name_the_file_and_imply_each_other(
    tmp_path: Path, argv: list[str], name: str, eager: bool
) -> None:
    assert parse_args(["refs.json", str(tmp_path)]).config.netcdf is None
    config = parse_args([*argv, "refs.json", str(tmp_path)]).config
    assert (config.netcdf, config.netcdf_eager) == (name, eager)
    assert not any(option.startswith("netcdf") for option in config.fuse_options)


def test_a_netcdf_name_no_file_can_have_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args(["--netcdf-name", "a/b.nc", "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    assert "--netcdf-name 'a/b.nc' cannot name a file" in capsys.readouterr().err


def test_netcdf_without_h5py_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "h5py" else real(name)
    )
    with pytest.raises(SystemExit) as caught:
        parse_args(["--netcdf", "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    assert "pip install 'refmount[netcdf]'" in capsys.readouterr().err


# ---------------------------------------------------------------------- REFS - and --base


def test_refs_dash_is_standard_input_and_base_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = parse_args(["--base", "data", "-", str(tmp_path)]).config
    assert config.refs == "-"
    assert config.base == str(tmp_path / "data")
    config = parse_args(["--base", "s3://bucket/dir", "-", str(tmp_path)]).config
    assert config.base == "s3://bucket/dir"


def test_base_applies_only_to_standard_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--base", "/data", "refs.json", str(tmp_path)])
    assert "--base applies only to REFS -" in capsys.readouterr().err


# ---------------------------------------------------------------------- fetch engine


@pytest.mark.parametrize(
    ("argv", "fetcher"),
    [
        ([], "auto"),
        (["--fetcher", "fsspec"], "fsspec"),
        (["-o", "fetcher=fsspec"], "fsspec"),
        (["--fetcher", "auto"], "auto"),
    ],
)
def test_fetcher_option(tmp_path: Path, argv: list[str], fetcher: str) -> None:
    config = parse_args([*argv, "refs.json", str(tmp_path)]).config
    assert config.fetcher == fetcher
    assert not any(option.startswith("fetcher") for option in config.fuse_options)


def test_an_unknown_fetcher_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args(["-o", "fetcher=curl", "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    assert "fetcher must be one of auto, fsspec, not 'curl'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], None),
        (["--zarr-format", "2"], 2),
        (["--zarr-format", "3"], 3),
        (["-o", "zarr_format=2"], 2),
        (["-o", "ro,zarr_format=2"], 2),
    ],
)
def test_zarr_format_is_an_option_and_a_mount_option(
    tmp_path: Path, argv: list[str], expected: int | None
) -> None:
    config = parse_args([*argv, "refs.json", str(tmp_path)]).config
    assert config.zarr_format == expected
    assert not any(option.startswith("zarr_format") for option in config.fuse_options)


@pytest.mark.parametrize("argv", [["--zarr-format", "4"], ["-o", "zarr_format=v2"]])
def test_a_zarr_format_other_than_2_or_3_is_a_usage_error(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args([*argv, "refs.json", str(tmp_path)])
    assert caught.value.code == 2
    assert "--zarr-format must be 2 or 3" in capsys.readouterr().err


def test_the_disk_cache_and_pins_options(capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_args(
        ["--cache-dir", "c", "-o", "cache_dir_size=2G,pins=p.json", "refs.json", "/mnt"]
    ).config
    assert config.cache_dir == os.path.abspath("c")
    assert config.cache_dir_size == 2 * 1024**3
    assert config.pins == os.path.abspath("p.json")
    for argv, problem in (
        (["--cache-dir", "c", "--no-pin"], "--cache-dir needs pinning"),
        (["--pins", "p", "-o", "no_pin"], "--pins and --no-pin exclude each other"),
        (["--cache-dir-size", "1G"], "--cache-dir-size needs --cache-dir"),
        (["--cache-dir", " "], "--cache-dir must not be empty"),
    ):
        with pytest.raises(SystemExit):
            parse_args([*argv, "refs.json", "/mnt"])
        assert problem in capsys.readouterr().err
