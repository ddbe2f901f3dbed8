"""T4 in S3: ``S3Medium``, through a boto3 client made on first use, retried, each call
bounded by a deadline, with the same checked chunk format. ``mediums`` says what every medium
promises."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kvtool.engine.chunkfile import (
    CorruptChunk,
    decode,
    header,
    relative_path,
)
from kvtool.engine.medium import MediumError


class S3Medium:
    """Chunk objects under ``s3://bucket/prefix/ab/cd/<key>.kv``, through boto3."""

    def __init__(
        self,
        tier: str,
        url: str,
        *,
        client_factory: Callable[[], Any],
        attempts: int = 3,
        backoff_s: float = 0.2,
        deadline_s: float = 30.0,
    ) -> None:
        if not url.startswith("s3://") or not url[5:].split("/")[0]:
            raise ValueError(f"not an s3://bucket/prefix URL: {url!r}")
        self.tier = tier
        self.bucket, _, prefix = url[5:].partition("/")
        self.prefix = prefix.strip("/")
        self.description = f"S3 objects under {url} (boto3)"
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.deadline_s = deadline_s  # one operation's whole time, retries included
        self._factory = client_factory
        self._client: Any = None
        self.deleted_corrupt = 0

    def object_key(self, key: str) -> str:
        """The object key for a chunk: under the prefix, hex only."""
        return "/".join(p for p in (self.prefix, relative_path(key)) if p)

    def _call(self, operation: str, **params: Any) -> Any:
        """One S3 operation, retried up to ``attempts`` times with backoff but never past
        ``deadline_s`` in all, then MediumError."""
        if self._client is None:
            self._client = self._factory()
        last: Exception | None = None
        deadline = time.monotonic() + self.deadline_s
        tried = 0
        for attempt in range(self.attempts):
            tried += 1
            try:
                return getattr(self._client, operation)(**params)
            except Exception as exc:  # botocore's errors, connection failures
                if _not_found(exc):
                    raise
                last = exc
            pause = self.backoff_s * 2**attempt
            if attempt + 1 == self.attempts or time.monotonic() + pause >= deadline:
                break  # no sleep after the last try
            time.sleep(pause)
        raise MediumError(f"{self.tier} S3 {operation} failed {tried} times: {last}")

    def put(self, key: str, data: bytes | memoryview) -> None:
        body = header(key, data) + bytes(data)
        self._call("put_object", Bucket=self.bucket, Key=self.object_key(key), Body=body)

    def get(self, key: str) -> bytes | None:
        try:
            response = self._call("get_object", Bucket=self.bucket, Key=self.object_key(key))
        except MediumError:
            raise
        except Exception as exc:
            if _not_found(exc):
                return None
            raise
        body = response["Body"].read()
        try:
            return bytes(decode(key, body))
        except CorruptChunk:
            self.delete(key)
            self.deleted_corrupt += 1
            raise

    def delete(self, key: str) -> None:
        self._call("delete_object", Bucket=self.bucket, Key=self.object_key(key))

    def contains(self, key: str) -> bool:
        try:
            self._call("head_object", Bucket=self.bucket, Key=self.object_key(key))
        except MediumError:
            raise
        except Exception as exc:
            if _not_found(exc):
                return False
            raise
        return True

    def delete_prefix(self) -> int:
        """Delete every object under the prefix (the smoke's own); the count deleted."""
        deleted = 0
        token: dict[str, str] = {}
        while True:
            listing = self._call(
                "list_objects_v2", Bucket=self.bucket, Prefix=self.prefix + "/", **token
            )
            keys = [{"Key": o["Key"]} for o in listing.get("Contents", [])]
            if keys:
                self._call("delete_objects", Bucket=self.bucket, Delete={"Objects": keys})
                deleted += len(keys)
            if not listing.get("IsTruncated"):
                return deleted
            token = {"ContinuationToken": listing["NextContinuationToken"]}

    def close(self) -> None:
        pass


def _not_found(exc: Exception) -> bool:
    error = (getattr(exc, "response", None) or {}).get("Error") or {}
    return str(error.get("Code")) in ("404", "NoSuchKey", "NotFound")
