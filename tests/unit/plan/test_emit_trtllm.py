"""``--emit trtllm``: the ``extra_llm_api_options`` YAML validates against TensorRT-LLM
1.2.1's ``KvCacheConfig`` (its recorded field list rebuilt as a strict pydantic model: the
wheel cannot be installed here, see tests/fixtures/engines/record_trtllm_kv.py), the
``trtllm-serve`` line uses its options only, and the numbers are the plan's."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import ConfigDict, Field, ValidationError, create_model

from kvtool.errors import InputError
from kvtool.plan.emit import EmitInputs, check_emit_target, emit

ARGS = json.loads(
    (Path(__file__).parents[2] / "fixtures/engines/trtllm-1.2.1-args.json").read_text()
)
GB = 10**9
_TYPES: dict[str, Any] = {
    "bool": bool, "int": int, "float": float, "str": str, "int|null": int | None,
    "float|null": float | None, "list[int]|null": list[int] | None,
}  # fmt: skip


def _kv_cache_config() -> Any:
    """KvCacheConfig as the recorded fields declare it, extra fields forbidden as its
    StrictBaseModel base does."""
    fields: dict[str, Any] = {}
    for name, spec in ARGS["kv_cache_config"].items():
        kind = Literal[tuple(spec["values"])] if "values" in spec else _TYPES[spec["type"]]
        bounds = {k: spec[k] for k in ("ge", "le") if k in spec}
        fields[name] = (kind, Field(default=spec["default"], **bounds))
    return create_model(
        "KvCacheConfig", __config__=ConfigDict(extra="forbid", strict=True), **fields
    )


KV_CACHE_CONFIG = _kv_cache_config()


def inputs(**change: Any) -> EmitInputs:
    base: dict[str, Any] = {
        "model_id": "meta-llama/Llama-3.1-70B", "node_name": "p5en.48xlarge", "tp": 8,
        "instances": 1, "max_model_len": 131_072, "kv_dtype": "fp8_e4m3", "model_dtype": "bf16",
        "is_mla": False, "gpu_memory_utilization": 0.92, "t2_bytes_per_node": 1_759 * GB,
        "t3_bytes_per_node": 0, "t3_dir": "/fsx/kvcache", "use_gds": False, "eager": True,
        "kvtool_version": "0.1.0",
    }  # fmt: skip
    base.update(change)
    return EmitInputs(**base)


def serve_line(text: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith("# trtllm-serve "))
    return shlex.split(line[2:])


@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("has_states", [False, True])
def test_the_yaml_is_a_kv_cache_config_tensorrt_llm_accepts(
    kv_dtype: str, has_states: bool
) -> None:
    text = emit("trtllm", inputs(kv_dtype=kv_dtype, has_states=has_states))
    data = yaml.safe_load(text)
    assert set(data) == {"kv_cache_config"}
    config = KV_CACHE_CONFIG(**data["kv_cache_config"])
    assert config.dtype == {"bf16": "auto", "fp8_e4m3": "fp8", "nvfp4": "nvfp4"}[kv_dtype]
    assert config.enable_block_reuse is not has_states  # the hybrid manager asserts it off
    assert config.tokens_per_block == 32
    assert config.host_cache_size == 1_759 * GB // 8  # bytes, per rank


def test_the_recorded_model_refuses_what_the_engine_would() -> None:
    """The stand-in is strict: an unknown key, a fraction past 1 or a dtype TensorRT-LLM does
    not take are errors, so the test above can fail."""
    for bad in ({"host_cache_gb": 1}, {"free_gpu_memory_fraction": 1.5}, {"dtype": "int8"}):
        with pytest.raises(ValidationError):
            KV_CACHE_CONFIG(**bad)


def test_the_serve_line_uses_trtllm_serve_options_only() -> None:
    words = serve_line(emit("trtllm", inputs()))
    assert words[:2] == ["trtllm-serve", "meta-llama/Llama-3.1-70B"]
    flags = [w for w in words if w.startswith("--")]
    assert set(flags) <= set(ARGS["serve_options"])
    assert words[words.index("--backend") + 1] in ARGS["backend_choices"]
    assert words[words.index("--tp_size") + 1] == "8"
    assert words[words.index("--max_seq_len") + 1] == "131072"
    assert words[words.index("--extra_llm_api_options") + 1] == "extra_llm_api_options.yaml"


def test_mla_host_cache_is_a_full_copy_per_rank_and_t3_is_left_to_a_connector() -> None:
    text = emit("trtllm", inputs(is_mla=True, t3_bytes_per_node=2_000 * GB))
    assert "each a full MLA copy" in text
    assert "no file tier of its own" in text
    assert "/fsx/kvcache" in text
    KV_CACHE_CONFIG(**yaml.safe_load(text)["kv_cache_config"])


def test_no_host_tier_leaves_host_cache_size_out() -> None:
    data = yaml.safe_load(emit("trtllm", inputs(t2_bytes_per_node=0)))
    assert "host_cache_size" not in data["kv_cache_config"]


def test_a_kv_dtype_tensorrt_llm_does_not_take_is_refused() -> None:
    with pytest.raises(InputError, match=r"no kv_cache_config\.dtype for int8"):
        emit("trtllm", inputs(kv_dtype="int8"))


def test_the_target_needs_a_plan_sized_by_trtllm_rules() -> None:
    check_emit_target("trtllm", "trtllm")
    with pytest.raises(InputError, match="configures trtllm"):
        check_emit_target("trtllm", "vllm")


def test_plan_emit_trtllm_end_to_end(kvtool: Any) -> None:
    result = kvtool("plan", "qwen3-next-80b-a3b", "--engine", "trtllm", "--hardware",
                    "p5.48xlarge", "--ctx", "32k", "-n", "100", "--emit", "trtllm")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = yaml.safe_load(result.stdout)
    config = KV_CACHE_CONFIG(**data["kv_cache_config"])
    assert config.enable_block_reuse is False  # a hybrid: Gated DeltaNet states
