"""What every tier's medium is to the engine: the ``Medium`` protocol and the one error a
medium raises when it cannot do what was asked. The mediums themselves: ``memory`` (T1, T2),
``folder`` (T3, and T4 as ``file://``), ``s3`` (T4); ``mediums`` makes them."""

from __future__ import annotations

from typing import Protocol

DEFAULT_IO_THREADS = 32  # the AWS article's FSx checklist: 32 or more I/O threads per node


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
