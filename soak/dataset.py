"""The reference set the soak mounts: range keys at random offsets and sizes of each target's
objects, one whole-object key per object, and the bytes each key must read as."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One kind of target (http or s3): the objects it serves and the URL the set gives each."""

    name: str
    objects: dict[str, bytes]
    """Object path on the target (``/o3.bin`` or ``/bucket/o3.bin``) to its bytes."""
    url_for: Callable[[str], str]
    """The URL of an object path, as the reference set writes it."""


@dataclass(frozen=True)
class Key:
    """A key of the mounted set, the bytes it must read as, and the object path it comes from."""

    name: str
    data: bytes
    target: str
    object_path: str


def build_refs(
    targets: Sequence[Target], keys: int, largest: int, seed: int
) -> tuple[dict[str, object], list[Key]]:
    """``keys`` range keys per target (``<target>/k<i>``, at most ``largest`` bytes, drawn with
    ``seed``), then one whole-object key per object (``<target>/whole<j>``): the references and
    the keys."""
    rng = random.Random(seed)
    refs: dict[str, object] = {".zgroup": {"zarr_format": 2}}
    made: list[Key] = []
    for target in targets:
        paths = sorted(target.objects)
        for i in range(keys):
            path = rng.choice(paths)
            data = target.objects[path]
            length = rng.randint(1, min(largest, len(data)))
            offset = rng.randint(0, len(data) - length)
            name = f"{target.name}/k{i}"
            refs[name] = [target.url_for(path), offset, length]
            made.append(Key(name, data[offset : offset + length], target.name, path))
        for j, path in enumerate(paths):
            name = f"{target.name}/whole{j}"
            refs[name] = [target.url_for(path)]
            made.append(Key(name, target.objects[path], target.name, path))
    return refs, made
