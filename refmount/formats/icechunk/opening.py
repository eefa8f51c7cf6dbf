"""Opening an Icechunk repository read-only at one snapshot: its storage from a path or URL,
the virtual chunk containers the mount may read, and the branch, tag or snapshot resolved
once (the mount never follows a branch afterwards)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import icechunk
import icechunk.credentials

from refmount.config import REPOSITORY_ALL_CONTAINERS, RepositoryVersion
from refmount.errors import ReferenceFormatError
from refmount.formats.icechunk.layout import (
    MANIFESTS,
    REPOSITORY_FILE,
    SNAPSHOTS,
    ContainerOptions,
    FileLimit,
)
from refmount.urls import protocol_of

LOG_VARIABLE = "ICECHUNK_LOG"
"""Icechunk's own log filter: where it is set, its choice stands."""

S3_PROTOCOLS = ("s3", "s3a")
GCS_PROTOCOLS = ("gs", "gcs")


@dataclass(frozen=True, slots=True)
class OpenedSnapshot:
    """A repository opened read-only at one snapshot.

    ``session`` is Icechunk's read-only session of that snapshot (its ``store`` serves every
    key); ``containers`` are the URL prefixes of the virtual chunk containers the repository
    declares, ``authorized`` those the mount may read.
    """

    url: str
    session: Any
    snapshot_id: str
    written_at: float
    containers: tuple[str, ...]
    authorized: tuple[str, ...]


def open_snapshot(
    url: str,
    version: RepositoryVersion,
    authorize: Sequence[str] = (),
    s3_options: Mapping[str, Any] | None = None,
    limit: FileLimit | None = None,
    container_options: ContainerOptions | None = None,
) -> OpenedSnapshot:
    """Open the repository at ``url`` and resolve ``version`` to one snapshot.

    Raises ``ReferenceFormatError`` naming ``url`` when there is no repository, the version
    does not exist, or a container to authorize is not one the repository declares; with a
    ``limit``, naming the file when one that Icechunk would read whole (the repository
    file, the snapshot's, its manifests) is larger than that. ``container_options`` gives
    the storage options of an authorized container's prefix (s3fs's names, as for
    targets), which its credentials come from (``container_credentials``).
    """
    quiet_library_logs()
    storage = repository_storage(url, s3_options or {})
    if limit is not None:
        limit.check(url, REPOSITORY_FILE)
    try:
        config = icechunk.Repository.fetch_config(storage)
    except icechunk.IcechunkError as error:
        raise _problem(url, "cannot open the repository", error) from error
    containers = (config.virtual_chunk_containers or {}) if config is not None else {}
    stores = {container.url_prefix: container.store for container in containers.values()}
    declared = tuple(sorted(stores))
    authorized = authorized_prefixes(url, declared, authorize)
    options = container_options or _no_options
    access = icechunk.credentials.containers_credentials(  # each wrapped as Icechunk asks
        {prefix: container_credentials(stores[prefix], options(prefix)) for prefix in authorized}
    )
    try:
        repository = icechunk.Repository.open(storage, authorize_virtual_chunk_access=access)
        session = repository.readonly_session(
            branch=None if (version.tag or version.snapshot) else (version.branch or "main"),
            tag=version.tag,
            snapshot_id=version.snapshot,
        )
        snapshot_id = session.snapshot_id
        if limit is not None:
            limit.check(url, f"{SNAPSHOTS}/{snapshot_id}")
            for manifest in repository.list_manifest_files(snapshot_id):
                limit.check(url, f"{MANIFESTS}/{manifest.id}")
        written_at = repository.lookup_snapshot(snapshot_id).written_at.timestamp()
    except icechunk.IcechunkError as error:
        raise _problem(url, f"cannot open {version.describe()}", error) from error
    return OpenedSnapshot(url, session, snapshot_id, written_at, declared, authorized)


def quiet_library_logs() -> None:
    """Keep Icechunk's own log (written to stderr, outside refmount's) to its errors, unless
    ``ICECHUNK_LOG`` asks otherwise: its warnings concern writers (a local repository "is
    not safe for concurrent commits"), and what fails a read reaches refmount's log anyway."""
    if LOG_VARIABLE not in os.environ:
        icechunk.set_logs_filter("error")


