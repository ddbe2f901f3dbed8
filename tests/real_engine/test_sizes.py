"""kvtool size --engine vllm-cpu --kv-cache-memory-bytes against vLLM 0.32.0's own KV cache
configuration (engine_sizes.py) for each of the 22 configurations in cases.py: the blocks,
the block size, the KV cache groups, the max concurrency and the tokens in the pool, exact;
where vLLM refuses, kvtool says so for the same reason."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.real_engine.cases import BUDGET, CASES, Case, engine_figures, kvtool_figures
from tests.real_engine.conftest import ROWS


def _kvtool_args(case: Case, models: Path) -> list[str]:
    args = ["size", str(models / case.model), "--engine", "vllm-cpu", "--ctx", str(case.ctx)]
    args += ["--kv-cache-memory-bytes", str(BUDGET), "--json"]
    for flag, value in (
        ("--max-num-batched-tokens", case.batched),
        ("--block-tokens", case.block),
        ("--kv-dtype", case.kv_dtype),
    ):
        if value is not None:
            args += [flag, str(value)]
    return args


def _row(case: Case, engine: dict[str, Any], pool: dict[str, Any] | None, verdict: str) -> str:
    if engine["ok"]:
        theirs = (
            f"{engine['num_blocks']:>5} x {engine['block_size']:<3} {len(engine['groups'])}g"
            f" {engine['max_concurrency']:>8.4f}x {engine['tokens']:>7,}"
        )
    else:
        theirs = "refused: " + engine["error"].split(":", 1)[1].strip()[:36]
    ours = (
        f"{pool['num_blocks']:>5} x {pool['block_size']:<3} {pool['kv_cache_groups']}g"
        f" {pool['max_concurrency']:>8.4f}x {pool['kv_cache_size_tokens']:>7,}"
        if pool is not None
        else "-"
    )
    return f"{case.name:<20} {case.ctx:>6}  vLLM {theirs:<46} kvtool {ours:<38} {verdict}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_size_equals_the_engine(
    case: Case, engine_sizes: dict[str, Any], models: Path, kvtool: Any
) -> None:
    engine = engine_sizes[case.name]
    result = kvtool(*_kvtool_args(case, models))
    assert result.exit_code in (0, 1), result.stderr
    (record,) = json.loads(result.stdout)["results"]
    pool = record["pool"]
    notes = " ".join(record["notes"])
    if not engine["ok"]:
        error = engine["error"]
        if "AVX-512 or AMX" in error:  # this machine's CPU: kvtool warns of it
            assert "AVX-512 or AMX" in notes
            verdict = "refused here; kvtool warns (AVX-512 or AMX)"
        else:
            longest = re.search(r"estimated maximum model length is (\d+)", error)
            assert longest, error
            assert result.exit_code == 1
            assert not pool["starts"]
            assert pool["longest_max_model_len"] == int(longest.group(1))
            verdict = f"refused by both; longest fit {pool['longest_max_model_len']:,} both"
        ROWS.append(_row(case, engine, pool, verdict))
        return
    assert result.exit_code == 0, result.stderr
    got, want = kvtool_figures(record), engine_figures(engine)
    ROWS.append(_row(case, engine, pool, "exact" if got == want else f"DIFFERS {got}"))
    assert got == want
    assert record["block_size"] == engine["block_size"]
    if "r256" in case.name:  # the engine starts; its MLA decode kernel takes 576 only
        assert "576-wide latent" in notes
