"""The obstore fetch engine: ranges and versions of S3, HTTP(S), GCS and Azure targets read by
Rust's ``object_store`` (through obstore), which signs requests and moves bytes without
holding the GIL.

``ObstoreEngine.plan`` says whether a URL and its storage options map onto obstore (None:
fsspec serves it); ``read`` and ``head`` are coroutines that must run on an asyncio loop
(the store runs them on fsspec's, as it runs fsspec's own). Every answer obstore gives is
held to what the fsspec engine guarantees:

- ``object_store`` sends no ``Accept-Encoding`` of its own and never inflates; the engine
  asks for ``identity`` and refuses an answer with another ``Content-Encoding`` before its
  body is read.
- ``object_store`` refuses, before any body is read, an answer to a range that is not 206
  (``RangeNotSupported``), one without ``Content-Length`` and one whose ``Content-Range`` is
  not the range asked for; HTTP/1.1 framing ends the body at its ``Content-Length``. So
  collecting the body (``bytes_async``) holds at most the range, and the engine checks the
  length once more. The first two raise ``RangeIgnored``: the store then reads that URL
  through fsspec, whose bounded stream takes a whole object asked for whole and refuses
  anything else with the exact figures.
- ``object_store``'s own retries are off (the reader retries, with its backoff and
  timeout); its client timeout is only a backstop above the reader's.
- The body is handed on as a ``memoryview`` of obstore's ``Bytes``: no copy.
"""

from __future__ import annotations

import email.utils
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import obstore
import obstore.exceptions
from obstore.store import AzureStore, GCSStore, HTTPStore, S3Store

from refmount.errors import TargetReadError
from refmount.store.failures import RETRYABLE_STATUS

if TYPE_CHECKING:
    from obstore import GetOptions
    from obstore.store import ClientConfig, RetryConfig

BACKSTOP_TIMEOUT = "1h"
"""obstore's own per-request timeout: the reader's timeout (``--timeout``) cancels first."""

CONNECT_TIMEOUT = "30s"

NO_RETRIES: RetryConfig = {
    "max_retries": 0,
    "retry_timeout": timedelta(seconds=0),
    "backoff": {"init_backoff": timedelta(milliseconds=1), "max_backoff": timedelta(seconds=1)},
}

HTTP_IGNORED = frozenset(
    {"block_size", "simple_links", "same_scheme", "cache_type", "cache_options", "size_policy"}
)
"""fsspec HTTP options that change nothing for a range read (fsspec's own file objects)."""

S3_IGNORED = frozenset({"default_block_size", "default_fill_cache", "default_cache_type"})
S3_KEYS = (
    frozenset({"anon", "key", "secret", "token", "endpoint_url", "client_kwargs", "requester_pays"})
    | S3_IGNORED
)
S3_CLIENT_KEYS = frozenset({"endpoint_url", "region_name"})

STATUS = re.compile(r"\b(?:status(?: code)?:?|HTTP status)\s*([1-5]\d\d)\b", re.IGNORECASE)
"""Where an obstore error's text names an HTTP status."""

CAUSE = re.compile(
    r'message: "([^"]*)"|\b(Incomplete\w+|Connection\w+|TimedOut|UnexpectedEof|BrokenPipe)\b'
)
"""The innermost cause in obstore's debug text (``Connection reset by peer``,
``IncompleteMessage``): its first line says only "error sending request"."""

ENGINE_NAME = "obstore"

GCS_CREDENTIALS = "GOOGLE_APPLICATION_CREDENTIALS"
"""Where object_store finds GCS credentials; without it (and no ``token: "anon"``) gcsfs,
which also tries gcloud's cache and falls back to anonymous access, reads the URL."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How obstore reads one URL: the store's key (protocol, bucket or origin, options) and
    the object's path in it."""

    kind: str
    root: str
    path: str
    settings: tuple[tuple[str, Any], ...]


class PreconditionFailed(Exception):
    """The target's version is no longer the one pinned (HTTP 412)."""


class RangeIgnored(TargetReadError):
    """The server answered a range with something ``object_store`` will not read (not 206,
    or no ``Content-Length``): the store reads this URL through fsspec from then on, which
    accepts a whole object asked for whole and words the refusal precisely otherwise."""


