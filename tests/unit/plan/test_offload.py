"""How each serving stack stores offloaded KV: MLA copies per tier, whether the file tier is
shared, the GDS buffer it pins, and the ``--emit`` names that select a stack."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.model.engines import ENGINES
from kvtool.model.kv import kv_bytes_per_token
from kvtool.plan.offload import GDS_BUFFER_MIB, LAYOUTS, copies_divisor, get_layout
from kvtool.profiles.resolve import resolve_model

# (T2 single copy, T3 single copy, T3 shared, GDS reserve MiB, host pool per rank), as the
# module docstring reads the released wheels
RULES = {
    "vllm": (True, True, True, 8192, False),  # native CPU offload + LMCache's file tier
    "lmcache": (True, True, True, 8192, False),  # save_only_first_rank defaults to use_mla
    "sglang": (False, True, True, 0, True),  # MLATokenToKVPoolHost per rank, one file writer
    "dynamo": (False, False, False, 0, True),  # KVBM: per-rank pools, private disk file
    "trtllm": (False, False, False, 0, True),  # host_cache_size per rank, no file tier
}


def test_the_five_stacks_and_their_rules() -> None:
    assert list(LAYOUTS) == ["vllm", "lmcache", "sglang", "dynamo", "trtllm"]
    for name, rules in RULES.items():
        layout = LAYOUTS[name]
        assert layout.name == name
        assert (
            layout.mla_t2_single_copy,
            layout.mla_t3_single_copy,
            layout.t3_shared,
            layout.gpu_reserve_mib_with_gds,
            layout.host_pool_per_rank,
        ) == rules


def test_the_sources_name_the_versions_read() -> None:
    assert LAYOUTS["vllm"].source == "vLLM 0.33.0 native CPU offload + LMCache 0.5.6 file tier"
    assert LAYOUTS["lmcache"].source == "LMCache 0.5.6"
    assert LAYOUTS["sglang"].source == "SGLang 0.5.23 HiCache"
    assert LAYOUTS["dynamo"].source == "Dynamo KVBM 1.6.1"
    assert LAYOUTS["trtllm"].source == (
        "TensorRT-LLM 1.2.1 host cache (kv_cache_config.host_cache_size)"
    )


def test_lmcaches_gds_buffer_is_8_gib_of_gpu_memory_per_worker() -> None:
    assert GDS_BUFFER_MIB * 2**20 == 8 * 2**30


def test_get_layout_returns_the_registered_layout() -> None:
    for name, layout in LAYOUTS.items():
        assert get_layout(name) is layout


@pytest.mark.parametrize("name", ["tensorrt-llm", "VLLM", "", "lmcache ", "TRTLLM"])
def test_an_unknown_emit_target_names_the_valid_ones(name: str) -> None:
    with pytest.raises(InputError) as info:
        get_layout(name)
    assert info.value.message == f"unknown --emit {name!r}"
    assert info.value.hint == "choose one of vllm, lmcache, sglang, dynamo, trtllm"


def test_every_engines_offload_stack_is_a_layout() -> None:
    for rules in ENGINES.values():
        assert get_layout(rules.offload_stack).name == rules.offload_stack


@pytest.mark.parametrize(
    ("stack", "t2", "t3"),
    [("vllm", 8, 8), ("lmcache", 8, 8), ("sglang", 1, 8), ("dynamo", 1, 1), ("trtllm", 1, 1)],
)
def test_deepseek_r1_at_tp_8_is_stored_once_or_once_per_rank(stack: str, t2: int, t3: int) -> None:
    spec = resolve_model("deepseek-r1").spec
    assert spec.is_mla
    layout = get_layout(stack)
    assert copies_divisor(layout, "T2", is_mla=spec.is_mla, tp=8) == t2
    assert copies_divisor(layout, "T3", is_mla=spec.is_mla, tp=8) == t3
    # HBM at tp 8 holds the latent on every rank: 8 x (512 + 64) x 2 B x 61 = 562,176 B/token;
    # a tier that stores one copy holds 562,176 / 8 = 70,272 B/token
    hbm = 8 * kv_bytes_per_token(spec)
    assert hbm == 562_176
    assert hbm // t2 == (70_272 if t2 == 8 else 562_176)


@pytest.mark.parametrize("stack", list(LAYOUTS))
def test_models_without_mla_store_what_hbm_holds(stack: str) -> None:
    spec = resolve_model("llama-3.1-70b").spec
    assert not spec.is_mla
    for tier in ("T2", "T3"):
        assert copies_divisor(get_layout(stack), tier, is_mla=spec.is_mla, tp=8) == 1


@pytest.mark.parametrize("stack", list(LAYOUTS))
def test_at_tp_1_there_is_one_copy_whatever_the_stack(stack: str) -> None:
    for tier in ("T2", "T3"):
        assert copies_divisor(get_layout(stack), tier, is_mla=True, tp=1) == 1


@given(
    stack=st.sampled_from(list(LAYOUTS)),
    tier=st.sampled_from(["T2", "T3"]),
    is_mla=st.booleans(),
    tp=st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
)
def test_the_divisor_is_tp_exactly_when_an_mla_tier_stores_one_copy(
    stack: str, tier: str, is_mla: bool, tp: int
) -> None:
    layout = LAYOUTS[stack]
    single = layout.mla_t2_single_copy if tier == "T2" else layout.mla_t3_single_copy
    divisor = copies_divisor(layout, tier, is_mla=is_mla, tp=tp)
    assert divisor == (tp if is_mla and single and tp > 1 else 1)
    assert tp % divisor == 0


def test_one_mla_copy_needs_one_pipeline_stage_and_for_vllms_host_tier_one_host() -> None:
    """vLLM's replicated_layout is tensor parallelism only, in one node's mp executor
    (offloading/config.py:196-209, 0.33.0); LMCache's first rank is worker 0, the first stage's
    only, so --emit turns save_only_first_rank off under stages (issue 55: both counted one copy
    for tp 8 x pp 2, 8x the T2 sessions they hold)."""
    from kvtool.plan.offload import LAYOUTS, copies_divisor

    for name in ("vllm", "lmcache"):
        layout = LAYOUTS[name]
        for tier in ("T2", "T3"):
            assert copies_divisor(layout, tier, is_mla=True, tp=8) == 8
            assert copies_divisor(layout, tier, is_mla=True, tp=8, pp=2) == 1
    assert copies_divisor(LAYOUTS["vllm"], "T2", is_mla=True, tp=8, hosts=2) == 1
    assert copies_divisor(LAYOUTS["vllm"], "T3", is_mla=True, tp=8, hosts=2) == 8  # LMCache's
    assert copies_divisor(LAYOUTS["lmcache"], "T2", is_mla=True, tp=8, hosts=2) == 8
