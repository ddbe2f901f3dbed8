"""What the two test modules of ``kvtool.engine.smoke`` share (test_smoke.py: the scenario and
its folder's life; test_smoke_refusals.py: what is refused or failed before anything is
written): the small chunk options, the step names, TMPDIR inside each test's own folder, a
T3 folder, and running the smoke in-process."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvtool.engine import smoke
from kvtool.engine.chunkfile import decode, relative_path
from kvtool.engine.keys import model_fingerprint
from kvtool.engine.smoke import (
    SMOKE_FOLDER,
    SmokeOptions,
    SmokeOutcome,
    SmokeTargets,
    smoke_command,
)

REPO = Path(__file__).parents[3]
SMALL = SmokeOptions(
    chunk_bytes=64 * 2**10,
    chunk_tokens=16,
    fingerprint=model_fingerprint("test-model", "bf16", "vllm-tp1-chunk16"),
    io_threads=4,
)
STEPS = [
    "prefill",
    "pressure eviction",
    "idle demotion to T3",
    "idle demotion to T4",
    "node loss, recovery from T3",
    "second node reads T3",
    "promotion from T4",
    "corrupt chunk detected",
    "T3 refuses writes, T4 takes them",
    "TTL expiry",
]
WRITE_STEPS = STEPS[:5]
ALONE_STEPS = [s for s in STEPS if s != "second node reads T3"]
UNIQUE = rf"{SMOKE_FOLDER}-{os.getpid()}-[0-9a-f]{{6}}"


def _no_s3() -> Any:
    raise AssertionError("no S3 client should be made without an s3:// T4")


def _run(
    targets: SmokeTargets,
    options: SmokeOptions | None = SMALL,
    *,
    second_node: smoke.SecondNode | None = None,
    progress: Callable[[str], None] = lambda _: None,
    s3_client: Callable[[], Any] = _no_s3,
) -> SmokeOutcome:
    return smoke_command(
        options,
        targets._replace(io_threads=4),
        torch=None,
        s3_client=s3_client,
        second_node=second_node,
        progress=progress,
    )


def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder``: a file's bytes, None for a folder."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def _failed(outcome: SmokeOutcome) -> list[tuple[str, str]]:
    return [(s.name, s.detail) for s in outcome.report.steps if s.status != "PASS"]


def _stored_payload(root: Path, key: str) -> bytes:
    """The checked payload of ``key``'s chunk file under the T3 folder ``root``."""
    return bytes(decode(key, (root / "chunks" / relative_path(key)).read_bytes()))
