"""Each optional extra installed alone, from the wheel, into a fresh venv: the bundled example
mounts and reads; ``--decode`` works where the ``decode`` extra is installed and is refused,
in one line naming the extra, where it is not; the Dask plugin mounts on a real cluster with
only the ``dask`` extra.

pip installs from the package index the machine is configured with (its cache makes the
second run quick); each venv takes 20-60 s to make.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import fsspec
import netCDF4
import numpy as np
import pytest
import zarr

from tests.support.icechunk_repos import build_repository, requires_icechunk
from tests.support.mounting import is_mounted, mounted, requires_fuse, unmount
from tests.support.venvs import OLDEST, ROOT, Installation, build_wheel, install, python_at_least

pytestmark = [pytest.mark.fuse, pytest.mark.slow, requires_fuse]

EXAMPLE = ROOT / "examples" / "air"
REFS = EXAMPLE / "refs.json"

EXTRAS = ("", "decode", "dask", "icechunk", "netcdf")
"""Every optional extra, and none (``""``)."""

OWN_MODULES = {
    "decode": "imagecodecs",
    "dask": "distributed",
    "icechunk": "icechunk",
    "netcdf": "h5py",
}
"""A module each extra brings that nothing else installs (icechunk brings zarr, and with it
numcodecs: an icechunk installation can decode too)."""

NEWEST_ONLY = {"icechunk": (3, 12)}
"""Extras that need a newer Python than refmount: tried with the newest Python found."""


def interpreter(extra: str) -> str:
    """The oldest supported Python for an extra (3.11 must keep working), or the newest for
    one that needs more; skips when there is none."""
    minimum = NEWEST_ONLY.get(extra)
    python = python_at_least(minimum or OLDEST, oldest=minimum is None)
    if python is None:
        pytest.skip(f"the {extra} extra needs Python {minimum}, and none is installed")
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Installation]:
    """Return a function that gives the installation with one extra, made at first use."""
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    made: dict[str, Installation] = {}

    def installation(extra: str) -> Installation:
        if extra not in made:
            venv = tmp_path_factory.mktemp(f"venv-{extra or 'none'}") / "venv"
            made[extra] = install(wheel, venv, extra, interpreter(extra))
        return made[extra]

    return installation


def extra_id(extra: str) -> str:
    return extra or "no-extra"


def oracle() -> dict[str, bytes]:
    """Every key of the example as fsspec's ReferenceFileSystem serves it (its targets are
    relative to the reference file, which fsspec leaves to the current directory)."""
    document = json.loads(REFS.read_text())
    refs = {
        key: [str(EXAMPLE / value[0]), *value[1:]] if isinstance(value, list) else value
        for key, value in document["refs"].items()
    }
    fs = fsspec.filesystem("reference", fo={**document, "refs": refs})
    return {key: fs.cat(key) for key in fs.find("", withdirs=False)}


@pytest.mark.parametrize("extra", EXTRAS, ids=extra_id)
def test_the_venv_has_only_what_its_extra_brings(
    installed: Callable[[str], Installation], extra: str
) -> None:
    """Otherwise the tests below would show nothing about the extra alone."""
    installation = installed(extra)
    for other, module in OWN_MODULES.items():
        assert installation.has_module(module) == (other == extra), module


@pytest.mark.parametrize("extra", EXTRAS, ids=extra_id)
def test_the_example_mounts_and_every_file_reads(
    installed: Callable[[str], Installation], extra: str, tmp_path: Path
) -> None:
    installation = installed(extra)
    expected = oracle()
    with mounted(REFS, tmp_path / "mnt", program=[str(installation.refmount)]) as mount:
        served = {
            str(path.relative_to(mount.path)): path.read_bytes()
            for path in mount.path.rglob("*")
            if path.is_file()
        }
    assert served == expected


@pytest.mark.parametrize("extra", EXTRAS, ids=extra_id)
def test_decode_works_exactly_where_its_packages_are_installed(
    installed: Callable[[str], Installation], extra: str, tmp_path: Path
) -> None:
    """The decode extra brings them; the icechunk extra does too (through zarr)."""
    installation = installed(extra)
    mountpoint = tmp_path / "mnt"
    can_decode = installation.has_module("numcodecs") and installation.has_module("numpy")
    assert can_decode == (extra in ("decode", "icechunk"))
    if not can_decode:
        mountpoint.mkdir()
        try:
            result = subprocess.run(
                [installation.refmount, "--decode", REFS, mountpoint],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert not is_mounted(mountpoint)
        finally:
            unmount(mountpoint)  # (only if it mounted after all)
        assert result.returncode == 2
        assert result.stderr == (
            "refmount: error: --decode needs numcodecs, which is not installed: "
            "pip install 'refmount[decode]'\n"
        )
        return
    with mounted(REFS, mountpoint, "--decode", program=[str(installation.refmount)]) as mount:
        meta = json.loads((mount.path / "air" / ".zarray").read_bytes())
        values = zarr.open_array(str(mount.path / "air"), mode="r", zarr_format=2)[:]
    assert meta["compressor"] is None
    assert meta["filters"] is None
    with netCDF4.Dataset(EXAMPLE / "air.nc") as original:
        original.set_auto_maskandscale(False)
        np.testing.assert_array_equal(values, original["air"][:])


DASK_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from distributed import Client, LocalCluster
    from refmount.dask import RefmountPlugin

    refs, mountpoint = sys.argv[1], sys.argv[2]

    def read(path):
        return Path(path).read_bytes()

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.register_plugin(RefmountPlugin(refs, mountpoint))
        data = client.submit(read, mountpoint + "/air/0.0.0", pure=False).result()
        sys.stdout.write(data.hex())
    """
)


