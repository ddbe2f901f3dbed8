"""Mediums move bytes; they decide nothing. One per tier:

* ``MemoryMedium``: T1 as torch tensors on the GPU (CPU tensors when there is none, and it
  says so), T2 as host memory (pinned when CUDA is present) in a ``SlotPool`` of chunk-sized
  slots; plain ``bytes`` without torch. Between a GPU T1 and a pinned T2 a chunk moves tensor
  to tensor by asynchronous DMA on a side stream (``transfer``), never through Python bytes.
* ``FolderMedium``: T3, a folder on a shared file system (also T4 as ``file://``): one file per
  chunk under a fanned-out content-addressed path (``chunkfile``), written to a temporary name
  in the same folder, flushed, and renamed over the final name, so a reader sees a whole file
  or none; O_DIRECT with page-aligned buffers where the file system takes it; a pool of I/O
  threads for batches, started on first use.
* ``S3Medium``: T4 through a boto3 client made on first use (``AWS_ENDPOINT_URL`` and the
  credential chain apply), retried, with the same checked format.

Reads verify every byte: a corrupt or truncated chunk raises ``CorruptChunk`` after it is moved
aside (``quarantine/`` in a folder, deleted in S3 and in memory), so it is never served twice.
In memory the check is the CRC-32 a chunk got when it first entered (``put``), carried along by
DMA and checked whenever the chunk is read out as bytes (``get``). Constructors start no
thread, open no client and allocate no pool.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvtool.engine.folder import FolderMedium
from kvtool.engine.medium import DEFAULT_IO_THREADS, Medium, MediumError
from kvtool.engine.memory import (
    MemoryMedium,
    SlotPool,
    dma_pair,
    out_of_memory,
    pool_slots,
    transfer,
)
from kvtool.engine.s3 import S3Medium
from kvtool.errors import InputError, has_control_character

__all__ = [
    "DEFAULT_IO_THREADS", "FolderMedium", "Medium", "MediumError", "MemoryMedium", "S3Medium",
    "SlotPool", "check_t4_url", "dma_pair", "local_mediums", "out_of_memory", "pool_slots",
    "t4_medium", "transfer",
]  # fmt: skip


def local_mediums(
    torch: Any,
    *,
    chunk_bytes: int | None = None,
    t2_slots: int | None = None,
    no_gpu: str | None = None,
) -> dict[str, Medium]:
    """T1 and T2 in this process's memory (torch tensors when ``torch`` is given; T2 a pool of
    ``t2_slots`` chunks of ``chunk_bytes``, see ``pool_slots``, when both are given).
    ``no_gpu`` is why torch has no CUDA device (``bench.gpu.cuda_reason``), said in T1's
    description when T1 stands in for HBM on the CPU."""
    slots = t2_slots if torch is not None and chunk_bytes is not None else None
    return {
        "T1": MemoryMedium("T1", torch=torch, no_gpu=no_gpu),
        "T2": MemoryMedium("T2", torch=torch, slots=slots or None, chunk_bytes=chunk_bytes),
    }


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
