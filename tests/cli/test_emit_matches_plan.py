"""What ``--emit`` writes is the engine the plan printed (issue 55).

``kvtool plan <model> --hardware p5en --ctx 2k --sessions 10`` planned tp 2 x pp 4, and the same
command with ``--emit vllm`` wrote ``--tensor-parallel-size 8`` and no pipeline stages: the emit
path planned with another layout rule, and no target carried the block size, the tokens per
batch or (SGLang) the plan's page. Here, for every bundled node and five models (GQA, MLA,
sliding windows with sinks, a Gated DeltaNet hybrid, sliding + full), each target's layout,
block size, KV dtype and budget are read back from what it wrote and held to the plan's own
``--json`` under the engine that target configures. A plan the engine or the node cannot make
is refused by ``--emit`` too.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from kvtool.plan.emit import EMIT_ENGINE, SGLANG_KV_DTYPES, TRTLLM_KV_DTYPES, VLLM_KV_DTYPES
from kvtool.profiles.load import node_profiles
from kvtool.profiles.resolve import resolve_model
from tests.conftest import CliResult

Run = Callable[..., CliResult]

MODELS = ("llama-3.1-70b", "deepseek-r1", "gpt-oss-120b", "qwen3-next-80b-a3b", "gemma-3-27b")
ARGS = ("--ctx", "128k", "--sessions", "200")  # past T1 and T2 on most nodes: T3 too
GIB = 2**30
NAMES = {  # each engine's KV dtype names back to kvtool's
    "vllm": {v: k for k, v in VLLM_KV_DTYPES.items()},
    "sglang": {v: k for k, v in SGLANG_KV_DTYPES.items()},
    "trtllm": {v: k for k, v in TRTLLM_KV_DTYPES.items()},
}


def _words(line: str) -> tuple[dict[str, str], list[str]]:
    words = shlex.split(line)
    env = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def _flag(words: list[str], flag: str, default: str | None = None) -> str | None:
    return words[words.index(flag) + 1] if flag in words else default


def _command(text: str, target: str) -> list[str]:
    """The engine's command line in what ``target`` wrote."""
    lines = text.splitlines()
    if target == "lmcache":
        line = next(ln for ln in lines if ln.startswith("# Use with: "))
        return _words(line.removeprefix("# Use with: "))[1]
    if target == "trtllm":
        line = next(ln for ln in lines if ln.startswith("# trtllm-serve "))
        return _words(line.removeprefix("# "))[1]
    return _words([ln for ln in lines if ln and not ln.startswith(("#", "export "))][-1])[1]


def _read(text: str, target: str, model_dtype: str) -> dict[str, Any]:
    """Layout, block, KV dtype, HBM budget and host tier as the configuration states them."""
    words = _command(text, target)
    engine = EMIT_ENGINE[target]
    if engine == "vllm":
        tp, pp = (
            _flag(words, "--tensor-parallel-size"),
            _flag(words, "--pipeline-parallel-size", "1"),
        )
        block, dtype = _flag(words, "--block-size"), _flag(words, "--kv-cache-dtype")
        budget = _flag(words, "--gpu-memory-utilization")
        batched = _flag(words, "--max-num-batched-tokens")
    elif engine == "sglang":
        tp, pp = _flag(words, "--tp-size"), _flag(words, "--pp-size", "1")
        block, dtype = _flag(words, "--page-size"), _flag(words, "--kv-cache-dtype")
        budget, batched = _flag(words, "--mem-fraction-static"), None
    else:
        tp, pp = _flag(words, "--tp_size"), _flag(words, "--pp_size", "1")
        kv = yaml.safe_load(text)["kv_cache_config"]
        block, dtype, batched = str(kv["tokens_per_block"]), kv["dtype"], None
        # a fraction of the memory left after the weights, as the plan took it for T1 (its
        # JSON: gpu_memory_share_of "free"), on the serve line and in the YAML alike
        budget = str(kv["free_gpu_memory_fraction"])
        assert _flag(words, "--kv_cache_free_gpu_memory_fraction") == budget
    assert tp is not None, text
    assert pp is not None, text
    assert block is not None, text
    assert dtype is not None, text
    assert budget is not None, text
    return {
        "tp": int(tp),
        "pp": int(pp),
        "block_size": int(block),
        "kv_dtype": model_dtype if dtype == "auto" else NAMES[engine][dtype],
        "gpu_memory_utilization": float(budget),
        "max_num_batched_tokens": None if batched is None else int(batched),
    }


