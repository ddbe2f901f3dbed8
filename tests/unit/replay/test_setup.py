"""A replay's set-up from resolved inputs (docs/replay.md, "Sizes from hardware"): units in
tokens or bytes, capacities in whole blocks, sizes from the node's plan, the notes that say
what was assumed, and the errors for bytes or hardware without a model."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.inputs.hardware import resolve_hardware
from kvtool.inputs.shape import resolve_shape
from kvtool.inputs.trace import read_trace
from kvtool.model.shape import KvShape
from kvtool.plan.deployment import Hardware
from kvtool.replay.run import ReplayConfig
from kvtool.replay.setup import replay_plan, replay_setup, tier_units
from kvtool.replay.trace import Request, Trace
from kvtool.replay.ttft import plan_capacities
from kvtool.units import TierSize, parse_tier_size

HEAD = Path(__file__).parents[2] / "fixtures" / "traces" / "conversation_trace_head.jsonl"
TRACE = read_trace(HEAD)
# Llama 3.1 8B, bf16: 32 layers x 8 KV heads x 128 dims x (K + V) x 2 B x 512 tokens
BLOCK_BYTES = 32 * 8 * 128 * 2 * 2 * 512
BASE = ReplayConfig(capacity={}, block_units=512, unit="tokens")


@cache
def _shape(kv_dtype: str = "auto") -> KvShape:
    return resolve_shape("llama-3.1-8b", kv_dtype=kv_dtype)


@cache
def _p5en() -> Hardware:
    return resolve_hardware("p5en")


def _sizes(**typed: str) -> dict[str, TierSize | None]:
    return {tier.upper(): parse_tier_size(text, what=f"--{tier}") for tier, text in typed.items()}


def _trace(*inputs: int, block_tokens: int = 512) -> Trace:
    requests = [
        Request(float(i), n, 1, tuple(f"{i}-{j}" for j in range(-(-n // block_tokens))))
        for i, n in enumerate(inputs)
    ]
    return Trace(requests, block_tokens, "jsonl", 0, "hand-made")


# --- without a model: tokens ------------------------------------------------------------------


def test_no_sizes_and_no_hardware_is_the_reuse_ratio_and_says_so() -> None:
    setup = replay_setup(TRACE, {}, BASE)
    assert setup.config.capacity == {"T1": None, "T2": 0, "T3": 0, "T4": 0}
    assert (setup.config.unit, setup.config.block_units) == ("tokens", 512)
    assert setup.plan is None
    assert setup.ttft is None
    assert setup.notes == [
        "no sizes and no --hardware: T1 unbounded and the rest off (the reuse ratio)",
        "no TTFT estimate: it needs --model and --hardware",
    ]


def test_sizes_given_as_none_count_as_not_given() -> None:
    setup = replay_setup(TRACE, {"T1": None, "T2": None}, BASE, ttft=False)
    assert setup.config.capacity == {"T1": None, "T2": 0, "T3": 0, "T4": 0}


def test_without_ttft_there_is_no_ttft_note() -> None:
    setup = replay_setup(TRACE, {}, BASE, ttft=False)
    assert setup.notes == [
        "no sizes and no --hardware: T1 unbounded and the rest off (the reuse ratio)"
    ]


def test_sizes_in_tokens_hold_whole_blocks_and_tiers_not_given_are_off() -> None:
    setup = replay_setup(TRACE, _sizes(t1="1000", t3="3M"), BASE, ttft=False)
    assert setup.config.capacity == {
        "T1": 512,  # 1000 tokens: one whole 512-token block
        "T2": 0,
        "T3": 3 * 2**20,  # 3M = 3,145,728 tokens (M is 2^20, as in --ctx): 6,144 blocks
        "T4": 0,
    }
    assert setup.notes == []


def test_off_and_inf_are_zero_and_unbounded() -> None:
    setup = replay_setup(TRACE, _sizes(t1="inf", t2="0", t3="off", t4="unbounded"), BASE)
    assert setup.config.capacity == {"T1": None, "T2": 0, "T3": 0, "T4": None}


def test_the_base_rules_are_kept() -> None:
    base = BASE._replace(policy="s3fifo", posture="eager", t2_idle_s=7.0, t3_idle_s=70.0)
    config = replay_setup(TRACE, _sizes(t1="2k"), base).config
    assert (config.policy, config.posture, config.t2_idle_s, config.t3_idle_s) == (
        "s3fifo",
        "eager",
        7.0,
        70.0,
    )
    assert config.pressure == 1.0
    assert config.shared_ttl_s is None


def test_the_trace_sets_the_block_size_in_tokens() -> None:
    trace = _trace(1000, 300, block_tokens=128)
    config = replay_setup(trace, _sizes(t1="1000"), BASE, ttft=False).config
    assert config.block_units == 128
    assert config.capacity["T1"] == 7 * 128  # 1000 // 128 = 7 whole blocks


def test_a_size_in_bytes_needs_a_model() -> None:
    with pytest.raises(InputError) as caught:
        replay_setup(TRACE, _sizes(t2="80GiB"), BASE)
    assert caught.value.message == "--t2 80.0 GiB is in bytes: that needs --model"
    assert caught.value.hint == "add --model NAME, or give the size in tokens (3M)"


def test_hardware_needs_a_model() -> None:
    with pytest.raises(InputError) as caught:
        replay_setup(TRACE, {}, BASE, hardware=_p5en())
    assert caught.value.message == "--hardware needs --model"
    assert caught.value.hint == "add --model NAME"


def test_forced_block_bytes_count_in_bytes_without_a_note() -> None:
    """``--real`` without a model: blocks of the given bytes, sizes in tokens or bytes."""
    sizes = _sizes(t1="2048", t2="100000B", t3="1MiB", t4="inf")
    setup = replay_setup(TRACE, sizes, BASE, block_bytes=8192, ttft=False)
    assert (setup.config.unit, setup.config.block_units) == ("bytes", 8192)
    assert setup.config.capacity == {
        "T1": 4 * 8192,  # 2048 tokens: 4 blocks of 8 KiB
        "T2": 12 * 8192,  # 100,000 B: 12 whole 8 KiB blocks
        "T3": 2**20,
        "T4": None,
    }
    assert setup.notes == []


# --- with a model: bytes ----------------------------------------------------------------------


def test_a_model_sizes_blocks_in_bytes_and_says_how_many() -> None:
    setup = replay_setup(TRACE, _sizes(t1="1GiB", t2="1GB", t3="3000"), BASE, shape=_shape())
    assert (setup.config.unit, setup.config.block_units) == ("bytes", BLOCK_BYTES)
    assert setup.config.capacity == {
        "T1": 16 * BLOCK_BYTES,  # 1 GiB is 16 blocks of 64 MiB exactly
        "T2": 14 * BLOCK_BYTES,  # 1 GB: 14 whole blocks (14.9)
        "T3": 5 * BLOCK_BYTES,  # 3000 tokens: 5 whole 512-token blocks
        "T4": 0,
    }
    assert setup.plan is None
    assert setup.ttft is None
    assert setup.notes == [
        "a block of 512 tokens is 67,108,864 B of llama-3.1-8b (bf16, vllm, tp 1) KV (every rank)",
        "no TTFT estimate: it needs --model and --hardware",
    ]


def test_an_fp8_cache_halves_the_block() -> None:
    config = replay_setup(TRACE, _sizes(t1="1GiB"), BASE, shape=_shape("fp8"), ttft=False).config
    assert config.block_units == BLOCK_BYTES // 2
    assert config.capacity["T1"] == 32 * BLOCK_BYTES // 2  # twice the blocks in the same bytes


def test_a_model_wins_over_forced_block_bytes() -> None:
    config = replay_setup(TRACE, {}, BASE, shape=_shape(), block_bytes=8192, ttft=False).config
    assert config.block_units == BLOCK_BYTES


def test_a_model_without_sizes_is_still_the_reuse_ratio() -> None:
    setup = replay_setup(TRACE, {}, BASE, shape=_shape(), ttft=False)
    assert setup.config.capacity == {"T1": None, "T2": 0, "T3": 0, "T4": 0}
    assert setup.notes[-1].startswith("no sizes and no --hardware")


# --- with hardware: the plan ------------------------------------------------------------------


def test_the_plan_is_for_one_session_as_long_as_the_longest_request() -> None:
    plan = replay_plan(TRACE, _shape(), _p5en())
    assert plan.ctx_tokens == max(r.input_tokens for r in TRACE.requests) == 120_633
    assert plan.tiers.sessions_per_node_in_t1 >= 1
    assert sum(t.sessions for t in plan.tiers.tiers) == 1
    assert plan.assumptions.concurrent_loads == 1
    assert plan.hardware.node.name == "p5en.48xlarge"


def test_a_trace_of_short_requests_plans_at_least_one_block() -> None:
    plan = replay_plan(_trace(10, 100), _shape(), _p5en())
    assert plan.ctx_tokens == 512


def test_hardware_gives_t1_and_t2_from_the_plan_and_leaves_t3_t4_unbounded() -> None:
    setup = replay_setup(TRACE, {}, BASE, shape=_shape(), hardware=_p5en())
    assert setup.plan is not None
    plan = setup.plan
    assert setup.config.capacity == plan_capacities(plan)
    assert setup.config.capacity == {
        "T1": plan.tiers.pressure_bytes_per_node,
        "T2": int(plan.hardware.node.host_memory_bytes * 0.8),
        "T3": None,
        "T4": None,
    }
    assert setup.config.capacity["T1"] > 100 * 2**30
    assert setup.ttft is not None
    assert setup.ttft.source.startswith("estimate: one request alone on one tp 8 instance")
    assert setup.notes == [
        # priced at the plan's serving tp (8): a block is still every rank's KV
        "a block of 512 tokens is 67,108,864 B of llama-3.1-8b (bf16, vllm, tp 8) KV (every rank)",
        "T1, T2 from the p5en.48xlarge plan (T1: HBM for KV up to the 85% pressure line;"
        " T2: host memory for KV)",
    ]


def test_sizes_given_replace_the_plans_and_the_note_names_only_the_rest() -> None:
    setup = replay_setup(
        TRACE, _sizes(t1="1GiB", t3="0", t4="3000"), BASE, shape=_shape(), hardware=_p5en()
    )
    assert setup.plan is not None
    assert setup.config.capacity == {
        "T1": 16 * BLOCK_BYTES,
        "T2": plan_capacities(setup.plan)["T2"],
        "T3": 0,
        "T4": 5 * BLOCK_BYTES,
    }
    assert setup.notes[1].startswith("T2 from the p5en.48xlarge plan (")
    both = replay_setup(TRACE, _sizes(t1="1GiB", t2="2GiB"), BASE, shape=_shape(), hardware=_p5en())
    assert not any("plan" in note for note in both.notes)
    assert both.config.capacity == {
        "T1": 16 * BLOCK_BYTES,
        "T2": 32 * BLOCK_BYTES,
        "T3": None,
        "T4": None,
    }


def test_a_sweep_skips_the_ttft_model_but_keeps_the_plan() -> None:
    setup = replay_setup(TRACE, {}, BASE, shape=_shape(), hardware=_p5en(), ttft=False)
    assert setup.ttft is None
    assert setup.plan is not None
    assert not any("TTFT" in note for note in setup.notes)


# --- tier_units -------------------------------------------------------------------------------

TOKENS = ReplayConfig(capacity={}, block_units=512, unit="tokens")
BYTES = ReplayConfig(capacity={}, block_units=1000, unit="bytes")


def test_tier_units_off_and_unbounded() -> None:
    for config in (TOKENS, BYTES):
        assert tier_units(TRACE, config, "T1", TierSize("off", 0)) == 0
        assert tier_units(TRACE, config, "T1", TierSize("unbounded", 0)) is None


def test_a_size_below_one_block_is_refused_not_turned_off() -> None:
    """``--t1 100`` used to turn T1 off without a word; only 0 means off."""
    with pytest.raises(InputError, match=r"^--t2 511 tokens holds no whole block \(512 tokens"):
        tier_units(TRACE, TOKENS, "T2", TierSize("tokens", 511))
    with pytest.raises(InputError, match=r"^--t2 999 B holds no whole block"):
        tier_units(TRACE, BYTES, "T2", TierSize("bytes", 999))
    assert tier_units(TRACE, BYTES, "T2", TierSize("bytes", 0)) == 0  # 0GiB: off, as 0


def test_tier_units_bytes_error_names_the_tier() -> None:
    with pytest.raises(InputError, match=r"^--t3 2\.00 KiB is in bytes: that needs --model"):
        tier_units(TRACE, TOKENS, "T3", TierSize("bytes", 2048))


@given(st.integers(0, 10**12), st.integers(1, 2**27))
def test_tier_units_are_whole_blocks_no_larger_than_the_size(value: int, block: int) -> None:
    value = max(value, block, 512)  # below one block is refused (tested above)
    config = BYTES._replace(block_units=block)
    in_bytes = tier_units(TRACE, config, "T1", TierSize("bytes", value))
    assert in_bytes is not None
    assert in_bytes % block == 0
    assert value - block < in_bytes <= value
    in_tokens = tier_units(TRACE, config, "T1", TierSize("tokens", value))
    assert in_tokens == value // 512 * block  # whole 512-token blocks, each of ``block`` bytes


def test_a_tier_without_a_published_bandwidth_gives_no_ttft_rather_than_a_crash() -> None:
    """A trn3-ultraserver publishes no host-to-chip bandwidth: T2 has no reload time, so the
    TTFT estimate is dropped with a note (it used to raise KeyError 'T2' on the first T2 hit)."""
    setup = replay_setup(
        TRACE, _sizes(), BASE, shape=_shape(), hardware=resolve_hardware("trn3-ultraserver")
    )
    assert setup.config.capacity["T2"]
    assert setup.ttft is None
    assert any("publishes no bandwidth for T2" in n for n in setup.notes)
    off = replay_setup(
        TRACE, _sizes(T2="0"), BASE, shape=_shape(), hardware=resolve_hardware("trn3-ultraserver")
    )
    assert off.ttft is not None


@pytest.mark.parametrize(
    ("model", "granularity"),
    [("qwen3-next-80b-a3b", 576), ("nemotron-h-56b", 4128), ("llama-3.1-8b", 1)],
)
def test_a_model_with_state_layers_rounds_hits_to_its_hybrid_block(
    model: str, granularity: int
) -> None:
    """The block sizes are kvtool's sizing of vLLM 0.33.0 (``size`` prints the same); an
    attention-only model keeps the trace's blocks."""
    sizes = {"T1": TierSize("bytes", 10 * 2**30)}
    setup = replay_setup(TRACE, sizes, BASE, shape=resolve_shape(model))
    assert setup.config.hit_granularity == granularity
    said = [n for n in setup.notes if n.startswith("hits rounded down")]
    if granularity > 1:
        assert said == [
            f"hits rounded down to whole {granularity:,}-token blocks: vLLM caches the prefixes"
            f" of {model} (state layers) only at its hybrid block size (a prompt shorter than"
            f" {granularity:,} tokens never hits)"
        ]
    else:
        assert said == []
