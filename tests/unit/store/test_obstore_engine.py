"""The obstore engine: which URLs and options it takes, how its errors are classified, and
its reads through the store against a real range server (pins, 412, sizes, statuses)."""

from __future__ import annotations

from pathlib import Path

import obstore.exceptions
import pytest

from refmount.errors import TargetChangedError, TargetError, TargetReadError
from refmount.store.obstore_engine import (
    ObstoreEngine,
    PreconditionFailed,
    RangeIgnored,
    classify,
)
from refmount.store.store import Store
from tests.support.servers import RangeHTTPServer

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_REGION": "eu-west-1"}


def engine(environ: dict[str, str] | None = None, home: Path | None = None) -> ObstoreEngine:
    return ObstoreEngine(environ=CREDENTIALS if environ is None else environ, home=home)


def test_http_urls_with_headers_are_planned(tmp_path: Path) -> None:
    plan = engine(home=tmp_path).plan("https://host:8443/d/a.nc", {"headers": {"X-A": "1"}})
    assert plan is not None
    assert (plan.kind, plan.root, plan.path) == ("http", "https://host:8443", "d/a.nc")
    assert plan.settings == (("headers", (("X-A", "1"),)),)


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("https://host/a.nc", {"client_kwargs": {"auth": "x"}}),
        ("https://host/a.nc", {"headers": {"X-A": 1}}),
        ("https://host/a%20b.nc", {}),
        ("https://host/a.nc?x=1", {}),
        ("https://host/", {}),
        ("simplecache::https://host/a.nc", {}),
        ("memory://a/b", {}),
        ("s3://b/k", {"profile": "work"}),
        ("s3://b/k", {"key": "only-the-key"}),
        ("s3://b/k", {"client_kwargs": {"verify": False}}),
        ("gs://b/k", {"token": "/path/to/key.json"}),
        ("az://c/k", {}),
        ("abfs://c@account.dfs.core.windows.net/k", {"account_name": "account"}),
    ],
)
def test_options_obstore_cannot_express_are_left_to_fsspec(
    tmp_path: Path, url: str, options: dict[str, object]
) -> None:
    assert engine(home=tmp_path).plan(url, options) is None


def test_s3_settings_map_onto_object_store(tmp_path: Path) -> None:
    options = {
        "key": "k",
        "secret": "s",
        "token": "t",
        "requester_pays": True,
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "us-west-2"},
    }
    plan = engine(home=tmp_path).plan("s3://bucket/dir/key.bin", options)
    assert plan is not None
    assert (plan.kind, plan.root, plan.path) == ("s3", "bucket", "dir/key.bin")
    assert dict(plan.settings) == {
        "access_key_id": "k",
        "secret_access_key": "s",
        "session_token": "t",
        "request_payer": True,
        "endpoint": "http://127.0.0.1:9000",
        "region": "us-west-2",
    }
    anon = engine(home=tmp_path).plan("s3a://bucket/k", {"anon": True})
    assert anon is not None
    assert dict(anon.settings) == {"region": "eu-west-1", "skip_signature": True}


def test_s3_credentials_only_from_places_both_chains_read(tmp_path: Path) -> None:
    (tmp_path / ".aws").mkdir()
    region = {"AWS_REGION": "eu-west-1"}
    assert engine(region, tmp_path).plan("s3://b/k", {}) is None  # a profile file: botocore's
    assert engine(CREDENTIALS, tmp_path).plan("s3://b/k", {}) is not None
    assert engine({**region, "AWS_PROFILE": "x"}, tmp_path / "none").plan("s3://b/k", {}) is None
    assert engine(region, tmp_path / "none").plan("s3://b/k", {}) is not None  # instance role
    assert engine({}, tmp_path / "none").plan("s3://b/k", {}) is None  # no region: s3fs finds it