def _host_tier(text: str, target: str, words: list[str]) -> float | None:
    """The host-memory tier the configuration gives one engine, in bytes (None: none set)."""
    if target == "vllm":
        size = _flag(words, "--kv-offloading-size")
        return None if size is None else float(size) * GIB
    if target == "dynamo":
        line = next(
            ln for ln in text.splitlines() if ln.startswith("export DYN_KVBM_CPU_CACHE_GB=")
        )
        return float(line.split("=", 1)[1].split()[0]) * 1e9
    if target == "sglang":
        ranks = int(_flag(words, "--tp-size") or 1) * int(_flag(words, "--pp-size") or 1)
        return float(_flag(words, "--hicache-size") or 0) * 1e9 * ranks
    if target == "trtllm":
        kv = yaml.safe_load(text)["kv_cache_config"]
        ranks = int(_flag(words, "--tp_size") or 1) * int(_flag(words, "--pp_size") or 1)
        return None if "host_cache_size" not in kv else float(kv["host_cache_size"]) * ranks
    data = yaml.safe_load(text)
    first = data.get("extra_config", {}).get("first_rank_max_local_cpu_size")
    if first is not None:
        return float(first) * GIB
    ranks = int(_flag(words, "--tensor-parallel-size") or 1)
    ranks *= int(_flag(words, "--pipeline-parallel-size") or 1)
    return float(data["max_local_cpu_size"]) * GIB * ranks


def _step(target: str, ranks: int) -> float:
    """How far below the plan's figure a configuration's rounding down may take it."""
    return {
        "vllm": GIB,
        "dynamo": 1e9,
        "sglang": 1e9 * ranks,
        "trtllm": ranks,
        "lmcache": 0.1 * GIB * ranks,
    }[target]


def _planned(result: dict[str, Any]) -> dict[str, Any]:
    plan = result["plan"]
    return {
        "tp": plan["tp"],
        "pp": plan["pp"],
        "block_size": result["block_size"],
        "kv_dtype": result["kv_dtype"],
        "gpu_memory_utilization": plan["gpu_memory_utilization"],
        "max_num_batched_tokens": result["max_num_batched_tokens"],
    }


def _check_one(
    kvtool: Run,
    model: str,
    hardware: str,
    target: str,
    extra: tuple[str, ...],
    seen: dict[tuple[str, ...], CliResult],
) -> str:
    engine = EMIT_ENGINE[target]
    args = ("plan", model, "--hardware", hardware, *ARGS, "--engine", engine, *extra)
    if args not in seen:  # one plan a model and engine (vllm, lmcache and dynamo share vLLM's)
        seen[args] = kvtool(*args, "--json")
    planned = seen[args]
    emitted = kvtool(*args, "--emit", target)
    if planned.exit_code == 2 or "plan" not in json.loads(planned.stdout)["results"][0]:
        # no plan (the engine refuses the model, the node cannot hold it): nothing to emit
        assert emitted.exit_code == 2, (model, hardware, target, emitted.stdout)
        return "refused"
    if emitted.exit_code == 2:
        return emitted.stderr
    assert emitted.exit_code == 0, (model, hardware, target, emitted.stderr)
    [result] = json.loads(planned.stdout)["results"]
    # the share the budget is of: TensorRT-LLM's of what the weights leave, the others' of HBM
    assert result["plan"]["gpu_memory_share_of"] == ("free" if engine == "trtllm" else "hbm")
    text = emitted.stdout
    read = _read(text, target, resolve_model(model).spec.dtype)
    want = _planned(result)
    if engine != "vllm":  # no admission charge modelled: nothing to pin
        want["max_num_batched_tokens"] = None
    assert read == want, (model, hardware, target, text)
    layout = f"tp {want['tp']}" + (f" x pp {want['pp']}" if want["pp"] > 1 else "")
    assert f"# Plan per engine: {layout}, {want['block_size']}-token blocks" in text
    # the host tier: the plan's T2 a node over its engines, rounded down to the flag's unit
    t2 = {t["name"]: t for t in result["tiers"]}["T2"]["capacity_bytes"] or 0
    per_engine = t2 // result["verdict"]["nodes"] // result["plan"]["engine_instances_per_node"]
    words = _command(text, target)
    host = _host_tier(text, target, words)
    uses_t3 = result["plan"]["t3_bytes_needed"] > 0
    if host is None:
        assert per_engine < GIB or (target == "vllm" and uses_t3) or target == "trtllm"
    elif not (target == "lmcache" and resolve_model(model).spec.is_mla and want["pp"] == 1):
        ranks = want["tp"] * want["pp"]
        assert per_engine - _step(target, ranks) <= host <= per_engine, (target, host, per_engine)
    return "emitted"


