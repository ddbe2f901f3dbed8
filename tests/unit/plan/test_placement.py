"""Tier placement on bundled hardware, including the AWS article's two scale cases."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.plan.placement import PlanInputs, kv_space_per_node, plan_tiers
from kvtool.profiles.load import load_node_profile, node_profiles

from .conftest import model, session_bytes

NO_DRAM = replace(load_node_profile("trn3-ultraserver"), host_memory_gib=0)


def inputs(name: str, hardware: str, ctx: int, sessions: int, **extra: object) -> PlanInputs:
    spec, params = model(name)
    return PlanInputs(
        node=load_node_profile(hardware),
        nodes=int(extra.pop("nodes", 1)),  # type: ignore[call-overload]
        weights_bytes=params.total * 2,
        kv_bytes_per_session=session_bytes(spec, ctx),
        sessions=sessions,
        **extra,  # type: ignore[arg-type]
    )


def test_brief_gqa_200k_by_100_fits_trn3_ultraserver_hbm() -> None:
    plan = plan_tiers(inputs("llama-3.1-405b", "trn3-ultraserver", 200_000, 100))
    assert plan.total_kv_bytes == pytest.approx(10.3e12, rel=0.01)  # the article's "~10 TB"
    assert plan.fits_in_t1
    assert plan.nodes_for_all_in_t1 == 1
    assert plan.tiers[0].sessions == 100


def test_same_workload_needs_tiers_on_one_gpu_node() -> None:
    plan = plan_tiers(inputs("llama-3.1-405b", "p5en", 200_000, 100))
    assert not plan.fits_in_t1
    assert plan.tiers[0].sessions < 100
    assert sum(t.sessions for t in plan.tiers) == 100
    assert plan.nodes_for_all_in_t1 > 10


def test_brief_dense_1m_by_500_needs_several_tiers() -> None:
    plan = plan_tiers(inputs("llama-3.1-405b", "trn3-ultraserver", 1_000_000, 500, nodes=2))
    assert plan.total_kv_bytes > 250e12  # hundreds of TB in BF16
    used = [t.name for t in plan.tiers if t.sessions]
    assert used[0] == "T1"
    assert "T3" in used
    assert plan.t3_bytes_needed > 100e12  # after T1 and the UltraServers' 27,648 GiB of DRAM


def test_fsx_capacity_bounds_t3_and_the_rest_goes_to_s3() -> None:
    plan = plan_tiers(inputs("llama-3.1-70b", "p5en", 128_000, 2000, fsx_capacity_bytes=10**12))
    t3, t4 = plan.tiers[2], plan.tiers[3]
    assert t3.used_bytes <= 10**12
    assert t4.sessions > 0
    assert t3.utilization is not None
    assert t3.utilization <= 1


def test_weights_larger_than_hbm_is_an_input_error() -> None:
    with pytest.raises(InputError, match="leave no room for KV"):
        plan_tiers(inputs("llama-3.1-405b", "p4d", 8_000, 1))


def test_session_larger_than_a_node_is_an_input_error() -> None:
    with pytest.raises(InputError, match="does not fit under the 85% line"):
        plan_tiers(inputs("llama-3.1-405b", "p5en", 2_000_000, 1))


def test_t1_stops_at_the_pressure_line() -> None:
    plan_in = inputs("llama-3.1-8b", "p5", 32_000, 10_000)
    plan = plan_tiers(plan_in)
    t1 = plan.tiers[0]
    assert t1.used_bytes <= 0.85 * kv_space_per_node(plan_in)
    assert t1.used_bytes + plan_in.kv_bytes_per_session > 0.85 * kv_space_per_node(plan_in)


def test_a_node_without_published_host_memory_gets_no_t2() -> None:
    plan = plan_tiers(
        replace(inputs("llama-3.1-405b", "trn3-ultraserver", 1_000_000, 100), node=NO_DRAM)
    )
    assert plan.tiers[1].capacity_bytes == 0
    assert plan.tiers[1].sessions == 0


@settings(max_examples=50, deadline=None)
@given(
    hardware=st.sampled_from([n.name for n in node_profiles()]),
    sessions=st.integers(1, 5000),
    ctx=st.integers(1000, 300_000),
    nodes=st.integers(1, 16),
    fsx_tb=st.one_of(st.none(), st.integers(1, 500)),
)
def test_plan_never_exceeds_tier_capacity(
    hardware: str, sessions: int, ctx: int, nodes: int, fsx_tb: int | None
) -> None:
    try:
        plan = plan_tiers(
            inputs(
                "llama-3.1-8b",
                hardware,
                ctx,
                sessions,
                nodes=nodes,
                fsx_capacity_bytes=None if fsx_tb is None else fsx_tb * 10**12,
            )
        )
    except InputError:
        return
    assert sum(t.sessions for t in plan.tiers) == sessions
    for tier in plan.tiers:
        if tier.capacity_bytes is not None:
            assert tier.used_bytes <= tier.capacity_bytes


def test_a_measured_pool_replaces_the_estimate() -> None:
    base = PlanInputs(node=load_node_profile("p5"), nodes=1, weights_bytes=10**11,
                      kv_bytes_per_session=10**9, sessions=10)  # fmt: skip
    measured = replace(base, measured_kv_space_bytes_per_node=123_456_789_000)
    assert kv_space_per_node(measured) == 123_456_789_000 != kv_space_per_node(base)
    plan = plan_tiers(measured)
    assert plan.kv_space_bytes_per_node == 123_456_789_000
    assert any("the engine's own pool" in note for note in plan.notes)


def test_tensorrt_llms_pool_is_its_fraction_of_what_the_weights_leave() -> None:
    """vLLM takes gpu_memory_utilization of all HBM and then subtracts the weights; TensorRT-LLM
    takes free_gpu_memory_fraction of what the weights (and the profiling run) leave
    (KvCacheCreator.configure_kv_cache_capacity): with the same 0.9 the two differ by 0.1 x
    the weights and reserve, and with heavy weights TensorRT-LLM's is the larger."""
    vllm = inputs("llama-3.1-405b", "p5en", 8_000, 1, gpu_memory_utilization=0.9)
    trt = replace(vllm, pool_of_free=True)
    node = vllm.node
    reserve = node.chips * 2e9
    assert kv_space_per_node(vllm) == int(node.hbm_bytes * 0.9 - vllm.weights_bytes - reserve)
    assert kv_space_per_node(trt) == int((node.hbm_bytes - vllm.weights_bytes - reserve) * 0.9)
    assert kv_space_per_node(trt) - kv_space_per_node(vllm) == pytest.approx(
        0.1 * (vllm.weights_bytes + reserve), abs=2
    )
    (note,) = [n for n in plan_tiers(trt).notes if n.startswith("HBM for KV")]
    assert "free_gpu_memory_fraction 0.9" in note
    assert "GDS" not in note
    (gds,) = [n for n in plan_tiers(replace(trt, extra_reserve_bytes_per_chip=2**30)).notes
              if n.startswith("HBM for KV")]  # fmt: skip
    assert "and the GDS buffer's" in gds  # a reserve the note names, as the sum counts it
    assert not [n for n in plan_tiers(vllm).notes if n.startswith("HBM for KV")]


def test_weights_past_the_hbm_leave_no_room_under_either_rule() -> None:
    heavy = inputs("llama-3.1-405b", "p5en", 8_000, 1)
    heavy = replace(heavy, weights_bytes=heavy.node.hbm_bytes + 1)
    for one in (heavy, replace(heavy, pool_of_free=True)):
        assert kv_space_per_node(one) < 0
        with pytest.raises(InputError, match="leave no room for KV"):
            plan_tiers(one)
    with pytest.raises(InputError, match="at free_gpu_memory_fraction"):
        plan_tiers(replace(heavy, pool_of_free=True))
