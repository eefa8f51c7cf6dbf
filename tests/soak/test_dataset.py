"""The generated reference set: range keys within their objects, whole-object keys, and the
bytes each must read as."""

from __future__ import annotations

import random

from soak.dataset import Target, build_refs

rng = random.Random(3)
HTTP = Target(
    "http",
    {f"/o{j}.bin": rng.randbytes(5000) for j in range(3)},
    lambda path: f"http://127.0.0.1:1{path}",
)
S3 = Target("s3", {"/bucket/o0.bin": rng.randbytes(3000)}, lambda path: f"s3:/{path}")


def test_each_range_key_is_the_bytes_of_its_object_at_its_offset():
    refs, keys = build_refs([HTTP, S3], 40, 1024, 7)
    for key in keys:
        if "/k" in key.name:
            ref = refs[key.name]
            assert isinstance(ref, list)
            url, offset, length = ref
            source = HTTP if key.target == "http" else S3
            assert url == source.url_for(key.object_path)
            assert key.data == source.objects[key.object_path][offset : offset + length]
            assert 1 <= length <= 1024


def test_every_object_also_has_a_whole_object_key_after_the_range_keys():
    refs, keys = build_refs([HTTP, S3], 2, 1024, 7)
    assert [key.name for key in keys] == [
        "http/k0",
        "http/k1",
        "http/whole0",
        "http/whole1",
        "http/whole2",
        "s3/k0",
        "s3/k1",
        "s3/whole0",
    ]
    assert refs["s3/whole0"] == ["s3://bucket/o0.bin"]
    assert keys[-1].data == S3.objects["/bucket/o0.bin"]
    assert refs[".zgroup"] == {"zarr_format": 2}


def test_the_same_seed_makes_the_same_set_and_another_seed_another():
    assert build_refs([HTTP], 20, 1024, 7) == build_refs([HTTP], 20, 1024, 7)
    assert build_refs([HTTP], 20, 1024, 7)[0] != build_refs([HTTP], 20, 1024, 8)[0]


def test_a_range_key_is_never_longer_than_its_object():
    small = Target("http", {"/tiny.bin": b"abc"}, str)
    _, keys = build_refs([small], 50, 1024, 1)
    assert all(1 <= len(key.data) <= 3 for key in keys)
