"""The README's console samples are the output of a real run of the bundled example.

Every ```console block of README.md is run, command by command, with the mountpoint
``/mnt/data`` replaced by a temporary directory and the working directory at the clone's
root; what each command prints (stdout and stderr together) must equal the lines that follow
it in the README once both are normalised for what differs between machines: the mountpoint,
the clone's path, the owner, group and date columns of ``ls -l``, the time of a log line and
the time loading took, runs of blanks, and the line a mount prints where the machine has no
syslog socket. Sizes, offsets, statistics and
names are compared as written.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.mounting import requires_fuse, unmount

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MOUNTPOINT = "/mnt/data"
README_CLONE = "/home/me/refmount"
LOG_NOTICE = re.compile(r"^refmount: no syslog or journal socket; logging to .*$")
LOG_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
ELAPSED = re.compile(r" in \d+\.\d+ s$")
LS_LINE = re.compile(
    r"^(?P<mode>[-dlbcps][-rwxsStT]{9}[.+@]?)\s+(?P<links>\d+)\s+\S+\s+\S+\s+(?P<size>\d+)\s+"
    r"\w{3}\s+\d{1,2}\s+(?:\d{1,2}:\d{2}|\d{4})\s+(?P<name>.*)$"
)


@dataclass(frozen=True)
class Command:
    """One ``$ command`` of a console block and the output the README shows for it."""

    line: str
    expected: tuple[str, ...]


def console_blocks(text: str) -> list[list[Command]]:
    """Return the commands of every ```console block of ``text``."""
    blocks = []
    for body in re.findall(r"^```console\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL):
        commands: list[Command] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                commands.append(Command(line[2:], ()))
            elif commands:
                last = commands[-1]
                commands[-1] = Command(last.line, (*last.expected, line))
        blocks.append(commands)
    return blocks


def normalise(lines: list[str] | tuple[str, ...]) -> list[str]:
    """Return ``lines`` without what differs between machines (owner, group, dates, blanks)."""
    out = []
    for line in lines:
        if LOG_NOTICE.match(line):
            continue
        match = LS_LINE.match(line)
        if match:
            line = (
                f"{match['mode']} {match['links']} OWNER GROUP {match['size']} DATE {match['name']}"
            )
        line = ELAPSED.sub(" in N s", LOG_TIME.sub("TIME ", line))
        out.append(" ".join(line.split()))
    while out and out[-1] == "":
        out.pop()
    return out


def as_in_readme(output: str, mountpoint: Path) -> list[str]:
    """Return a command's real output with this machine's paths written as the README's."""
    output = output.replace(str(ROOT), README_CLONE)
    output = output.replace(str(mountpoint), README_MOUNTPOINT)
    output = output.replace(str(mountpoint).lstrip("/"), README_MOUNTPOINT.lstrip("/"))
    return output.splitlines()


def differences(command: Command, actual: list[str]) -> str | None:
    """Return a readable difference between the README's output and ``actual``, if any."""
    expected = normalise(command.expected)
    got = normalise(actual)
    if expected == got:
        return None
    return (
        f"$ {command.line}\n--- README\n"
        + "\n".join(expected)
        + "\n--- real run\n"
        + "\n".join(got)
    )


def missing_tools(command: str) -> list[str]:
    """Return the programs of ``command`` (each part of a pipeline) that are not installed."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    after = zip(words, ["|", *words], strict=False)
    programs = [word for word, before in after if before in ("|", "&&", ";")]
    return [program for program in programs if shutil.which(program, path=search_path()) is None]


def search_path() -> str:
    """PATH with this environment's scripts (``refmount``) first, as after the set-up."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


BLOCKS = console_blocks(README.read_text())


def test_the_readme_has_console_blocks_that_mount() -> None:
    assert len(BLOCKS) >= 2
    assert all(any(c.line.startswith("refmount ") for c in block) for block in BLOCKS)


@pytest.mark.fuse
@requires_fuse
@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=lambda i: f"block{i + 1}")
def test_console_block_prints_what_the_readme_shows(index: int, tmp_path: Path) -> None:
    mountpoint = tmp_path / "data"
    mountpoint.mkdir()
    env = dict(os.environ, PATH=search_path())
    skipped = []
    try:
        for command in BLOCKS[index]:
            missing = missing_tools(command.line)
            if missing:
                skipped.append(f"{command.line!r} needs {', '.join(missing)}")
                continue
            result = subprocess.run(
                ["bash", "-c", command.line.replace(README_MOUNTPOINT, str(mountpoint))],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=120,
                check=False,
            )
            assert result.returncode == 0, f"$ {command.line}\n{result.stdout}"
            difference = differences(command, as_in_readme(result.stdout, mountpoint))
            assert difference is None, difference
    finally:
        unmount(mountpoint)
    if skipped:
        pytest.skip("the rest matches; not run, tools missing: " + "; ".join(skipped))


def test_a_changed_size_or_offset_in_the_readme_is_caught() -> None:
    """Normalising forgives owner, group and dates, never a size: the samples cannot drift."""
    listing = next(c for block in BLOCKS for c in block if c.line.startswith("ls -l"))
    elsewhere = [
        re.sub(r" me me ", " alice staff ", line).replace("Jan  1 12:00", "Mar 13  2025")
        for line in listing.expected
    ]
    assert differences(listing, elsewhere) is None
    resized = [line.replace(" 4111 ", " 4112 ") for line in elsewhere]
    assert resized != elsewhere
    assert differences(listing, resized) is not None
    xattrs = next(c for block in BLOCKS for c in block if c.line.startswith("getfattr"))
    moved = [line.replace('offset="13315"', 'offset="13316"') for line in xattrs.expected]
    assert moved != list(xattrs.expected)
    assert differences(xattrs, moved) is not None