class ObstoreEngine:
    """Plans and runs obstore reads; one ``ObjectStore`` per (kind, root, options)."""

    name = ENGINE_NAME

    def __init__(self, environ: Mapping[str, str] | None = None, home: Path | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._home = Path.home() if home is None else home
        self._aws_chain = self._environment_credentials()
        """Whether object_store finds S3 credentials where botocore would (looked at once,
        here: the store is made before the event loop starts, and a look-up is a stat)."""
        self._stores: dict[tuple[str, str, tuple[tuple[str, Any], ...]], Any] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ planning

    def plan(self, url: str, options: Mapping[str, Any]) -> Plan | None:
        """Return how obstore reads ``url`` with ``options``, or None when it cannot."""
        if "::" in url or "%" in url or "?" in url or "#" in url:
            return None  # chains, encoded names, queries (S3 versions): fsspec's parsing
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        path = parts.path.lstrip("/")
        if not parts.netloc or not path:
            return None
        if scheme in ("http", "https"):
            return self._plan_http(parts.scheme, parts.netloc, path, options)
        if scheme in ("s3", "s3a"):
            return self._plan_s3(parts.netloc, path, options)
        if scheme in ("gs", "gcs"):
            if options.get("token") is None and not self._environ.get(GCS_CREDENTIALS):
                return None  # gcsfs's default chain (gcloud's cache, metadata, anonymous)
            return _plan_gcs(parts.netloc, path, options)
        if scheme in ("az", "abfs", "abfss"):
            return _plan_azure(parts.netloc, path, options)
        return None

    def _plan_http(
        self, scheme: str, netloc: str, path: str, options: Mapping[str, Any]
    ) -> Plan | None:
        if not set(options) <= HTTP_IGNORED | {"headers"}:
            return None
        headers = options.get("headers") or {}
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            return None
        settings = tuple(sorted(headers.items()))
        return Plan("http", f"{scheme}://{netloc}", path, (("headers", settings),))

    def _plan_s3(self, bucket: str, path: str, options: Mapping[str, Any]) -> Plan | None:
        if not set(options) <= S3_KEYS:
            return None
        client = options.get("client_kwargs") or {}
        if not isinstance(client, Mapping) or not set(client) <= S3_CLIENT_KEYS:
            return None
        endpoint = options.get("endpoint_url") or client.get("endpoint_url")
        region = client.get("region_name") or self._environ.get("AWS_REGION")
        region = region or self._environ.get("AWS_DEFAULT_REGION")
        if region is None and endpoint is None:
            return None  # s3fs finds a bucket's region; object_store does not
        anon = bool(options.get("anon"))
        key, secret, token = options.get("key"), options.get("secret"), options.get("token")
        if not anon and key is None and not self._aws_chain:
            return None  # profiles and config files: botocore's chain, not object_store's
        settings: dict[str, Any] = {"region": region or "us-east-1"}
        if endpoint is not None:
            settings["endpoint"] = str(endpoint)
        if anon:
            settings["skip_signature"] = True
        elif key is not None:
            if secret is None:
                return None
            settings["access_key_id"], settings["secret_access_key"] = str(key), str(secret)
            if token is not None:
                settings["session_token"] = str(token)
        if options.get("requester_pays"):
            settings["request_payer"] = True
        return Plan("s3", bucket, path, tuple(sorted(settings.items())))

    def _environment_credentials(self) -> bool:
        """Return True when object_store finds credentials where botocore would look first:
        the environment, a web identity, a container or instance role (no profile files)."""
        env = self._environ
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            return True
        if env.get("AWS_PROFILE") or env.get("AWS_SHARED_CREDENTIALS_FILE"):
            return False
        # else web identity, container or instance metadata: both chains agree
        return not (env.get("AWS_CONFIG_FILE") or (self._home / ".aws").exists())

    # ------------------------------------------------------------------ stores

    def store_for(self, plan: Plan) -> Any:
        """Return the ``ObjectStore`` that serves ``plan`` (created once)."""
        key = (plan.kind, plan.root, plan.settings)
        store = self._stores.get(key)
        if store is None:
            with self._lock:
                store = self._stores.get(key)
                if store is None:
                    store = self._stores[key] = _new_store(plan)
        return store

    # ------------------------------------------------------------------ requests

    async def read(
        self, url: str, plan: Plan, start: int, end: int, condition: Mapping[str, str]
    ) -> memoryview:
        """GET ``[start, end)`` (on an asyncio loop); ``condition`` is the pin's header
        (``If-Match`` or ``If-Unmodified-Since``), if any."""
        expected = end - start
        options: GetOptions = {"range": (start, end)}
        if "If-Match" in condition:
            options["if_match"] = condition["If-Match"]
        elif "If-Unmodified-Since" in condition:
            since = email.utils.parsedate_to_datetime(condition["If-Unmodified-Since"])
            options["if_unmodified_since"] = since
        try:
            result = await obstore.get_async(self.store_for(plan), plan.path, options=options)
            encoding = str(result.attributes.get("Content-Encoding", "")).strip().lower()
            if encoding not in ("", "identity"):
                raise TargetReadError(
                    url,
                    f"the server sent a body with Content-Encoding {encoding!r} (HTTP 206) for "
                    f"a {expected}-byte range; only identity was asked for",
                    retryable=False,
                )
            data = memoryview(await result.bytes_async())
        except OBSTORE_ERRORS as error:
            raise classify(url, error, expected) from error
        if len(data) > expected:
            raise TargetReadError(
                url,
                "the server ignored the Range request: it answered with more bytes "
                f"({len(data)}) for a {expected}-byte range",
                retryable=False,
            )
        return data

    async def head(self, url: str, plan: Plan) -> dict[str, Any]:
        """Return the target's size and version as fsspec's ``info`` names them."""
        try:
            meta = await obstore.head_async(self.store_for(plan), plan.path)
        except OBSTORE_ERRORS as error:
            raise classify(url, error, None) from error
        info: dict[str, Any] = {"size": meta["size"]}
        if meta.get("e_tag"):
            info["ETag"] = meta["e_tag"]
        modified = meta.get("last_modified")
        if modified.timestamp() > 0:  # 0: the server sent none
            info["Last-Modified"] = email.utils.format_datetime(modified, usegmt=True)
        return info


def _plan_gcs(bucket: str, path: str, options: Mapping[str, Any]) -> Plan | None:
    token = options.get("token")
    if not set(options) <= {"token"} or token not in (None, "anon"):
        return None
    settings = (("skip_signature", True),) if token == "anon" else ()
    return Plan("gcs", bucket, path, settings)


def _plan_azure(container: str, path: str, options: Mapping[str, Any]) -> Plan | None:
    known = {"account_name", "account_key", "sas_token", "anon"}
    if "@" in container or not set(options) <= known:
        return None
    account = options.get("account_name")
    if not isinstance(account, str):
        return None
    settings: dict[str, Any] = {"account_name": account}
    if options.get("anon"):
        settings["skip_signature"] = True
    for theirs, ours in (("account_key", "account_key"), ("sas_token", "sas_key")):
        if options.get(theirs) is not None:
            settings[ours] = str(options[theirs])
    return Plan("azure", container, path, tuple(sorted(settings.items())))


def _new_store(plan: Plan) -> Any:
    settings = dict(plan.settings)
    client: ClientConfig = {
        "timeout": BACKSTOP_TIMEOUT,
        "connect_timeout": CONNECT_TIMEOUT,
        "default_headers": {"Accept-Encoding": "identity"},
    }
    if plan.kind == "http":
        client["allow_http"] = plan.root.lower().startswith("http:")
        client["default_headers"] = {**dict(settings["headers"]), "Accept-Encoding": "identity"}
        return HTTPStore.from_url(plan.root, client_options=client, retry_config=NO_RETRIES)
    if plan.kind == "s3":
        client["allow_http"] = str(settings.get("endpoint", "")).lower().startswith("http:")
        return S3Store(plan.root, client_options=client, retry_config=NO_RETRIES, **settings)
    if plan.kind == "gcs":
        return GCSStore(plan.root, client_options=client, retry_config=NO_RETRIES, **settings)
    return AzureStore(plan.root, client_options=client, retry_config=NO_RETRIES, **settings)


OBSTORE_ERRORS = (obstore.exceptions.BaseError, FileNotFoundError)
"""What obstore raises: its own errors, and a plain ``FileNotFoundError`` for a 404 (whose
text holds a multi-line debug trace, like the others')."""


def classify(url: str, error: BaseException, expected: int | None) -> Exception:
    """Return the error that stands for obstore's ``error`` (a ``TargetError``, or
    ``PreconditionFailed`` / ``FileNotFoundError`` for the store to word)."""
    text, _, debug = str(error).partition("\n\nDebug source:")
    text = text.strip()
    causes = CAUSE.findall(debug)
    if causes:
        cause = causes[-1][0] or causes[-1][1]
        if cause not in text:
            text = f"{text} ({cause})"
    if isinstance(error, obstore.exceptions.PreconditionError):
        return PreconditionFailed(text)
    if isinstance(error, obstore.exceptions.NotFoundError | FileNotFoundError):
        return TargetReadError(url, f"FileNotFoundError: {text}", retryable=False)
    if isinstance(error, obstore.exceptions.NotSupportedError) and "Range" in text:
        return RangeIgnored(
            url, f"the server answered a {expected}-byte range with another status than 206"
        )
    if "Content-Length Header missing" in text:
        return RangeIgnored(
            url, f"the server answered a {expected}-byte range without Content-Length"
        )
    if isinstance(
        error,
        obstore.exceptions.PermissionDeniedError
        | obstore.exceptions.UnauthenticatedError
        | obstore.exceptions.InvalidPathError
        | obstore.exceptions.UnknownConfigurationKeyError,
    ):
        return TargetReadError(url, f"{type(error).__name__}: {text}", retryable=False)
    status = STATUS.search(text)
    retryable = status is None or int(status.group(1)) in RETRYABLE_STATUS
    return TargetReadError(url, f"{type(error).__name__}: {text}", retryable=retryable)
