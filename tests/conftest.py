"""Shared fixtures: the CLI runner with a pinned terminal, and the markers for what a test
needs (pyproject.toml lists them): ``hf`` (transformers), ``torch``, ``gpu`` (a CUDA device),
``no_gpu`` (the CPU fallback, skipped where a CUDA device would take the GPU path), ``fio``
(the real fio) and ``server`` (a server of its own on 127.0.0.1). A test whose need is not met
is skipped with the reason and the install command; the suite passes without torch and on a
machine with CUDA alike."""

from __future__ import annotations

import functools
import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None


# fixtures that start a server of their own on 127.0.0.1: the tests using them are ``server``
SERVER_FIXTURES = {"s3_endpoint", "fio_servers", "bucket", "aws_endpoints", "s3"}


@functools.cache
def has_cuda() -> bool:
    """A CUDA device torch can use (imports torch only when a test asks)."""
    if not HAS_TORCH:
        return False
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needs = {
        "hf": (
            lambda: HAS_TRANSFORMERS,
            "transformers is not installed (pip install 'kvtool[hf]')",
        ),
        "torch": (lambda: HAS_TORCH, "torch is not installed (pip install torch==2.13.0)"),
        "gpu": (has_cuda, "no CUDA device here: the GPU path is tested on a GPU machine"),
        "no_gpu": (lambda: not has_cuda(), "a CUDA device is here: the GPU path runs instead"),
        "fio": (
            lambda: shutil.which("fio") is not None,
            "fio is not installed (apt-get install -y fio)",
        ),
    }
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
        for marker, (met, reason) in needs.items():
            if marker in item.keywords and not met():
                item.add_marker(pytest.mark.skip(reason=reason))


WIDE = 1000  # columns: the kvtool fixture's terminal, where no line of output wraps


@dataclass(frozen=True)
class CliResult:
    """What one kvtool invocation printed and returned."""

    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def kvtool() -> Callable[..., CliResult]:
    """Run ``kvtool ARGS`` in-process with NO_COLOR and a terminal wide enough that no line
    of output wraps (kvtool lays its output out to ``COLUMNS``): these tests hold what is
    said; tests/cli/test_width.py holds how it fits 80 and 100 columns."""
    runner = CliRunner()

    def run(*args: str) -> CliResult:
        result = runner.invoke(
            app,
            list(args),
            env={"NO_COLOR": "1", "COLUMNS": str(WIDE), "HF_HUB_OFFLINE": "1"},
            catch_exceptions=False,
        )
        if "--json" in args and result.stdout.startswith("{"):
            check_json_output(result.stdout)
        return CliResult(result.exit_code, result.stdout, result.stderr)

    return run


@pytest.fixture
def ctime_as_mtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folder tests that age files with ``os.utime`` (which cannot set a change time back: the
    kernel stamps ctime with the real clock) read their last use as a file aged in place has
    it, its ctime no later than its mtime. The ctime rule itself is attacked without this, on
    files placed with an old mtime (tests/unit/folders/test_gc.py)."""
    from kvtool.folders import gc_plan, summary, sweep

    real = summary.last_use

    def last_use(seen, mode: str) -> float:  # type: ignore[no-untyped-def]
        return real(seen._replace(ctime=0.0), mode)

    monkeypatch.setattr(sweep, "last_use", last_use)
    monkeypatch.setattr(gc_plan, "last_use", last_use)
    monkeypatch.setattr(summary, "last_use", last_use)


@pytest.fixture
def fake_lfs(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fake Lustre ``lfs`` first on PATH that records its calls (tests/fake_lfs.py)."""
    from tests.fake_lfs import FakeLfs

    fake = FakeLfs(tmp_path / "fake-lfs")
    for key, value in fake.env().items():
        monkeypatch.setenv(key, value)
    return fake


JSON_SCHEMAS = __import__("pathlib").Path(__file__).parents[1] / "docs" / "json"


def check_json_output(stdout: str) -> None:
    """Every ``--json`` a test runs is held to its command's schema in docs/json/ (with
    ``KVTOOL_JSON_SAMPLES=DIR`` set, kept there instead, for docs/json/draft.py)."""
    import json
    import os

    data = json.loads(stdout)
    name = str(data.get("command", "")).replace(" ", "-")
    samples = os.environ.get("KVTOOL_JSON_SAMPLES")
    if samples:
        import uuid

        folder = __import__("pathlib").Path(samples) / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{uuid.uuid4().hex}.json").write_text(stdout)
        return
    import jsonschema

    schema = json.loads((JSON_SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.validate(data, schema)


_TMP_BEFORE: set[str] = set()


def _temporary_entries() -> set[str]:
    import tempfile
    from pathlib import Path

    return {p.name for p in Path(tempfile.gettempdir()).iterdir()}


_PRIVATE_TMP: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own temporary folder: ``TMPDIR`` for this process and every subprocess it
    starts, so the check below sees only what the suite made, never what other programs on a
    busy machine write to the machine-wide one. (Set here, before pytest picks its tmp_path
    root, which lands inside it too.)"""
    import os
    import tempfile

    if _PRIVATE_TMP or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    private = tempfile.mkdtemp(prefix="kvtool-tests-")
    _PRIVATE_TMP.append(private)
    os.environ["TMPDIR"] = private
    tempfile.tempdir = private
    # torch keeps a compile cache in the temporary folder the first time anything imports its
    # inductor (LMCache's loader does): its own, not a kvtool scratch file
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(private, "pytest-torchinductor"))


def pytest_sessionstart(session: pytest.Session) -> None:
    _TMP_BEFORE.update(_temporary_entries())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite leaves nothing in its temporary folder (pytest's own tmp_path root aside);
    the folder goes when nothing is left in it but pytest's. Under pytest-xdist the workers
    share the folder, so only the controller looks, once every worker has finished."""
    import os
    import shutil

    if os.environ.get("PYTEST_XDIST_WORKER"):
        return

    left = sorted(
        name
        for name in _temporary_entries() - _TMP_BEFORE
        if not name.startswith(("pytest-of-", "pytest-"))
    )
    if left:
        print(f"\nthe test run left these in its temporary folder {_PRIVATE_TMP}: {left}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif _PRIVATE_TMP:
        shutil.rmtree(_PRIVATE_TMP[0], ignore_errors=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-readme",
        action="store_true",
        help="rewrite the outputs of README.md's $ kvtool examples instead of checking them",
    )
