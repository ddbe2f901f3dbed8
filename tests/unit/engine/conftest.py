"""Fixtures for the engine's tests: moto's S3 server on 127.0.0.1 with a bucket; for the
smoke's (test_smoke*.py, which use ``tmpdir_here`` on every test) TMPDIR inside the test's own
folder and a T3 folder."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def tmpdir_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR inside this test's tmp_path, and tempfile's cached choice forgotten."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return folder


@pytest.fixture
def t3_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "fsx"
    folder.mkdir()
    return folder


def _client() -> object:
    from kvtool.probe.host import s3_client

    return s3_client(connect_timeout_s=0.5)
