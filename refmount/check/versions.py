"""Targets' versions: recorded for ``refmount pin`` (``record_versions``), and compared with a
pins file for ``refmount check --pins`` (``compare_with_pins``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from refmount.check.summary import Summary, TargetInfo
from refmount.check.targets import ask_each_target
from refmount.formats.options import Progress
from refmount.store.pins import Pin

VersionOf = Callable[[str], Awaitable[Pin]]
"""Asks a target for its version now, as a mount pins it (``Store.version``)."""


async def record_versions(
    summary: Summary, version_of: VersionOf, progress: Progress | None = None
) -> dict[str, Pin]:
    """Return the version of every target of ``summary`` that answers; each one that cannot
    be asked becomes a problem of ``summary``."""
    versions: dict[str, Pin] = {}

    async def ask(target: TargetInfo) -> None:
        versions[target.url] = await version_of(target.url)

    await ask_each_target(summary, ask, "version", progress)
    return versions


async def compare_with_pins(
    summary: Summary,
    recorded: Mapping[str, Pin],
    pins_file: str,
    version_of: VersionOf,
    progress: Progress | None = None,
) -> None:
    """Ask every target of ``summary`` for its version: each that differs from ``recorded``
    (read from ``pins_file``) is a problem naming both versions; each that the file lacks is a
    warning (a mount pins it at its first use)."""
    current = await record_versions(summary, version_of, progress)
    missing = 0
    for url, target in summary.targets.items():
        pin = recorded.get(url)
        if pin is None:
            missing += 1
            continue
        now = current.get(url)
        if now is not None and pin.known and not pin.same(now):
            summary.problem(
                target.first_key,
                f"{url} changed since {pins_file} was recorded: recorded {pin.describe()}, "
                f"now {now.describe()}",
            )
    if missing:
        summary.warnings.append(
            f"{missing:,} of {len(summary.targets):,} targets are not in {pins_file}: a mount "
            "pins them at their first use"
        )
