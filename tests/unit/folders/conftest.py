"""Folders made from the engines' recorded listings, with chosen times."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[2] / "fixtures" / "folders"


def build(root: Path, recording: str, *, age_s: float = 0.0, now: float | None = None) -> list[str]:
    """Make the files of a recorded listing under ``root`` (sizes as recorded, sparse), used
    ``age_s`` seconds ago; vLLM's config.json as its writer wrote it. Returns the paths."""
    data = json.loads((FIXTURES / recording).read_text())
    at = (now if now is not None else __import__("time").time()) - age_s
    paths = []
    for rel, size in data["files"]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel in data.get("configs", {}):
            path.write_text(json.dumps(data["configs"][rel], indent=2, sort_keys=True))
        else:
            with open(path, "wb") as f:
                f.truncate(size)
        os.utime(path, (at, at))
        paths.append(rel)
    return paths


@pytest.fixture
def made() -> Callable[..., list[str]]:
    return build
