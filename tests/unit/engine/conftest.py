"""Fixtures for the engine's tests: moto's S3 server on 127.0.0.1 with a bucket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, object]]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    endpoint = f"http://{host}:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="kv-t4")
    try:
        yield endpoint, server
    finally:
        server.stop()


def _client() -> object:
    from kvtool.probe.host import s3_client

    return s3_client(connect_timeout_s=0.5)
