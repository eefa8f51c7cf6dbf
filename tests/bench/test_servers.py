"""The servers' side of the benchmark: the generated files uploaded to an S3 server."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest

from bench.datasets import DataSet
from bench.servers import Server, s3_options, s3_upload
from tests.support.servers import (
    AWS_VARIABLES_TO_CLEAR,
    DUMMY_AWS_ENVIRONMENT,
    create_bucket,
    moto_s3,
)


@pytest.mark.s3
def test_the_generated_files_are_uploaded_where_the_urls_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in AWS_VARIABLES_TO_CLEAR:  # nothing that could reach a real account
        monkeypatch.delenv(name, raising=False)
    for name, value in DUMMY_AWS_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    data = DataSet(tmp_path, big_chunks=1, many_chunks=3)
    data.generate()
    with moto_s3() as endpoint:
        create_bucket(endpoint, "bench")
        server = Server(endpoint, "moto", list)
        urls = s3_upload(server, data)
        assert urls == {"big": "s3://bench/big.bin", "many": "s3://bench/many.bin"}
        fs = fsspec.filesystem("s3", skip_instance_cache=True, **s3_options(server))
        assert fs.cat(urls["big"]) == data.big_file.read_bytes()
        assert fs.cat(urls["many"]) == data.many_file.read_bytes()
