"""The targets the soak serves: generated objects behind a fault proxy, on 127.0.0.1."""

from __future__ import annotations

import os
import urllib.request

import pytest

from soak.targets import BUCKET, s3_url, serving, use_dummy_aws_credentials
from tests.soak.builders import settings
from tests.support.servers import DUMMY_AWS_ENVIRONMENT


def test_s3_objects_are_referred_to_by_bucket_and_key():
    assert s3_url(f"/{BUCKET}/o3.bin") == "s3://refmount-soak/o3.bin"


def test_the_daemon_inherits_dummy_aws_credentials(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_PROFILE", "production")
    for name, value in DUMMY_AWS_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)  # restored afterwards
    use_dummy_aws_credentials()
    assert "AWS_PROFILE" not in os.environ
    assert all(os.environ[name] == value for name, value in DUMMY_AWS_ENVIRONMENT.items())


@pytest.mark.http
def test_the_http_objects_are_served_through_the_proxy_with_ranges(
    monkeypatch: pytest.MonkeyPatch,
):
    for name in DUMMY_AWS_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)  # restored afterwards
    chosen = settings("--targets", "http", "--objects", "2", "--object-size", "4K")
    with serving(chosen) as served:
        (target,) = served.targets
        assert sorted(target.objects) == ["/o0.bin", "/o1.bin"]
        assert all(len(data) == 4096 for data in target.objects.values())
        assert served.options == []
        request = urllib.request.Request(
            target.url_for("/o1.bin"), headers={"Range": "bytes=10-19"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.read() == target.objects["/o1.bin"][10:20]
        assert len(served.proxies["http"].applied) == 1
