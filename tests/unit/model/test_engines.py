"""The engine registry: one entry per engine, its offload stack and emitter reachable from it,
and vLLM's tokens-per-batch default read from its own code."""

from __future__ import annotations

import pytest

from kvtool.errors import ConfigError, InputError
from kvtool.model.engines import ENGINES, batched_tokens, default_batched_tokens, get_engine
from kvtool.model.families import VLLM_ONLY, check_engine
from kvtool.plan.emit import EMIT_TARGETS
from kvtool.plan.offload import LAYOUTS


def test_every_engine_names_an_offload_stack_that_exists_and_can_be_emitted() -> None:
    for rules in ENGINES.values():
        assert rules.offload_stack in LAYOUTS, rules.name
        assert rules.offload_stack in EMIT_TARGETS, rules.name
    assert set(LAYOUTS) == set(EMIT_TARGETS)


def test_unknown_engine_lists_the_registry() -> None:
    with pytest.raises(
        InputError, match="choose one of formula, vllm, sglang, trtllm, hf, hf-legacy"
    ):
        get_engine("tgi")
    assert get_engine(" VLLM ") is ENGINES["vllm"]


def test_hybrid_families_follow_each_engines_checked_set() -> None:
    """vLLM and the formula size every hybrid family; hf only those weighed in
    tests/integration/test_transformers_cache.py; a reason given by name wins."""
    for family in sorted(VLLM_ONLY):
        for rules in ENGINES.values():
            if rules.sizes_hybrids or family in rules.checked_hybrids:
                check_engine(family, rules)
            else:
                with pytest.raises(ConfigError, match=f"how {rules.name} lays|does not size"):
                    check_engine(family, rules)
    assert {r.name for r in ENGINES.values() if r.sizes_hybrids} == {"vllm", "formula"}
    assert "jamba" in ENGINES["hf"].checked_hybrids
    assert "kimi_linear" not in ENGINES["hf"].checked_hybrids
    refused = ENGINES["hf"]._replace(hybrids_refused=(("kimi_linear", "no class for it"),))
    with pytest.raises(ConfigError, match=r"kimi_linear under transformers 5.25 \w+: no class"):
        check_engine("kimi_linear", refused)


@pytest.mark.parametrize(
    ("hbm_gib", "accelerator", "expected"),
    [
        (141, "NVIDIA H200", 8192),
        (80, "NVIDIA H100", 8192),
        (80, "NVIDIA A100", 2048),  # vLLM's A100 exception (engine/arg_utils.py)
        (180, "NVIDIA B200", 16384),
        (24, "NVIDIA A10G", 2048),
    ],
)
def test_vllm_serve_default_tokens_per_batch(
    hbm_gib: float, accelerator: str, expected: int
) -> None:
    value, why = default_batched_tokens(ENGINES["vllm"], hbm_gib, accelerator)
    assert value == expected
    assert accelerator in why


def test_batched_tokens_says_when_a_given_figure_has_no_effect() -> None:
    assert batched_tokens(ENGINES["sglang"], 4096).ignored.startswith(
        "--max-num-batched-tokens has no effect with --engine sglang"
    )
    assert batched_tokens(ENGINES["sglang"], None) == (None, "", "")
    assert batched_tokens(ENGINES["vllm"], 4096) == (4096, "--max-num-batched-tokens", "")
    assumed = batched_tokens(ENGINES["vllm"], None)
    assert assumed.value == 8192
    assert "assumed" in assumed.source
