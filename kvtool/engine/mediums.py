"""Mediums move bytes; they decide nothing. One per tier:

* ``MemoryMedium``: T1 as torch tensors on the GPU (CPU tensors when there is none, and it
  says so), T2 as host memory (pinned when CUDA is present); plain ``bytes`` without torch.
* ``FolderMedium``: T3, a folder on a shared file system (also T4 as ``file://``): one file per
  chunk under a fanned-out content-addressed path (``chunkfile``), written to a temporary name
  in the same folder, flushed, and renamed over the final name, so a reader sees a whole file
  or none; O_DIRECT with page-aligned buffers where the file system takes it; a pool of I/O
  threads for batches, started on first use.
* ``S3Medium``: T4 through a boto3 client made on first use (``AWS_ENDPOINT_URL`` and the
  credential chain apply), retried, with the same checked format.

Reads verify every byte: a corrupt or truncated chunk raises ``CorruptChunk`` after it is moved
aside (``quarantine/`` in a folder, deleted in S3), so it is never served twice. Constructors
start no thread and open no client.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from kvtool.engine.chunkfile import (
    ALIGN,
    HEADER_BYTES,
    CorruptChunk,
    aligned,
    decode,
    header,
    relative_path,
    stored_length,
)
from kvtool.errors import InputError, has_control_character

DEFAULT_IO_THREADS = 32  # the brief's FSx checklist: 32 or more I/O threads per node
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class _DirectRefused(Exception):
    """This file system refused an O_DIRECT open or read: read the file buffered."""


class MediumError(Exception):
    """A medium could not do what was asked (full, read-only, unreachable): the chunk stays
    where it was, and the engine reports the fault."""


class Medium(Protocol):
    """What the engine asks of a tier's storage."""

    tier: str

    @property
    def description(self) -> str:
        """What the medium is, in words (``torch CPU tensors standing in for HBM``)."""
        ...

    def put(self, key: str, data: bytes | memoryview) -> None: ...

    def get(self, key: str) -> bytes | None:
        """The chunk's bytes; None when absent; CorruptChunk when it fails its checks."""
        ...

    def delete(self, key: str) -> None: ...

    def contains(self, key: str) -> bool: ...

    def close(self) -> None: ...


class MemoryMedium:
    """T1 or T2: chunks in memory, as torch tensors when torch is installed."""

    def __init__(self, tier: str, *, device: str | None = None, torch: Any = None) -> None:
        self.tier = tier
        self._torch = torch
        self._store: dict[str, Any] = {}
        cuda = torch is not None and torch.cuda.is_available()
        if torch is None:
            self._device, self._pin = None, False
            self.description = "host bytes (torch is not installed)"
        elif tier == "T1":
            self._device, self._pin = (device or ("cuda:0" if cuda else "cpu")), False
            self.description = (
                f"torch tensors on {self._device}"
                if cuda
                else "torch CPU tensors standing in for HBM (no GPU here)"
            )
        else:
            self._device, self._pin = "cpu", cuda
            self.description = "pinned host memory (torch)" if cuda else "host memory (torch)"

    def put(self, key: str, data: bytes | memoryview) -> None:
        if self._torch is None:
            self._store[key] = bytes(data)
            return
        torch = self._torch
        source = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if self._pin:
            tensor = torch.empty(len(source), dtype=torch.uint8, pin_memory=True)
            tensor.copy_(source)
        else:
            tensor = source.to(self._device)
        self._store[key] = tensor

    def get(self, key: str) -> bytes | None:
        value = self._store.get(key)
        if value is None or self._torch is None:
            return value
        return bytes(value.cpu().numpy().tobytes())

    def delete(self, key: str) -> None:
        self._store.pop(key, None)

    def contains(self, key: str) -> bool:
        return key in self._store

    def clear(self) -> None:
        """Everything gone at once (a node lost)."""
        self._store.clear()

    def close(self) -> None:
        self._store.clear()