def _quick() -> Run:
    """``kvtool`` in-process as the ``kvtool`` fixture runs it, without holding each of the
    matrix's 180 plans to the JSON schema (other tests do; here it was two thirds the time)."""
    from typer.testing import CliRunner

    from kvtool.cli.app import app

    runner = CliRunner()
    env = {"NO_COLOR": "1", "COLUMNS": "100", "HF_HUB_OFFLINE": "1"}

    def run(*args: str) -> CliResult:
        result = runner.invoke(app, list(args), env=env, catch_exceptions=False)
        return CliResult(result.exit_code, result.stdout, result.stderr)

    return run


@pytest.mark.parametrize("hardware", [node.name for node in node_profiles()])
def test_every_target_writes_the_plans_engine(hardware: str) -> None:
    kvtool = _quick()
    outcomes: dict[str, str] = {}
    seen: dict[tuple[str, ...], CliResult] = {}
    for model in MODELS:
        for target in EMIT_ENGINE:
            outcome = _check_one(kvtool, model, hardware, target, (), seen)
            if outcome not in ("emitted", "refused"):
                # the one refusal a plan can meet here: SGLang's file tier at 1-token pages,
                # which the plan made again with 64-token pages answers
                assert target == "sglang", outcome
                assert "--set block_tokens=64" in outcome, outcome
                outcome = _check_one(
                    kvtool, model, hardware, target, ("--set", "block_tokens=64"), seen
                )
                assert outcome == "emitted"
            outcomes[f"{model} {target}"] = outcome
    assert "emitted" in outcomes.values()
    print(hardware, sorted(outcomes.items()))  # (shown with -s)


def test_the_issue_example_plans_and_emits_tp_2_x_pp_4(kvtool: Run, tmp_path: Any) -> None:
    """A 4-head model in a folder on a p5en: the plan's layout, and every target's."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16", "head_dim": 64,
    }))  # fmt: skip
    args = ("plan", str(folder), "--hardware", "p5en", "--ctx", "2k", "--sessions", "10")
    first = kvtool(*args).stdout.splitlines()[0]
    assert first.endswith("tp 2 x pp 4"), first
    words = _command(kvtool(*args, "--emit", "vllm").stdout, "vllm")
    assert _flag(words, "--tensor-parallel-size") == "2"
    assert _flag(words, "--pipeline-parallel-size") == "4"
    assert _flag(words, "--block-size") == "16"
    for target in ("lmcache", "dynamo", "sglang", "trtllm"):
        emitted = kvtool(*args, "--emit", target)
        assert emitted.exit_code == 0, emitted.stderr
        assert "(tp 2 x pp 4)" in emitted.stdout.splitlines()[0]


@pytest.mark.parametrize("target", ["vllm", "lmcache", "dynamo", "trtllm"])
def test_data_parallel_attention_is_refused_where_the_engine_cannot_run_it(
    kvtool: Run, target: str
) -> None:
    args = ("plan", "deepseek-r1", "--hardware", "p6-b200", "--ctx", "32k", "--tp", "8")
    engine = EMIT_ENGINE[target]
    result = kvtool(*args, "--set", "dp_attention=true", "--engine", engine, "--emit", target)
    assert result.exit_code == 2
    assert "data-parallel attention" in result.stderr
    assert "emit sglang (--attn-dp-size)" in result.stderr


def test_sglang_runs_the_plans_data_parallel_attention(kvtool: Run) -> None:
    args = ("plan", "deepseek-r1", "--hardware", "p6-b200", "--ctx", "32k", "--tp", "8",
            "--set", "dp_attention=true", "--engine", "sglang")  # fmt: skip
    planned = json.loads(kvtool(*args, "--json").stdout)["results"][0]["plan"]
    assert planned["dp_attention"] is True
    words = _command(kvtool(*args, "--emit", "sglang").stdout, "sglang")
    assert _flag(words, "--tp-size") == _flag(words, "--attn-dp-size") == str(planned["tp"])


def test_an_engine_over_several_instances_says_how_it_starts(kvtool: Run) -> None:
    """trn3-ultraserver: 4 accelerators an instance, the plan's engine spans several."""
    args = ("plan", "llama-3.1-70b", "--hardware", "trn3-ultraserver", "--ctx", "32k")
    text = kvtool(*args, "--emit", "vllm").stdout
    words = _command(text, "vllm")
    ranks = int(_flag(words, "--tensor-parallel-size") or 1)
    ranks *= int(_flag(words, "--pipeline-parallel-size") or 1)
    hosts = math.ceil(ranks / 4)
    assert hosts > 1
    assert f"# One engine spans {hosts} instances (4 accelerators each, {ranks} ranks)" in text
    assert f"--nnodes {hosts} --node-rank 0 to {hosts - 1}" in text
    # the block is the plan's assumption there: kvtool models CUDA kernels, not Neuron's
    assert "block is the plan's assumption" in text
