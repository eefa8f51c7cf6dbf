"""``refmount check``: exit statuses, JSON, and the mount's ``-o`` options and value checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refmount.cli.command import main


def test_check_exit_status_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"a": "text", "b": ["data.bin", 0, 3]}))
    assert main(["check", str(good)]) == 0
    assert "problems    none" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"a//b": "x", "c": "base64:!!!x"}))
    assert main(["check", "--json", str(bad)]) == 2
    document = json.loads(capsys.readouterr().out)
    assert sorted(p["key"] for p in document["problems"]) == ["a//b", "c"]
    assert main(["check", str(tmp_path / "absent.json")]) == 2


def test_check_takes_the_mount_options_for_reading_refs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"a": ["data.bin", 0, 3], "n": [None, 0, 2]}))
    argv = ["check", "--json", "-o", "remote_protocol=s3,cache_size=1G,allow_other", str(refs)]
    assert main([*argv, "--target", "s3://b/t.nc"]) == 0
    urls = {target["url"] for target in json.loads(capsys.readouterr().out)["targets"]}
    assert urls == {"s3://data.bin", "s3://b/t.nc"}
    with pytest.raises(SystemExit) as raised:
        main(["check", "--target-options", "[1]", str(refs)])
    assert raised.value.code == 2
    assert "--target-options must be a JSON object" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-o", "target"], "-o target needs a value: target=..."),
        (["-o", "remote_protocol="], "-o remote_protocol needs a value"),
        (["-o", "s3_anon=1"], "-o s3_anon is a switch"),
        (["--remote-protocol", "nosuchproto"], "not a protocol fsspec knows"),
        (["--target", ""], "--target must not be empty"),
        (["--remote-options", "[1]"], "--remote-options must be a JSON object"),
        (["-o", "s3_endpoint_url=localhost:9000"], "must be an http:// or https:// URL"),
    ],
)
def test_check_refuses_bad_option_values_with_one_line(
    tmp_path: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refs = tmp_path / "refs.json"
    refs.write_text("{}")
    with pytest.raises(SystemExit) as caught:
        main(["check", *argv, str(refs)])
    assert caught.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert message in lines[0]
