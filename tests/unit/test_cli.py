"""Tests of argument and ``-o`` option parsing (no mounting)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from refmount.cli import parse_args, split_options
from refmount.config import GIB, MIB


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
    config, _ = parse_args(["refs.json", str(tmp_path)])
    assert config.refs == os.path.abspath("refs.json")
    assert config.mountpoint == tmp_path
    assert not config.foreground
    assert config.fuse_options == ()
    assert config.read.cache_size == 512 * MIB
    assert config.remote_options == {}


def test_remote_references_stay_urls(tmp_path: Path) -> None:
    for url in ("s3://bucket/refs.json", "simplecache::https://h/r.json"):
        config, _ = parse_args([url, str(tmp_path)])
        assert config.refs == url


def test_own_options_through_o(tmp_path: Path) -> None:
    config, _ = parse_args(
        [
            "-o",
            "allow_other,cache_size=2G,remote_protocol=s3,skip_invalid,foreground",
            "-o",
            'remote_options={"anon": true},target=/data/t.nc,defaults,auto,_netdev',
            "refs.json",
            str(tmp_path),
        ]
    )
    assert config.fuse_options == ("allow_other",)
    assert config.read.cache_size == 2 * GIB
    assert config.remote_protocol == "s3"
    assert config.remote_options == {"anon": True}
    assert config.target == "/data/t.nc"
    assert config.skip_invalid
    assert config.foreground


def test_command_line_flags_win_over_o(tmp_path: Path) -> None:
    config, _ = parse_args(
        ["--cache-size", "1G", "-o", "cache_size=2G", "refs.json", str(tmp_path)]
    )
    assert config.read.cache_size == GIB


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-o", "rw"], "read-only"),
        (["--remote-options", "{bad"], "--remote-options is not valid JSON"),
        (["--remote-options", "[1]"], "must be a JSON object"),
        (["--cache-size", "lots"], "not a size"),
        (["--attr-timeout", "soon"], "not a duration"),
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
    config, _ = parse_args(["--target", "data.nc", "refs.json", str(tmp_path)])
    assert config.target == os.path.abspath("data.nc")
    config, _ = parse_args(["--target", "s3://b/data.nc", "refs.json", str(tmp_path)])
    assert config.target == "s3://b/data.nc"


def test_timeout_retries_and_s3_shortcuts(tmp_path: Path) -> None:
    config, _ = parse_args(
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
    )
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
