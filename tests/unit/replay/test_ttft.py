"""Replay's sizes and TTFT model from a deployment plan, each number derived by hand from the
plan's own figures (Llama 3.1 8B on a p5en): T1 the HBM for KV up to the 85% line, T2 the
host memory for KV; prefill at the plan's MFU on one instance's share of the node, never
faster than one pass over the weights; reload per block the longer of bytes over bandwidth
and one operation over the I/O threads."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.inputs.hardware import resolve_hardware
from kvtool.inputs.shape import resolve_shape
from kvtool.inputs.trace import read_trace
from kvtool.model.params import count_params
from kvtool.plan.deployment import DeploymentPlan
from kvtool.plan.placement import TierUse
from kvtool.plan.reload import TierPath, prefill_flops
from kvtool.replay.setup import replay_plan
from kvtool.replay.ttft import plan_capacities, ttft_model

HEAD = Path(__file__).parents[2] / "fixtures" / "traces" / "conversation_trace_head.jsonl"
BLOCK_BYTES = 32 * 8 * 128 * 2 * 2 * 512  # Llama 3.1 8B, bf16, one 512-token block
SHAPE = resolve_shape("llama-3.1-8b")
SPEC = SHAPE.spec


@cache
def _plan() -> DeploymentPlan:
    return replay_plan(read_trace(HEAD), SHAPE, resolve_hardware("p5en"))


# --- plan_capacities ----------------------------------------------------------------------------


def test_capacities_are_the_85_percent_line_and_the_host_memory_for_kv() -> None:
    plan = _plan()
    node = plan.hardware.node
    capacity = plan_capacities(plan)
    assert capacity == {
        "T1": int(plan.tiers.kv_space_bytes_per_node * 0.85),
        "T2": int(node.host_memory_bytes * 0.8),
        "T3": None,
        "T4": None,
    }
    assert capacity["T2"] == int(2048 * 2**30 * 0.8)  # the p5en's 2 TiB of host memory
    assert capacity["T1"] == plan.tiers.pressure_bytes_per_node
    assert capacity["T1"] < plan.tiers.kv_space_bytes_per_node < node.hbm_bytes


def test_a_plan_without_t2_or_with_none_turns_t2_off() -> None:
    plan = _plan()
    no_t2 = tuple(t for t in plan.tiers.tiers if t.name != "T2")
    assert plan_capacities(replace(plan, tiers=replace(plan.tiers, tiers=no_t2)))["T2"] == 0
    empty_t2 = tuple(
        TierUse("T2", t.medium, 0, 0, 0) if t.name == "T2" else t for t in plan.tiers.tiers
    )
    assert plan_capacities(replace(plan, tiers=replace(plan.tiers, tiers=empty_t2)))["T2"] == 0


# --- ttft_model: prefill ------------------------------------------------------------------------


def _flops_s(plan: DeploymentPlan, tokens: int) -> float:
    """FLOPs over MFU x one instance's peak (tp of the node's chips)."""
    instance_peak = plan.compute.peak_flops * plan.serving.tp / plan.hardware.node.chips
    return prefill_flops(SPEC, count_params(SPEC), tokens) / (plan.assumptions.mfu * instance_peak)


def test_prefill_is_flops_over_mfu_times_the_instances_peak() -> None:
    plan = _plan()
    model = ttft_model(SPEC, plan, block_bytes=BLOCK_BYTES)
    assert (plan.serving.tp, plan.hardware.node.chips, plan.assumptions.mfu) == (8, 8, 0.4)
    for tokens in (4_096, 32_000, 120_633):
        expected = _flops_s(plan, tokens)
        assert expected > plan.compute.weight_pass_s  # long enough to be compute-bound
        assert model.prefill_s(tokens) == pytest.approx(expected, rel=1e-12)


def test_a_short_prefill_takes_one_pass_over_the_weights() -> None:
    plan = _plan()
    model = ttft_model(SPEC, plan, block_bytes=BLOCK_BYTES)
    assert _flops_s(plan, 1) < plan.compute.weight_pass_s
    assert model.prefill_s(1) == plan.compute.weight_pass_s
    # 16 GB of bf16 weights over 8 chips' HBM
    hbm = 8 * plan.hardware.node.hbm_tbytes_per_s_per_chip * 1e12
    assert plan.compute.weight_pass_s == pytest.approx(
        plan.serving.weights_bytes_per_instance / hbm
    )


def test_nothing_to_prefill_takes_no_time() -> None:
    model = ttft_model(SPEC, _plan(), block_bytes=BLOCK_BYTES)
    assert model.prefill_s(0) == 0.0
    assert model.prefill_s(-5) == 0.0


def test_a_smaller_instance_and_a_lower_mfu_prefill_slower() -> None:
    plan = _plan()
    tokens = 100_000
    base = ttft_model(SPEC, plan, block_bytes=BLOCK_BYTES).prefill_s(tokens)
    quarter = replace(plan, serving=replace(plan.serving, tp=2))  # a quarter of the node
    assert ttft_model(SPEC, quarter, block_bytes=BLOCK_BYTES).prefill_s(tokens) == pytest.approx(
        4 * base, rel=1e-12
    )
    half_mfu = replace(plan, assumptions=replace(plan.assumptions, mfu=0.2))
    assert ttft_model(SPEC, half_mfu, block_bytes=BLOCK_BYTES).prefill_s(tokens) == pytest.approx(
        2 * base, rel=1e-12
    )


@given(st.integers(0, 200_000), st.integers(0, 200_000))
def test_prefill_never_falls_as_the_prompt_grows(a: int, b: int) -> None:
    model = ttft_model(SPEC, _plan(), block_bytes=BLOCK_BYTES)
    low, high = sorted((a, b))
    assert model.prefill_s(low) <= model.prefill_s(high)


# --- ttft_model: reloads ------------------------------------------------------------------------


def test_reload_per_block_and_latency_per_tier_from_the_plans_paths() -> None:
    plan = _plan()
    model = ttft_model(SPEC, plan, block_bytes=BLOCK_BYTES)
    paths = {p.tier: p for p in plan.paths}
    assert set(paths) == {"T2", "T3", "T4"}
    expected_block = {"T1": 0.0}
    for tier, p in paths.items():
        expected_block[tier] = max(
            BLOCK_BYTES / p.bytes_divisor / p.node_bytes_per_s, p.op_s / max(p.io_threads, 1)
        )
    assert model.reload_block_s == expected_block
    assert model.latency_s == {"T1": 0.0, **{t: p.latency_s for t, p in paths.items()}}
    # the p5en's figures: 504 GB/s host links; the FSx the plan sized (for T3 to beat
    # recompute from 50K tokens) at 1,000 MB/s/TiB
    assert model.reload_block_s["T2"] == BLOCK_BYTES / 504e9
    gib = plan.file_system.capacity_gib
    assert plan.t3_size.source == "sized for throughput"
    assert model.reload_block_s["T3"] == pytest.approx(BLOCK_BYTES / (gib / 1024 * 1e9))
    assert model.latency_s["T2"] == 5e-6


def test_a_hand_made_path_the_operation_or_the_bandwidth_decides() -> None:
    plan = _plan()
    paths = (
        # 1 MB stored as a quarter: 250 kB at 1 GB/s is 0.25 ms; one 0.5 s op on no threads
        TierPath("T3", "slow ops", 0.002, 1e9, op_s=0.5, io_threads=0, bytes_divisor=4),
        # 1 MB at 100 MB/s is 10 ms; 64 ops of 0.1 s over 64 threads is 1.6 ms
        TierPath("T4", "slow link", 0.08, 1e8, op_s=0.1, io_threads=64),
    )
    model = ttft_model(SPEC, replace(plan, paths=paths), block_bytes=1_000_000)
    assert model.reload_block_s == {"T1": 0.0, "T3": 0.5, "T4": pytest.approx(0.01)}
    assert model.latency_s == {"T1": 0.0, "T3": 0.002, "T4": 0.08}


def test_the_source_labels_the_estimate() -> None:
    source = ttft_model(SPEC, _plan(), block_bytes=BLOCK_BYTES).source
    assert source == (
        "estimate: one request alone on one tp 8 instance of p5en.48xlarge at 40% MFU (bf16);"
        " reloads at the plan's per-node bandwidths"
    )


def test_t2_is_one_nodes_host_memory_whatever_the_node_count() -> None:
    """The plan's T2 is every node's host memory; a replay runs one node, as T1 is."""
    one = plan_capacities(_plan())
    two = plan_capacities(replay_plan(read_trace(HEAD), SHAPE, resolve_hardware("p5en", nodes=2)))
    assert two["T2"] == one["T2"]
    assert two["T1"] == one["T1"]
