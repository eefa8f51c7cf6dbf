"""The pure parts of the Python API: keywords to the command's argv, and in-memory sets
encoded for the daemon's standard input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import refmount
from refmount.api import build_argv, encode_references, option_keywords, start_error
from refmount.cli.options import parse_args
from refmount.errors import BadInputError, RefmountError, StartError


def test_every_long_option_of_the_command_is_a_keyword() -> None:
    keywords = option_keywords()
    for name in ("cache_size", "remote_options", "target_options", "timeout", "retries"):
        assert name in keywords
    assert {"base", "skip_invalid", "local_root", "log_file", "nonempty"} <= keywords.keys()
    assert not {"foreground", "help", "version"} & keywords.keys()


def test_keywords_become_the_argv_the_command_parses(tmp_path: Path) -> None:
    root = str(tmp_path)
    argv = build_argv(
        "refs.json",
        str(tmp_path / "mnt"),
        {
            "cache_size": "2G",
            "remote_options": {"anon": True},
            "timeout": 5,
            "retries": 0,
            "skip_invalid": True,
            "xattr": False,
            "uid": None,
            "local_root": [root],
            "fuse_options": ["allow_root", "auto_unmount"],
        },
    )
    assert argv[-3:] == ["--", "refs.json", str(tmp_path / "mnt")]
    config = parse_args(argv).config
    assert config.read.cache_size == 2 << 30
    assert config.remote_options == {"anon": True}
    assert config.retry.timeout == 5
    assert config.retry.retries == 0
    assert config.skip_invalid
    assert not config.xattrs
    assert config.uid is None
    assert config.local_roots == (root,)
    assert set(config.fuse_options) == {"allow_root", "auto_unmount"}


def test_zarr_format_is_a_keyword() -> None:
    argv = build_argv("refs.json", "/mnt", {"zarr_format": 2, "decode": True})
    assert argv[:3] == ["--zarr-format", "2", "--decode"]
    config = parse_args(argv).config
    assert (config.zarr_format, config.decode) == (2, True)


def test_refs_that_look_like_options_or_subcommands_stay_refs() -> None:
    for refs in ("-", "check", "--version"):
        argv = build_argv(refs, "/mnt", {})
        assert argv == ["--", refs, "/mnt"]


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'cache_sise'"):
        build_argv("refs.json", "/mnt", {"cache_sise": "2G"})
    for name in ("foreground", "help", "version", "refs", "mountpoint"):
        with pytest.raises(TypeError, match=name):
            build_argv("refs.json", "/mnt", {name: True})
    with pytest.raises(TypeError, match="unexpected keyword"):
        refmount.mount("refs.json", "/nonexistent-never-made", cache_sise="2G")


def test_a_switch_takes_a_bool_and_a_list_option_a_list() -> None:
    with pytest.raises(TypeError, match="switch"):
        build_argv("r", "/m", {"skip_invalid": "yes"})
    with pytest.raises(TypeError, match="list of strings"):
        build_argv("r", "/m", {"fuse_options": 3})
    assert build_argv("r", "/m", {"fuse_options": "allow_root"})[:2] == ["-o", "allow_root"]


def test_an_in_memory_set_is_encoded_as_json_with_bytes_made_text_or_base64() -> None:
    refs = {
        "version": 1,
        "refs": {".zgroup": b'{"zarr_format":2}', "raw": b"\xff\x00", "tricky": b"base64:x"},
    }
    document = json.loads(encode_references(refs))
    assert document["refs"][".zgroup"] == '{"zarr_format":2}'
    assert document["refs"]["raw"] == "base64:/wA="
    assert document["refs"]["tricky"] == "base64:YmFzZTY0Ong="
    with pytest.raises(TypeError, match="set"):
        encode_references({"a": {1, 2}})


def test_the_error_carries_the_last_line_the_command_printed(tmp_path: Path) -> None:
    said = tmp_path / "stderr"
    said.write_bytes(
        b"loading refs.json\nrefmount: error: refs.json: key 'a': the offset must be an "
        b"integer, not a string\n"
    )
    with open(said, "rb") as file:
        error = start_error(2, file)
    assert isinstance(error, BadInputError)
    assert isinstance(error, RefmountError)
    assert str(error) == "refs.json: key 'a': the offset must be an integer, not a string"
    said.write_bytes(b"Segmentation fault\n")
    with open(said, "rb") as file:
        crashed = start_error(-11, file)
    assert type(crashed) is StartError
    assert str(crashed) == "refmount exited with status -11 without mounting: Segmentation fault"


def test_repository_keywords_become_the_repository_flags() -> None:
    argv = build_argv(
        "/data/repo",
        "/mnt",
        {"branch": "dev", "authorize_container": ["s3://a/", "file:///b/"], "snapshot": None},
    )
    assert argv == [
        "--branch",
        "dev",
        "--authorize-container",
        "s3://a/",
        "--authorize-container",
        "file:///b/",
        "--",
        "/data/repo",
        "/mnt",
    ]
    assert build_argv("r", "/m", {"tag": "v1"})[:2] == ["--tag", "v1"]
