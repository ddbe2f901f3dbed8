"""T4 (``kvtool.bench.s3``): ``s3://bucket/prefix`` parsing, PUT and GET through a boto3
client against moto's S3 server on 127.0.0.1 (the objects under a temporary prefix, deleted
afterwards, also when a call fails), the one-line errors, and, through an in-memory client,
the concurrency, the deletes in batches of 1,000 and the error reasons."""

from __future__ import annotations

import io
import os
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kvtool.bench.s3 import parse_s3_url, run_t4
from kvtool.errors import InputError

KiB = 2**10


def _reset_moto(endpoint: str) -> None:
    """Empty moto's backends: they live in this process and outlast one server."""
    import urllib.request

    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


@pytest.fixture
def s3_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 with dummy credentials and a bucket ``kv-bench``, its
    state emptied before and after."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    _reset_moto(f"http://{host}:{port}")
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="kv-bench")
    try:
        yield f"http://{host}:{port}"
    finally:
        _reset_moto(f"http://{host}:{port}")
        server.stop()


def _client() -> Any:
    from kvtool.probe.host import s3_client

    return s3_client(connect_timeout_s=1.0)


def _keys(bucket: str = "kv-bench") -> list[str]:
    listing = _client().list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


class Recording:
    """A real client, with every PUT's key and body and every GET's key and body kept."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.lock = threading.Lock()
        self.puts: dict[str, bytes] = {}
        self.gets: dict[str, bytes] = {}
        self.deletes: list[list[str]] = []

    def put_object(self, *, Bucket: str, Key: str, Body: bytes) -> Any:
        with self.lock:
            self.puts[Key] = Body
        return self.client.put_object(Bucket=Bucket, Key=Key, Body=Body)

    def get_object(self, *, Bucket: str, Key: str) -> Any:
        response = self.client.get_object(Bucket=Bucket, Key=Key)
        body = response["Body"].read()
        with self.lock:
            self.gets[Key] = body
        return {**response, "Body": io.BytesIO(body)}

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> Any:
        self.deletes.append([o["Key"] for o in Delete["Objects"]])
        return self.client.delete_objects(Bucket=Bucket, Delete=Delete)


class Memory:
    """An S3 client in memory: objects by (bucket, key); ``fail_put`` / ``fail_get`` name an
    exception to raise for a key; ``barrier`` makes each timed call wait for its peers."""

    def __init__(
        self,
        *,
        fail_put: dict[str, Exception] | None = None,
        fail_get: Exception | None = None,
        fail_delete: Exception | None = None,
        barrier: threading.Barrier | None = None,
    ) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.lock = threading.Lock()
        self.fail_put = fail_put or {}
        self.fail_get = fail_get
        self.fail_delete = fail_delete
        self.barrier = barrier
        self.put_calls = 0
        self.deletes: list[list[str]] = []

    def _wait(self, key: str) -> None:
        if self.barrier is not None and not key.endswith("/warmup"):
            self.barrier.wait()  # BrokenBarrierError unless enough calls run at once

    def put_object(self, *, Bucket: str, Key: str, Body: bytes) -> None:
        with self.lock:
            self.put_calls += 1
        for suffix, exc in self.fail_put.items():
            if Key.endswith(suffix):
                raise exc
        self._wait(Key)
        with self.lock:
            self.objects[(Bucket, Key)] = bytes(Body)

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        if self.fail_get is not None:
            raise self.fail_get
        self._wait(Key)
        with self.lock:
            return {"Body": io.BytesIO(self.objects[(Bucket, Key)])}

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> None:
        keys = [o["Key"] for o in Delete["Objects"]]
        self.deletes.append(keys)
        if self.fail_delete is not None:
            raise self.fail_delete
        with self.lock:
            for key in keys:
                self.objects.pop((Bucket, key), None)


class ServiceError(Exception):
    """What botocore's ClientError carries: ``response["Error"]`` with a code and message."""

    def __init__(self, code: str, message: str | None) -> None:
        super().__init__(f"An error occurred ({code})")
        self.response = {"Error": {"Code": code, **({"Message": message} if message else {})}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the URL -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("s3://kv-bench/kv", ("kv-bench", "kv")),
        ("s3://kv-bench", ("kv-bench", "")),
        ("s3://kv-bench/", ("kv-bench", "")),
        ("s3://kv-bench/a/b/", ("kv-bench", "a/b")),
        ("s3://kv-bench//a//", ("kv-bench", "a")),
    ],
)
def test_an_s3_url_is_a_bucket_and_a_prefix_without_outer_slashes(
    url: str, parsed: tuple[str, str]
) -> None:
    assert parse_s3_url(url) == parsed


