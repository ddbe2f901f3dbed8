"""T4 in S3 (engine/s3.py) against moto's server on 127.0.0.1: round trips, corruption and
prefix deletion, and a frozen endpoint costing one deadline."""

from __future__ import annotations

import time

import pytest

from kvtool.engine.chunkfile import CorruptChunk
from kvtool.engine.mediums import (
    MediumError,
    S3Medium,
)
from tests.unit.engine.helpers import KEYS, payload, s3_client


def test_s3_round_trip_corruption_and_delete_prefix(s3: tuple[str, object]) -> None:
    import boto3

    t4 = S3Medium("T4", "s3://kv-t4/smoke", client_factory=s3_client)
    key = KEYS[2]
    t4.put(key, payload(key))
    assert t4.contains(key)
    assert t4.get(key) == payload(key)
    raw = boto3.client("s3", region_name="us-east-1")
    body = bytearray(raw.get_object(Bucket="kv-t4", Key=t4.object_key(key))["Body"].read())
    body[-1] ^= 1
    raw.put_object(Bucket="kv-t4", Key=t4.object_key(key), Body=bytes(body))
    with pytest.raises(CorruptChunk):
        t4.get(key)
    assert not t4.contains(key)  # deleted, never served again
    t4.put(KEYS[3], payload(KEYS[3]))
    assert t4.delete_prefix() == 1
    assert raw.list_objects_v2(Bucket="kv-t4").get("KeyCount") == 0


@pytest.mark.server
def test_a_frozen_s3_costs_one_deadline_not_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that accepts and never answers stalled each read about 4 minutes (30 s read
    timeout x retries at two levels); the medium's deadline bounds the whole operation."""
    import socket
    import threading

    from kvtool.probe.host import s3_client as make_client

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accept and say nothing
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.getsockname()[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    t4 = S3Medium(
        "T4",
        "s3://kv/frozen",
        client_factory=lambda: make_client(connect_timeout_s=0.5, read_timeout_s=0.5, attempts=1),
        backoff_s=0.05,
        deadline_s=1.5,
    )
    start = time.monotonic()
    try:
        with pytest.raises(MediumError, match="T4 S3 get_object failed"):
            t4.get(KEYS[0])
    finally:
        stop.set()
        for conn in held:
            conn.close()
        server.close()
    assert time.monotonic() - start < 5.0
