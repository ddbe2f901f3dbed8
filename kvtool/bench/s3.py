"""T4: S3 PUT and GET of KV-sized objects at a chosen concurrency, through a boto3 client
passed in (``AWS_ENDPOINT_URL`` and the credential chain apply where the caller builds it).
The test objects live under a unique prefix and are deleted afterwards, also on errors."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kvtool.bench.result import BenchResult, latency_of
from kvtool.errors import InputError, redact
from kvtool.scratch import Scratch, signals_held


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> ``("bucket", "prefix")``; InputError otherwise."""
    if not url.startswith("s3://") or not url[5:].split("/")[0]:
        raise InputError(f"--t4-url {url!r} is not s3://bucket/prefix", "e.g. s3://my-bucket/kv")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix.strip("/")


def run_t4(
    client: Any,
    url: str,
    *,
    object_bytes: int,
    objects: int,
    concurrency: int,
    progress: Callable[[str], None] = lambda _: None,
) -> list[BenchResult]:
    """PUT ``objects`` objects of ``object_bytes`` with ``concurrency`` threads, GET them back,
    delete them. Raises InputError when the endpoint, bucket or credentials fail."""
    bucket, prefix = parse_s3_url(url)
    base = "/".join(p for p in (prefix, f"kvtool-bench-{os.getpid()}-{secrets.token_hex(3)}") if p)
    keys = [f"{base}/{i:06d}" for i in range(objects)]
    payload = os.urandom(object_bytes)
    written: list[str] = []
    # every object goes, however this ends (errors, SIGINT, SIGTERM, SIGHUP): uploads in
    # flight finish first (_timed_map), then what was written, then whatever the prefix holds
    with Scratch() as cleanup:
        cleanup.on_exit(_delete_prefix, client, bucket, base + "/")
        cleanup.on_exit(_delete, client, bucket, written)
        try:
            # one untimed PUT first: it opens the connection, and a wrong endpoint, bucket or
            # credential fails once here rather than once per thread
            _put(client, bucket, f"{base}/warmup", payload, written)
            progress(f"T4 put: {objects} x {object_bytes / 2**20:,.2f} MiB, {concurrency} threads")
            put = _timed_map(concurrency, keys, lambda k: _put(client, bucket, k, payload, written))
            progress(f"T4 get: {objects} objects, {concurrency} threads")
            get = _timed_map(concurrency, keys, lambda k: _get(client, bucket, k))
        except InputError:
            raise
        except Exception as exc:  # botocore's many errors: one line, with the reason
            raise InputError(
                f"S3 at {url} failed: {_reason(exc)}",
                "check AWS_ENDPOINT_URL, credentials (aws sts get-caller-identity)"
                " and that the bucket exists",
            ) from None
    boto3 = sys.modules.get("boto3")
    tool = f"boto3 {getattr(boto3, '__version__', '')}".strip()
    note = (
        f"put_object/get_object (boto3's classic client), {concurrency} threads,"
        f" {objects} objects of {object_bytes / 2**20:,.2f} MiB under a temporary prefix,"
        " deleted after"
    )
    return [
        BenchResult(
            tier="t4",
            op=op,
            status="ok",
            tool=tool,
            block_bytes=object_bytes,
            threads=concurrency,
            bytes_per_s=objects * object_bytes / wall,
            iops=objects / wall,
            latency_us=latency_of(samples),
            note=note,
        )
        for op, (wall, samples) in (("put", put), ("get", get))
    ]


def _timed_map(
    workers: int, keys: list[str], call: Callable[[str], float]
) -> tuple[float, list[float]]:
    start = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        samples = list(pool.map(call, keys))
    finally:
        # on an error or a signal: nothing new starts, and what is in flight finishes before
        # the clean-up deletes (an upload landing after the delete would stay behind)
        with signals_held():
            pool.shutdown(wait=True, cancel_futures=True)
    return time.perf_counter() - start, samples


def _put(client: Any, bucket: str, key: str, body: bytes, written: list[str]) -> float:
    start = time.perf_counter()
    client.put_object(Bucket=bucket, Key=key, Body=body)
    written.append(key)
    return time.perf_counter() - start


def _get(client: Any, bucket: str, key: str) -> float:
    start = time.perf_counter()
    client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return time.perf_counter() - start


def _delete(client: Any, bucket: str, keys: list[str]) -> None:
    for i in range(0, len(keys), 1000):
        # best effort: an unreachable endpoint cannot take deletes either
        with contextlib.suppress(Exception):
            client.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]]}
            )


def _delete_prefix(client: Any, bucket: str, prefix: str) -> None:
    """Delete every object under ``prefix`` (the run's own), listing it: what ``_delete``
    missed (an upload that landed as the run stopped). Best effort, like ``_delete``."""
    token: dict[str, str] = {}
    with contextlib.suppress(Exception):
        while True:
            listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix, **token)
            keys = [o["Key"] for o in listing.get("Contents", [])]
            _delete(client, bucket, keys)
            if not listing.get("IsTruncated"):
                return
            token = {"ContinuationToken": listing["NextContinuationToken"]}


def _reason(exc: Exception) -> str:
    """``NoSuchBucket: The specified bucket does not exist`` from a botocore error."""
    error = (getattr(exc, "response", None) or {}).get("Error") or {}
    if error.get("Code"):
        return f"{error['Code']}: {error.get('Message') or 'no message'}"
    text = redact(str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