@pytest.mark.parametrize("url", ["http://kv-bench/kv", "s3://", "s3:///kv", "kv-bench/kv", ""])
def test_what_is_not_s3_bucket_prefix_is_an_input_error(url: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_s3_url(url)
    assert caught.value.message == f"--t4-url {url!r} is not s3://bucket/prefix"
    assert caught.value.hint == "e.g. s3://my-bucket/kv"


# --- against moto's server ------------------------------------------------------------------------


def test_puts_and_gets_report_both_ops_and_delete_only_their_own_objects(
    s3_endpoint: str,
) -> None:
    import boto3

    _client().put_object(Bucket="kv-bench", Key="kv/someone-elses.bin", Body=b"keep me")
    client = Recording(_client())
    messages: list[str] = []
    put, get = run_t4(client, "s3://kv-bench/kv", object_bytes=64 * KiB, objects=6,
                      concurrency=3, progress=messages.append)  # fmt: skip
    assert messages == ["T4 put: 6 x 0.06 MiB, 3 threads", "T4 get: 6 objects, 3 threads"]
    assert (put.op, get.op) == ("put", "get")
    for result in (put, get):
        assert (result.tier, result.status) == ("t4", "ok")
        assert result.tool == f"boto3 {boto3.__version__}"
        assert result.block_bytes == 64 * KiB
        assert result.threads == 3
        assert result.iops is not None
        assert result.iops > 0
        assert result.bytes_per_s == pytest.approx(result.iops * 64 * KiB)
        assert result.latency_us is not None
        assert 0 < result.latency_us.p50 <= result.latency_us.p99 <= result.latency_us.p999
        assert result.note == (
            "put_object/get_object (boto3's classic client), 3 threads, 6 objects of 0.06 MiB"
            " under a temporary prefix, deleted after"
        )
    # under kv/kvtool-bench-<pid>-<6 hex digits>/: a warm-up object and 000000..000005
    (base,) = {k.rsplit("/", 1)[0] for k in client.puts}
    assert re.fullmatch(rf"kv/kvtool-bench-{os.getpid()}-[0-9a-f]{{6}}", base)
    assert sorted(client.puts) == sorted([f"{base}/warmup"] + [f"{base}/{i:06d}" for i in range(6)])
    bodies = set(client.puts.values())
    assert len(bodies) == 1
    assert len(bodies.pop()) == 64 * KiB
    assert sorted(client.gets) == [f"{base}/{i:06d}" for i in range(6)]  # the warm-up is not read
    assert set(client.gets.values()) == set(client.puts.values())
    assert sorted(k for batch in client.deletes for k in batch) == sorted(client.puts)
    assert _keys() == ["kv/someone-elses.bin"]


def test_a_url_without_a_prefix_puts_at_the_bucket_root_and_leaves_it_empty(
    s3_endpoint: str,
) -> None:
    client = Recording(_client())
    run_t4(client, "s3://kv-bench", object_bytes=4 * KiB, objects=2, concurrency=2)
    assert client.puts
    assert all(re.match(r"kvtool-bench-\d+-[0-9a-f]{6}/", k) for k in client.puts)
    assert _keys() == []


def test_a_missing_bucket_fails_once_on_the_warm_up_with_one_line(s3_endpoint: str) -> None:
    client = Recording(_client())
    with pytest.raises(InputError) as caught:
        run_t4(client, "s3://no-such-bucket/kv", object_bytes=KiB, objects=8, concurrency=4)
    assert caught.value.message == (
        "S3 at s3://no-such-bucket/kv failed: NoSuchBucket: The specified bucket does not exist"
    )
    assert "AWS_ENDPOINT_URL" in caught.value.hint
    assert [k.rsplit("/", 1)[1] for k in client.puts] == ["warmup"]  # not once per object


def test_a_failing_get_still_deletes_every_object_put(s3_endpoint: str) -> None:
    from botocore.exceptions import ClientError

    class SlowDown(Recording):
        def get_object(self, *, Bucket: str, Key: str) -> Any:
            raise ClientError(
                {"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}},
                "GetObject",
            )

    client = SlowDown(_client())
    with pytest.raises(InputError) as caught:
        run_t4(client, "s3://kv-bench/kv", object_bytes=4 * KiB, objects=5, concurrency=2)
    assert caught.value.message == (
        "S3 at s3://kv-bench/kv failed: SlowDown: Please reduce your request rate."
    )
    assert len(client.puts) == 6
    assert _keys() == []


def test_an_unreachable_endpoint_is_one_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from botocore.config import Config

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.session.Session().client(
        "s3",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{_free_port()}",
        config=Config(connect_timeout=1, retries={"total_max_attempts": 1}),
    )
    with pytest.raises(InputError) as caught:
        run_t4(client, "s3://kv-bench/kv", object_bytes=KiB, objects=2, concurrency=2)
    assert caught.value.message.startswith(
        "S3 at s3://kv-bench/kv failed: EndpointConnectionError: Could not connect to the"
        " endpoint URL"
    )
    assert "\n" not in caught.value.message


# --- through an in-memory client ------------------------------------------------------------------


def test_puts_and_gets_really_run_on_concurrency_threads() -> None:
    # each timed call waits until 4 are in flight: a serial loop would break the barrier
    client = Memory(barrier=threading.Barrier(4, timeout=10))
    put, get = run_t4(client, "s3://b/p", object_bytes=KiB, objects=8, concurrency=4)
    assert (put.threads, get.threads) == (4, 4)
    assert client.objects == {}


def test_deletes_go_in_batches_of_at_most_a_thousand_keys() -> None:
    client = Memory()
    run_t4(client, "s3://b/p", object_bytes=16, objects=1001, concurrency=16)
    assert [len(batch) for batch in client.deletes] == [1000, 2]  # 1,001 objects + the warm-up
    assert len({k for batch in client.deletes for k in batch}) == 1002
    assert client.objects == {}


def test_a_failed_put_deletes_exactly_what_was_written() -> None:
    client = Memory(fail_put={"/000003": RuntimeError("connection reset by peer\nat line 2")})
    with pytest.raises(InputError) as caught:
        run_t4(client, "s3://b/p", object_bytes=KiB, objects=6, concurrency=2)
    assert caught.value.message == "S3 at s3://b/p failed: RuntimeError: connection reset by peer"
    deleted = [k for batch in client.deletes for k in batch]
    assert not any(k.endswith("/000003") for k in deleted)  # never written, never deleted
    assert {k.rsplit("/", 1)[1] for k in deleted} >= {"warmup", "000000", "000001", "000002"}
    assert client.objects == {}


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ServiceError("AccessDenied", "Access Denied"), "AccessDenied: Access Denied"),
        (ServiceError("AccessDenied", None), "AccessDenied: no message"),
        (RuntimeError(""), "RuntimeError"),
        (TimeoutError("read timed out"), "TimeoutError: read timed out"),
    ],
)
def test_the_error_line_names_the_code_or_the_exception(error: Exception, reason: str) -> None:
    client = Memory(fail_put={"/warmup": error})
    with pytest.raises(InputError) as caught:
        run_t4(client, "s3://b/p", object_bytes=KiB, objects=2, concurrency=2)
    assert caught.value.message == f"S3 at s3://b/p failed: {reason}"
    assert client.put_calls == 1


def test_an_input_error_from_the_client_passes_through_unchanged() -> None:
    error = InputError("boto3 is not installed", "pip install 'kvtool[aws]'")
    client = Memory(fail_get=error)
    with pytest.raises(InputError) as caught:
        run_t4(client, "s3://b/p", object_bytes=KiB, objects=2, concurrency=2)
    assert caught.value is error
    assert client.objects == {}


def test_a_delete_that_fails_does_not_hide_the_measurements() -> None:
    client = Memory(fail_delete=ServiceError("AccessDenied", "no s3:DeleteObject"))
    results = run_t4(client, "s3://b/p", object_bytes=KiB, objects=3, concurrency=3)
    assert [(r.op, r.status) for r in results] == [("put", "ok"), ("get", "ok")]
    assert len(client.deletes) == 1  # tried once, best effort
