"""Names the kernel hands the mount: bytes that are not UTF-8, long names, dots, unicode."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import unicodedata
from collections.abc import Iterator

import pytest

from tests.support.mounting import Mount, mounted, requires_fuse

pytestmark = [pytest.mark.fuse, requires_fuse]

NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")
LONG_ASCII = "a" * 255
LONG_UTF8 = "é" * 127 + "z"  # 255 bytes in UTF-8
LONG_CJK = "語" * 85  # 255 bytes in UTF-8

KEYS: dict[str, str] = {
    "plain": "plain text",
    NFC: "composed",
    NFD: "decomposed",
    "with space": "spaced",
    " leading and trailing ": "padded",
    "new\nline": "newline",
    "tab\there": "tab",
    "d/sub/file": "nested",
    "d/other": "other",
    LONG_ASCII: "long ascii",
    f"d/{LONG_UTF8}": "long utf-8",
    LONG_CJK: "long cjk",
    "snow☃man/ünï/🙂": "emoji",
}


@pytest.fixture(scope="module")
def mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    directory = tmp_path_factory.mktemp("names")
    refs = directory / "refs.json"
    refs.write_text(json.dumps(KEYS))
    with mounted(refs, directory / "mnt") as mount:
        yield mount


def still_serves(mount: Mount) -> None:
    assert (mount.path / "plain").read_text() == "plain text"


def test_every_key_reads_as_its_value(mount: Mount) -> None:
    for key, value in KEYS.items():
        assert (mount.path / key).read_text() == value, key


@pytest.mark.parametrize(
    "name", [b"\xff", b"\xc3", b"caf\xe9", b"\xed\xa0\x80", b"d/\xff", b"d/sub/\x80x"]
)
def test_names_that_are_not_utf8_do_not_exist(mount: Mount, name: bytes) -> None:
    path = os.fsencode(mount.path) + b"/" + name
    with pytest.raises(FileNotFoundError):
        os.stat(path)
    with pytest.raises(FileNotFoundError):
        open(path, "rb").close()
    still_serves(mount)


def test_names_longer_than_255_bytes_do_not_exist(mount: Mount) -> None:
    for name in ("a" * 256, "é" * 128, "a" * 2000):
        with pytest.raises(OSError, match=r"File name too long|No such file") as caught:
            os.stat(mount.path / name)
        assert caught.value.errno in (errno.ENAMETOOLONG, errno.ENOENT), name
    assert os.statvfs(mount.path).f_namemax == 255
    still_serves(mount)


def test_names_longer_than_255_bytes_are_enametoolong(mount: Mount) -> None:
    for name in ("a" * 256, "é" * 128):
        with pytest.raises(OSError, match="File name too long") as caught:
            os.stat(mount.path / name)
        assert caught.value.errno == errno.ENAMETOOLONG, name


def test_names_of_exactly_255_bytes_work(mount: Mount) -> None:
    for key in (LONG_ASCII, f"d/{LONG_UTF8}", LONG_CJK):
        assert len(key.rpartition("/")[2].encode()) == 255
        path = mount.path / key
        assert path.is_file()
        assert path.stat().st_size == len(KEYS[key].encode())
        assert path.read_text() == KEYS[key]
    assert LONG_UTF8 in os.listdir(mount.path / "d")


def test_dot_and_dotdot(mount: Mount) -> None:
    # plain strings: pathlib would fold the "." components away before the kernel sees them
    root = str(mount.path)
    join = os.path.join
    assert os.path.samefile(join(root, "."), root)
    assert os.path.samefile(join(root, "d", "."), join(root, "d"))
    assert os.path.samefile(join(root, "d", ".."), root)
    assert os.path.samefile(join(root, "d", "sub", ".."), join(root, "d"))
    assert os.path.samefile(join(root, "d", "sub", ".", "..", "sub"), join(root, "d", "sub"))
    assert os.path.samefile(join(root, ".."), str(mount.path.parent))  # above: the kernel's
    with open(join(root, "d", "sub", "..", "other")) as other:
        assert other.read() == "other"
    with pytest.raises(NotADirectoryError):
        os.stat(join(root, "plain", "."))
    with pytest.raises(NotADirectoryError):
        os.stat(join(root, "plain", ".."))


def test_nfc_and_nfd_are_different_names(mount: Mount) -> None:
    assert NFC != NFD
    names = os.listdir(mount.path)
    assert NFC in names
    assert NFD in names
    assert (mount.path / NFC).read_text() == "composed"
    assert (mount.path / NFD).read_text() == "decomposed"
    assert os.stat(mount.path / NFC).st_ino != os.stat(mount.path / NFD).st_ino
    with pytest.raises(FileNotFoundError):
        os.stat(mount.path / "CAFÉ")


def test_names_with_spaces_and_control_characters(mount: Mount) -> None:
    names = os.listdir(mount.path)
    for name in ("with space", " leading and trailing ", "new\nline", "tab\there"):
        assert name in names
        assert (mount.path / name).read_text() == KEYS[name]
    with pytest.raises(FileNotFoundError):
        os.stat(mount.path / "with  space")


def test_ls_shows_dot_and_dotdot(mount: Mount) -> None:
    environment = {**os.environ, "LC_ALL": "C"}
    for directory in (mount.path, mount.path / "d", mount.path / "d" / "sub"):
        result = subprocess.run(
            ["ls", "-la", str(directory)],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
            env=environment,
        )
        lines = result.stdout.splitlines()
        assert any(line.startswith("d") and line.endswith(" .") for line in lines), lines
        assert any(line.startswith("d") and line.endswith(" ..") for line in lines), lines
    result = subprocess.run(
        ["ls", "-1a", str(mount.path / "d")],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
        env=environment,
    )
    assert result.stdout.splitlines() == [".", "..", "other", "sub", LONG_UTF8]


def test_find_walks_the_whole_tree(mount: Mount) -> None:
    result = subprocess.run(
        ["find", str(mount.path), "-print0"], capture_output=True, check=True, timeout=30
    )
    found = {os.fsdecode(path) for path in result.stdout.split(b"\0") if path}
    expected = {str(mount.path)}
    for key in KEYS:
        parts = key.split("/")
        for depth in range(1, len(parts) + 1):
            expected.add(str(mount.path.joinpath(*parts[:depth])))
    assert found == expected
    files = subprocess.run(
        ["find", str(mount.path), "-type", "f", "-print0"],
        capture_output=True,
        check=True,
        timeout=30,
    )
    assert len([p for p in files.stdout.split(b"\0") if p]) == len(KEYS)
