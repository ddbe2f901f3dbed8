"""kvtool capacity's front door: every option resolved once, one clear error for each mistake,
the model's real chunk, a trace's turns, and the plan's T3 figures beside the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import InputError
from kvtool.inputs.capacity import resolve_capacity

ROOT = Path(__file__).parents[3]


def _resolve(**changes: Any):  # type: ignore[no-untyped-def]
    given: dict[str, Any] = {
        "t3_dir": "/fsx/kv", "model": "llama-3.1-8b", "ctx": "32k", "restore_slo": "500ms",
        "at": "p95", "sessions": None, "trace": None, "duration": "10", "restore_parallel": "8",
        "chunk_tokens": "256", "kv_dtype": "auto", "engine": "vllm", "tp": None,
        "hardware": None, "nodes": None, "direct": True, "fio_check": True,
    }  # fmt: skip
    return resolve_capacity(**{**given, **changes})


def test_the_workload_is_the_model_s_real_chunk() -> None:
    r = _resolve()
    w = r.workload
    assert (w.chunk_tokens, w.chunk_bytes) == (256, 256 * 131_072)  # Llama 3.1 8B, bf16
    assert w.chunks == 125  # 32,000 tokens in 256-token chunks
    assert r.plan is None
    assert "llama-3.1-8b (bf16, tp 1)" in r.about
    assert (r.options.slo_s, r.options.at, r.options.duration_s) == (0.5, "p95", 10.0)
    eight = _resolve(tp="8")
    assert (eight.workload.chunk_bytes, eight.workload.files_per_chunk) == (256 * 16_384, 8)
    assert eight.workload.session_bytes == w.session_bytes  # the same bytes, in 8x the files


def test_a_trace_gives_turns_and_a_plan_gives_its_t3_figures() -> None:
    r = _resolve(trace=str(ROOT / "examples" / "traces" / "small.jsonl"), duration="30s",
                 hardware="p5en", nodes="2", sessions="8,16")  # fmt: skip
    assert len(r.workload.turns) > 100
    assert any("follow-up turns from" in n for n in r.notes)
    assert r.options.levels == (8, 16)
    assert r.plan is not None
    assert r.plan.concurrent_restores == 16  # the plan's concurrent_loads default
    assert 0 < r.plan.restore_s < 60
    assert r.plan.source == "kvtool plan llama-3.1-8b --hardware p5en --nodes 2 --ctx 32,000"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"t3_dir": None}, "needs --t3-dir"),
        ({"model": None}, "needs --model"),
        ({"restore_slo": "500"}, "is not a duration"),
        ({"restore_slo": "0ms"}, "is not a restore time"),
        ({"at": "p90"}, "is not one kvtool reports"),
        ({"sessions": "8,x"}, "--sessions"),
        ({"sessions": "0,8"}, "must be at least 1"),
        ({"duration": "0.5"}, "is not 1 to 3600 seconds"),
        ({"duration": "2h"}, "is not 1 to 3600 seconds"),
        ({"restore_parallel": "0"}, "must be at least 1"),
        ({"restore_parallel": "300"}, "is not 1 to 256"),
        ({"nodes": "4"}, "--nodes has no effect without --hardware"),
        ({"model": "no-such-model"}, "unknown model"),
        ({"trace": str(ROOT / "tests" / "fixtures" / "traces" / "missing.jsonl")}, "is not a file"),
    ],
)
def test_each_mistake_is_one_line(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        _resolve(**changes)


def test_a_trace_without_follow_ups_is_refused(tmp_path: Path) -> None:
    single = tmp_path / "single.jsonl"
    single.write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}\n'
        '{"timestamp": 5, "input_length": 700, "output_length": 10, "hash_ids": [3, 4]}\n'
    )
    with pytest.raises(InputError, match="has no follow-up turns"):
        _resolve(trace=str(single))