def test_gcs_and_azure_plans(tmp_path: Path) -> None:
    gcs = engine(home=tmp_path).plan("gs://bucket/k", {"token": "anon"})
    assert gcs is not None
    assert (gcs.kind, gcs.settings) == ("gcs", (("skip_signature", True),))
    assert engine(home=tmp_path).plan("gs://bucket/k", {}) is None  # gcsfs's default chain
    key_file = {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "key.json")}
    with_key = engine(key_file, tmp_path).plan("gs://bucket/k", {})
    assert with_key is not None
    assert with_key.settings == ()
    azure = engine(home=tmp_path).plan("az://container/k", {"account_name": "a", "sas_token": "s"})
    assert azure is not None
    assert (azure.kind, azure.root, dict(azure.settings)) == (
        "azure",
        "container",
        {"account_name": "a", "sas_key": "s"},
    )


@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        (obstore.exceptions.PreconditionError("412"), PreconditionFailed, None),
        (
            obstore.exceptions.NotFoundError("Object at location x not found"),
            TargetReadError,
            False,
        ),
        (obstore.exceptions.NotSupportedError("Range request not supported by x"), RangeIgnored, 0),
        (obstore.exceptions.GenericError("Content-Length Header missing from response"), 0, 0),
        (obstore.exceptions.PermissionDeniedError("denied"), TargetReadError, False),
        (obstore.exceptions.GenericError("Server returned non-2xx status code: 503"), 0, True),
        (obstore.exceptions.GenericError("Client error with status 404 Not Found"), 0, False),
        (obstore.exceptions.GenericError("HTTP error: error sending request"), 0, True),
    ],
)
def test_errors_are_classified(error: Exception, kind: object, retryable: bool | None) -> None:
    found = classify("https://h/k", error, 100)
    if kind == 0:
        kind = RangeIgnored if "Content-Length" in str(error) else TargetReadError
    assert type(found) is kind
    if isinstance(found, TargetError) and not isinstance(found, RangeIgnored):
        assert found.retryable is retryable
        assert found.url == "https://h/k"


async def test_a_pinned_read_carries_if_match_and_a_changed_target_is_noticed() -> None:
    with RangeHTTPServer({"obj": b"a" * 10_000}) as server:
        store = Store(pin=True)
        url = server.url_for("obj")
        assert await store.size(url) == 10_000
        assert bytes(await store.read_range(url, 0, 100)) == b"a" * 100
        assert store.engine_of(url) == "obstore"
        assert server.requests[-1].header("If-Match") == server.etag("obj")
        server.add("obj", b"b" * 10_000)
        with pytest.raises(TargetChangedError) as caught:
            await store.read_range(url, 0, 100)
        assert f"pinned ETag {server.etag('obj')}" not in str(caught.value)
        assert "now ETag" in str(caught.value)


async def test_statuses_through_obstore_are_classified() -> None:
    with RangeHTTPServer({"obj": b"x" * 100}) as server:
        store = Store()
        with pytest.raises(TargetError) as caught:
            await store.read_range(server.url_for("missing"), 0, 10)
        assert caught.value.retryable is False
        assert "not found" in caught.value.problem.lower()
        assert store.engine_of(server.url_for("missing")) == "obstore"


def test_the_innermost_cause_is_named() -> None:
    debug = '\n\nDebug source:\nGeneric {\n  Os {\n    message: "Connection reset by peer",\n  }\n}'
    error = obstore.exceptions.GenericError(f"HTTP error: error sending request{debug}")
    found = classify("https://h/k", error, 100)
    assert isinstance(found, TargetError)
    assert found.problem == (
        "GenericError: HTTP error: error sending request (Connection reset by peer)"
    )
    assert found.retryable is True


async def test_a_missing_target_is_one_line_naming_file_not_found() -> None:
    """obstore raises a plain FileNotFoundError for a 404, its text a multi-line trace."""
    with RangeHTTPServer({"obj": b"a" * 10}) as server:
        store = Store()
        for ask in (store.version, store.size, lambda url: store.read_range(url, 0, 4)):
            with pytest.raises(TargetReadError) as raised:
                await ask(server.url_for("missing"))
            assert "\n" not in str(raised.value)
            assert "FileNotFoundError" in str(raised.value)
            assert raised.value.retryable is False
