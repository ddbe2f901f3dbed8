"""The one protocol every medium keeps (engine/medium.py): each of the three has all of it."""

import inspect
from pathlib import Path

from kvtool.engine.folder import FolderMedium
from kvtool.engine.medium import DEFAULT_IO_THREADS, Medium, MediumError
from kvtool.engine.memory import MemoryMedium
from kvtool.engine.s3 import S3Medium


def test_every_medium_keeps_the_protocol(tmp_path: Path) -> None:
    wanted = {n for n, _ in inspect.getmembers(Medium) if not n.startswith("_")}
    assert {"put", "get", "delete", "contains", "close", "description"} <= wanted
    mediums = (  # constructors start no thread and open no client
        MemoryMedium("T1"),
        FolderMedium("T3", tmp_path),
        S3Medium("T4", "s3://bucket/kv", client_factory=lambda: None),
    )
    for medium in mediums:
        missing = {n for n in wanted if not hasattr(medium, n)}
        assert not missing, (type(medium).__name__, missing)
        assert medium.tier in ("T1", "T3", "T4")


def test_a_medium_error_is_an_ordinary_exception_the_engine_catches() -> None:
    assert issubclass(MediumError, Exception)
    assert not issubclass(MediumError, KeyboardInterrupt)
    assert DEFAULT_IO_THREADS >= 32  # the AWS article's checklist: 32 or more threads a node
