"""The mount command's parser and help."""

from __future__ import annotations

from refmount.cli.arguments import build_parser


def test_help_mentions_the_subcommands() -> None:
    text = build_parser().format_help()
    assert "refmount check [options] REFS" in text
    assert "refmount stats [--format {text,json,prometheus}] MOUNTPOINT" in text
    assert "refmount -- check" in text
