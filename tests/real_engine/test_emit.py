"""``plan --emit vllm --set vllm_t3=fs`` parsed by vLLM's own config classes (parse_emitted.py,
under the tier's vLLM 0.32.0): its argument parser and VllmConfig accept the line, and its
factories pick the tiered spec and the fs tier for it with no key they do not take. (The
engine does not start it on CPU: vLLM 0.32.0's CPU build refuses CPU offloading.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.real_engine.cases import BUDGET
from tests.real_engine.conftest import run_engine_script


def test_the_fs_tier_configuration_is_vllms_own(
    kvtool: Any, models: Path, engine_env: dict[str, str], scratch: Path
) -> None:
    fsx = scratch / "fsx-emitted"
    result = kvtool("plan", str(models / "llama"), "--hardware", "p5en", "--ctx", "32768",
                    "--tp", "1", "--sessions", "100000", "--emit", "vllm", "--set", "vllm_t3=fs",
                    "--set", f"kv_cache_memory_bytes={BUDGET}", "--t3-dir", str(fsx))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("vllm serve")]
    log = scratch / "parse-emitted.log"
    run_engine_script("parse_emitted.py", [line], engine_env, log, timeout=300)
    (parsed,) = [json.loads(x[7:]) for x in log.read_text().splitlines()
                 if x.startswith("PARSED ")]  # fmt: skip
    assert parsed["kv_cache_memory_bytes"] == BUDGET
    assert parsed["kv_connector"] == "OffloadingConnector"
    assert parsed["spec"] == "TieringOffloadingSpec"
    assert parsed["tiers"] == [{"class": "FileSystemTierManager", "unknown_keys": []}]
    assert parsed["extra"]["secondary_tiers"] == [{"type": "fs", "root_dir": str(fsx)}]
    assert parsed["extra"]["cpu_bytes_to_use"] == parsed["kv_offloading_size"] * 2**30