def authorized_prefixes(
    url: str, declared: Sequence[str], authorize: Sequence[str]
) -> tuple[str, ...]:
    """Return the container prefixes ``--authorize-container`` names (``all``: every one
    declared); raise ``ReferenceFormatError`` for a prefix the repository does not declare."""
    if REPOSITORY_ALL_CONTAINERS in authorize:
        return tuple(declared)
    for prefix in authorize:
        if prefix not in declared:
            listed = ", ".join(declared) or "none"
            raise ReferenceFormatError(
                url,
                None,
                f"--authorize-container {prefix}: the repository declares no such virtual "
                f"chunk container (it declares: {listed})",
            )
    return tuple(sorted(set(authorize)))


def container_credentials(store: object, options: Mapping[str, Any]) -> object:
    """Return the credentials a container's store is read with: for S3, anonymous access
    (``anon``) or static credentials (``key``, ``secret``, ``token``) when ``options`` (the
    storage options of the container's prefix) give them, else the environment's chain; the
    environment's for the other cloud stores (as their own tools find them); none needed
    for local files and HTTP."""
    config = icechunk.ObjectStoreConfig
    if isinstance(store, config.LocalFileSystem):
        return icechunk.credentials.LocalFileSystemAccess
    if isinstance(store, config.Http):
        return icechunk.credentials.HttpAccess
    if isinstance(store, config.Gcs):
        return icechunk.credentials.gcs_from_env_credentials()
    if isinstance(store, config.Azure):
        return icechunk.credentials.azure_from_env_credentials()
    if options.get("anon"):
        return icechunk.credentials.s3_anonymous_credentials()
    key, secret = options.get("key"), options.get("secret")
    if key and secret:
        token = options.get("token")
        return icechunk.credentials.s3_static_credentials(
            access_key_id=str(key),
            secret_access_key=str(secret),
            session_token=str(token) if token else None,
        )
    return icechunk.credentials.s3_from_env_credentials()


def _no_options(prefix: str) -> Mapping[str, Any]:
    return {}


def repository_storage(url: str, s3_options: Mapping[str, Any]) -> Any:
    """Return Icechunk's storage for a repository at a local path, ``file://``, ``s3://`` or
    ``gs://`` URL. For S3, ``s3_options`` are the s3fs storage options of the URL (the
    ``-o s3_*`` shortcuts and ``--target-options``): ``endpoint_url`` (plain HTTP and path
    style then), ``client_kwargs.region_name``, ``anon``, ``requester_pays``, and ``key``,
    ``secret`` and ``token`` as static credentials (else the environment's chain). Raises
    ``ReferenceFormatError`` for any other protocol."""
    protocol = protocol_of(url)
    if protocol is None or protocol == "file":
        return icechunk.local_filesystem_storage(url.removeprefix("file://"))
    bucket, _, path = url.split("://", 1)[1].partition("/")
    prefix = path.strip("/") or None
    if protocol in S3_PROTOCOLS:
        endpoint = s3_options.get("endpoint_url")
        region = (s3_options.get("client_kwargs") or {}).get("region_name")
        anonymous = bool(s3_options.get("anon"))
        key, secret = s3_options.get("key"), s3_options.get("secret")
        static = not anonymous and bool(key and secret)
        return icechunk.s3_storage(
            bucket=bucket,
            prefix=prefix,
            region=region,
            endpoint_url=endpoint,
            allow_http=bool(endpoint and str(endpoint).startswith("http://")),
            force_path_style=endpoint is not None,
            access_key_id=str(key) if static else None,
            secret_access_key=str(secret) if static else None,
            session_token=str(s3_options["token"]) if static and s3_options.get("token") else None,
            anonymous=anonymous,
            from_env=not (anonymous or static),
            requester_pays=bool(s3_options.get("requester_pays")),
        )
    if protocol in GCS_PROTOCOLS:
        return icechunk.gcs_storage(bucket=bucket, prefix=prefix, from_env=True)
    raise ReferenceFormatError(
        url, None, f"cannot open an Icechunk repository at a {protocol}:// URL (local, s3, gs)"
    )


def _problem(url: str, what: str, error: BaseException) -> ReferenceFormatError:
    return ReferenceFormatError(url, None, f"{what}: {first_line(error)}")


def first_line(error: BaseException) -> str:
    """Return the first line of an Icechunk error (the rest is its trace of contexts)."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
