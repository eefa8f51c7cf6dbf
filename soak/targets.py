"""The targets the mount reads, on 127.0.0.1: an HTTP range server and a local S3 server
(moto) with generated objects, each behind a fault proxy, started and stopped here."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from soak.arguments import Settings
from soak.dataset import Target
from tests.support.servers import (
    AWS_VARIABLES_TO_CLEAR,
    DUMMY_AWS_ENVIRONMENT,
    FaultProxy,
    RangeHTTPServer,
    create_bucket,
    moto_s3,
)

BUCKET = "refmount-soak"


@dataclass
class Serving:
    """The running targets, their fault proxies by target name, and the refmount options that
    reach them."""

    targets: list[Target] = field(default_factory=list)
    proxies: dict[str, FaultProxy] = field(default_factory=dict)
    options: list[str] = field(default_factory=list)

    def add(self, target: Target, proxy: FaultProxy) -> None:
        """Serve ``target`` through ``proxy``."""
        self.targets.append(target)
        self.proxies[target.name] = proxy


def use_dummy_aws_credentials() -> None:
    """Replace any AWS settings of this process (the daemon inherits them) with dummy ones."""
    for name in AWS_VARIABLES_TO_CLEAR:
        os.environ.pop(name, None)
    os.environ.update(DUMMY_AWS_ENVIRONMENT)


def s3_url(path: str) -> str:
    """The URL of ``/bucket/key``: ``s3://bucket/key``."""
    return f"s3:/{path}"


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[Serving]:
    """Start the targets ``settings`` names, each with ``--objects`` random objects (seeded)
    behind a fault proxy that passes every request for now; stop them all afterwards."""
    use_dummy_aws_credentials()
    rng = random.Random(settings.seed)
    size = settings.object_bytes
    with contextlib.ExitStack() as stack:
        served = Serving()
        if "http" in settings.targets:
            files = {f"/o{j}.bin": rng.randbytes(size) for j in range(settings.objects)}
            server = stack.enter_context(RangeHTTPServer(files))
            proxy = stack.enter_context(FaultProxy(server.url, seed=settings.seed))
            served.add(Target("http", files, proxy.url_for), proxy)
        if "s3" in settings.targets:
            endpoint = stack.enter_context(moto_s3())
            objects = {f"o{j}.bin": rng.randbytes(size) for j in range(settings.objects)}
            bucket = create_bucket(endpoint, BUCKET, objects)
            proxy = stack.enter_context(FaultProxy(endpoint, seed=settings.seed + 1))
            paths = {f"/{bucket.name}/{name}": data for name, data in objects.items()}
            served.add(Target("s3", paths, s3_url), proxy)
            served.options += ["-o", f"s3_endpoint_url={proxy.url}"]
        yield served