class FolderMedium:
    """Chunk files in ``root/chunks/ab/cd/<key>.kv``; corrupt ones go to ``root/quarantine``."""

    def __init__(self, tier: str, root: Path, *, io_threads: int = DEFAULT_IO_THREADS) -> None:
        self.tier = tier
        self.root = root
        self.io_threads = io_threads
        self.direct: bool | None = None  # found out on the first write
        self.quarantined = 0
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()  # each I/O thread's reusable aligned buffer

    @property
    def description(self) -> str:
        mode = {None: "O_DIRECT untried", True: "O_DIRECT", False: "buffered (no O_DIRECT)"}
        return f"files under {self.root} ({mode[self.direct]}, {self.io_threads} I/O threads)"

    def path(self, key: str) -> Path:
        """Where ``key`` lives; only ever inside ``root`` (keys are hex digests)."""
        return self.root / "chunks" / relative_path(key)

    def _buffer(self, size: int) -> mmap.mmap:
        """This thread's page-aligned I/O buffer, at least ``size`` bytes: reused, so its pages
        are faulted in once rather than on every chunk."""
        buffer: mmap.mmap | None = getattr(self._local, "buffer", None)
        if buffer is None or len(buffer) < size:
            if buffer is not None:
                buffer.close()
            buffer = self._local.buffer = mmap.mmap(-1, max(aligned(size), ALIGN))
        return buffer

    def _folder(self, parts: Sequence[str], *, create: bool) -> int:
        """A descriptor of ``root/parts...``, walked one name at a time without following a
        link below ``root`` (a link there could send chunks outside it). FileNotFoundError
        when a part is missing and ``create`` is False; MediumError for a link or a file where
        a folder should be."""
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, FileNotFoundError):
                raise
            raise MediumError(
                f"{self.tier}: {self.root}/{'/'.join(parts)} is not a folder of kvtool's (a link"
                f" or a file there?): {exc.strerror or exc}"
            ) from None
        return fd

    @staticmethod
    def _parts(key: str) -> tuple[tuple[str, ...], str]:
        folder_a, folder_b, name = relative_path(key).split("/")
        return ("chunks", folder_a, folder_b), name

    def put(self, key: str, data: bytes | memoryview) -> None:
        parts, name = self._parts(key)
        head = header(key, data)
        end = HEADER_BYTES + len(data)
        size = HEADER_BYTES + aligned(len(data))
        buffer = self._buffer(size)
        buffer[:HEADER_BYTES] = head
        buffer[HEADER_BYTES:end] = data
        buffer[end:size] = bytes(size - end)  # the padding is zero, as readers check
        tmp = f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            folder = self._folder(parts, create=True)
        except OSError as exc:
            raise MediumError(f"{self.tier} write of {name}: {exc.strerror or exc}") from None
        try:
            self._write(folder, tmp, buffer, size)
            # atomic: readers see the old file, the new, or none
            os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise MediumError(
                f"{self.tier} write to {self.path(key)}: {exc.strerror or exc}"
            ) from None
        finally:
            os.close(folder)

    def _write(self, folder: int, tmp: str, buffer: mmap.mmap, size: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = None
        if self.direct is not False:
            try:
                fd = os.open(tmp, flags | os.O_DIRECT, 0o644, dir_fd=folder)
                self.direct = True
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                # some file systems create the file, then refuse O_DIRECT
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=folder)
                self.direct = False
        if fd is None:
            fd = os.open(tmp, flags, 0o644, dir_fd=folder)
        try:
            written = 0
            while written < size:  # views are temporaries: none outlives a failed call
                written += os.write(fd, memoryview(buffer)[written:size])
            os.fsync(fd)
        finally:
            os.close(fd)

    def get(self, key: str) -> bytes | None:
        """The chunk's checked bytes, or None when it is not there. Anything at its name that
        is not a valid chunk of this key (damaged, truncated, extended, a link, a folder) is
        moved to ``quarantine/`` and raises CorruptChunk; the read is bounded by the header's
        length, so a huge file is judged from its first 4 KiB."""
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except FileNotFoundError:
            return None
        try:
            return self._get(key, folder, name)
        finally:
            os.close(folder)

    def _get(self, key: str, folder: int, name: str) -> bytes | None:
        try:
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise MediumError(f"{self.tier} read of {name}: {exc.strerror or exc}") from None
        ident = (found.st_dev, found.st_ino)
        if not stat.S_ISREG(found.st_mode):
            self._quarantine(folder, name, ident)
            raise CorruptChunk("not a regular file (a link or a folder at the chunk's name)")
        corrupt = ""
        try:
            data = self._read(key, folder, name, ident, direct=bool(self.direct))
        except _DirectRefused:
            data = self._read(key, folder, name, ident, direct=False)
        except CorruptChunk as exc:
            corrupt = str(exc)
        except FileNotFoundError:
            return None  # removed since the stat: absent
        except OSError as exc:
            raise MediumError(f"{self.tier} read of {name}: {exc.strerror or exc}") from None
        if corrupt:
            self._quarantine(folder, name, ident)
            raise CorruptChunk(corrupt)
        return data

    def _read(
        self, key: str, folder: int, name: str, ident: tuple[int, int], *, direct: bool
    ) -> bytes | None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECT if direct else 0)
        try:
            fd = os.open(name, flags, dir_fd=folder)
        except OSError as exc:
            if direct and exc.errno == errno.EINVAL:
                raise _DirectRefused from None
            raise
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != ident:
                raise FileNotFoundError(name)  # replaced since the stat: read it next time
            size = st.st_size
            if size < HEADER_BYTES:
                raise CorruptChunk(f"{size} bytes: shorter than the header")
            buffer = self._buffer(HEADER_BYTES)
            self._fill(fd, buffer, 0, HEADER_BYTES, direct)
            whole = stored_length(key, memoryview(buffer)[:HEADER_BYTES])
            if size != aligned(whole):
                raise CorruptChunk(
                    f"{size:,} bytes on disk; the header says {aligned(whole):,}"
                    " (truncated or extended)"
                )
            buffer = self._buffer(size)
            self._fill(fd, buffer, 0, size, direct)
            try:
                return bytes(decode(key, memoryview(buffer)[:size]))  # checked, one copy
            except CorruptChunk as exc:
                raise CorruptChunk(str(exc)) from None  # no view of the buffer outlives this
        finally:
            os.close(fd)

    @staticmethod
    def _fill(fd: int, buffer: mmap.mmap, start: int, end: int, direct: bool) -> None:
        """Read ``[start, end)`` of the file into ``buffer``; a short file is CorruptChunk."""
        got = start
        while got < end:
            try:
                n = os.preadv(fd, [memoryview(buffer)[got:end]], got)
            except OSError as exc:
                if direct and exc.errno == errno.EINVAL:
                    raise _DirectRefused from None
                raise
            if n == 0:
                raise CorruptChunk(f"ends at {got:,} bytes of {end:,}")
            got += n

    def _quarantine(self, folder: int, name: str, ident: tuple[int, int]) -> None:
        """Move aside what was judged, and only that: another process may have renamed a good
        chunk into place since (its inode differs), and that one stays."""
        try:
            now = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return
        if (now.st_dev, now.st_ino) != ident:
            return
        try:
            target = self._folder(("quarantine",), create=True)
        except (OSError, MediumError):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
            return
        try:
            os.rename(name, f"{name}.{time.time_ns()}", src_dir_fd=folder, dst_dir_fd=target)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
        finally:
            os.close(target)
        self.quarantined += 1

    def delete(self, key: str) -> None:
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except (FileNotFoundError, MediumError):
            return
        try:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
        finally:
            os.close(folder)

    def contains(self, key: str) -> bool:
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except (FileNotFoundError, MediumError):
            return False
        try:
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(folder)
        return stat.S_ISREG(found.st_mode)

    def put_many(self, items: Sequence[tuple[str, bytes | memoryview]]) -> list[Exception | None]:
        """Write chunks on the I/O threads; one outcome per item (None: written)."""
        return self._map(lambda item: self.put(*item), items)

    def get_many(self, keys: Sequence[str]) -> list[bytes | Exception | None]:
        """Read chunks on the I/O threads; bytes, None (absent) or the exception per key."""
        return self._map(self.get, keys)

    def _map(self, call: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.io_threads, thread_name_prefix="kvtool-io")

        def safe(item: Any) -> Any:
            try:
                return call(item)
            except (MediumError, CorruptChunk, ValueError) as exc:
                return exc

        return list(self._pool.map(safe, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


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


def local_mediums(torch: Any) -> dict[str, Medium]:
    """T1 and T2 in this process's memory (torch tensors when ``torch`` is given)."""
    return {"T1": MemoryMedium("T1", torch=torch), "T2": MemoryMedium("T2", torch=torch)}


def check_t4_url(url: str) -> str:
    """``--t4-url`` as given, checked: ``s3://bucket/prefix`` (a bucket name S3 accepts) or
    ``file:///path`` (an absolute path to an existing folder); no control characters, which
    would reach object keys and file names. InputError naming what is wrong otherwise."""
    import re

    if has_control_character(url):
        raise InputError(f"--t4-url {url!r} holds a control character", "type the URL again")
    if url.startswith("file://"):
        folder = url[len("file://") :]
        if not folder.startswith("/"):
            raise InputError(
                f"--t4-url {url!r} names no absolute folder", "give file:///path/to/folder"
            )
        if not Path(folder).is_dir():
            raise InputError(f"--t4-url {url}: {folder} is not a folder", "create it first")
        return url
    if url.startswith("s3://"):
        bucket = url[5:].split("/")[0]
        if re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            return url
        if bucket:
            raise InputError(
                f"--t4-url {url!r}: {bucket!r} is not an S3 bucket name",
                "3 to 63 lowercase letters, digits, dots and hyphens",
            )
    raise InputError(f"--t4-url {url!r} is not s3://bucket/prefix or file:///path")


def t4_medium(
    url: str, name: str, *, io_threads: int, client_factory: Callable[[], Any]
) -> FolderMedium | S3Medium:
    """T4 from ``--t4-url`` (``check_t4_url``): ``s3://bucket/prefix`` (objects under
    ``prefix/name``) or ``file:///path`` (a folder ``name`` inside an existing ``/path``)."""
    check_t4_url(url)
    if url.startswith("file://"):
        return FolderMedium("T4", Path(url[len("file://") :]) / name, io_threads=io_threads)
    return S3Medium("T4", url.rstrip("/") + "/" + name, client_factory=client_factory)