def test_the_dask_plugin_mounts_with_only_its_extra(
    installed: Callable[[str], Installation], tmp_path: Path
) -> None:
    installation = installed("dask")
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    try:
        result = subprocess.run(
            [installation.python, "-c", DASK_SCRIPT, str(REFS), str(mountpoint)],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        unmount(mountpoint)
    assert result.returncode == 0, result.stderr[-4000:]
    assert bytes.fromhex(result.stdout) == oracle()["air/0.0.0"]


@requires_icechunk
def test_a_repository_mounts_with_only_the_icechunk_extra(
    installed: Callable[[str], Installation], tmp_path: Path
) -> None:
    """The repository is built here; the mount is the icechunk-only installation's."""
    installation = installed("icechunk")
    built = build_repository(tmp_path / "repo")
    options = ("--authorize-container", "all")
    with mounted(built.path, tmp_path / "mnt", *options, program=[str(installation.refmount)]) as m:
        for path, expected in built.arrays[built.second].items():
            values = zarr.open_array(str(m.path / path), mode="r", zarr_format=3)[...]
            np.testing.assert_array_equal(values, expected, err_msg=path)


def test_a_repository_is_refused_without_the_icechunk_extra(
    installed: Callable[[str], Installation], tmp_path: Path
) -> None:
    installation = installed("")
    repository = tmp_path / "repo"
    (repository / "snapshots").mkdir(parents=True)
    (repository / "repo").write_bytes(b"")
    (tmp_path / "mnt").mkdir()
    try:
        result = subprocess.run(
            [installation.refmount, repository, tmp_path / "mnt"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        unmount(tmp_path / "mnt")  # (only if it mounted after all)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "pip install 'refmount[icechunk]'" in result.stderr


def test_the_netcdf_file_mounts_with_only_its_extra(
    installed: Callable[[str], Installation], tmp_path: Path
) -> None:
    """The example's chunks are zlib: placed as stored, so numcodecs is not needed."""
    installation = installed("netcdf")
    program = [str(installation.refmount)]
    with (
        mounted(REFS, tmp_path / "mnt", "--netcdf", program=program) as mount,
        netCDF4.Dataset(mount.path / "refs.nc") as served,
        netCDF4.Dataset(EXAMPLE / "air.nc") as original,
    ):
        for name in ("air", "lat", "lon", "time"):
            np.testing.assert_array_equal(served[name][:], original[name][:], err_msg=name)


def test_netcdf_is_refused_without_its_extra(
    installed: Callable[[str], Installation], tmp_path: Path
) -> None:
    installation = installed("")
    (tmp_path / "mnt").mkdir()
    try:
        result = subprocess.run(
            [installation.refmount, "--netcdf", REFS, tmp_path / "mnt"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        unmount(tmp_path / "mnt")  # (only if it mounted after all)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "pip install 'refmount[netcdf]'" in result.stderr
