"""Fault proxies that recorded given faults, for the soak's tests of what explains an EIO."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.servers import Fault, FaultProxy, Request

Recorder = Callable[..., FaultProxy]


@pytest.fixture
def recorded() -> Iterator[Recorder]:
    """Make fault proxies (never started) that applied the given ``(path, fault)`` in order,
    now; they are closed afterwards."""
    made: list[FaultProxy] = []

    def make(*applied: tuple[str, Fault]) -> FaultProxy:
        proxy = FaultProxy("http://127.0.0.1:9")
        made.append(proxy)
        for path, fault in applied:
            proxy.fail_next(1, fault)
            proxy.decide(Request("GET", path, None))
        return proxy

    yield make
    for proxy in made:
        proxy.stop()
