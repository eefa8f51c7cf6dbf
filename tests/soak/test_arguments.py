"""The soak's options: their defaults, the targets list and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.arguments import parse
from soak.units import MIB


def test_the_defaults_soak_both_targets_with_64_readers_for_a_minute():
    settings = parse([])
    assert (settings.seconds, settings.threads, settings.fault_share) == (60.0, 64, 0.05)
    assert settings.targets == ("http", "s3")
    assert (settings.retries, settings.timeout, settings.cache_size) == (4, "10s", "64M")
    assert (settings.json, settings.log) == (None, None)


def test_sizes_and_durations_keep_their_spelling_and_read_as_numbers():
    settings = parse(["--cache-size", "1G", "--timeout", "500ms", "--rss-slack", "16M"])
    assert settings.cache_size == "1G"
    assert settings.cache_bytes == 1024 * MIB
    assert settings.timeout_seconds == 0.5
    assert settings.rss_slack_bytes == 16 * MIB
    assert (settings.object_bytes, settings.max_key_bytes) == (4 * MIB, MIB)


def test_targets_are_a_comma_separated_list_blanks_ignored():
    assert parse(["--targets", " s3 , http ,"]).targets == ("s3", "http")
    assert parse(["--targets", "http"]).targets == ("http",)


def test_paths_are_paths():
    settings = parse(["--json", "soak.json", "--log", "daemon.log"])
    assert (settings.json, settings.log) == (Path("soak.json"), Path("daemon.log"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--targets", "ftp"], "--targets takes http, s3 or http,s3"),
        (["--targets", ","], "--targets takes http, s3 or http,s3"),
        (["--fault-share", "1.5"], "--fault-share must be between 0 and 1"),
        (["--seconds", "0"], "--seconds and --threads must be positive"),
        (["--threads", "-1"], "--seconds and --threads must be positive"),
        (["--fetcher", "obstore"], "invalid choice"),
    ],
)
def test_wrong_options_end_with_status_2_and_say_why(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
):
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--rss-slack", "--cache-size", "--timeout"])
def test_a_size_or_duration_the_soak_cannot_read_is_refused_before_anything_starts(
    option: str, capsys: pytest.CaptureFixture[str]
):
    with pytest.raises(SystemExit) as exit_:
        parse([option, "plenty"])
    assert exit_.value.code == 2
    assert "'plenty'" in capsys.readouterr().err
