"""What the read path's tests share: a counting in-memory target and readers over it."""

from __future__ import annotations

import pytest

from refmount.config import ReadConfig, RetryConfig
from refmount.read.reader import Reader
from tests.fakes import MemoryTarget

DATA = bytes(range(256)) * 64  # 16 KiB


@pytest.fixture
def target() -> MemoryTarget:
    return MemoryTarget(objects={"mem://obj": DATA})


def reader_for(target: MemoryTarget, retry: RetryConfig | None = None, **config: int) -> Reader:
    return Reader(target, ReadConfig(**config), retry or RetryConfig(retries=0))
