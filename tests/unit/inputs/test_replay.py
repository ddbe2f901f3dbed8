"""The front door's replay and sweep inputs: the trace, the shape, the node, the sizes as typed
and the engine's rules into a ReplaySetup; every mistake one InputError before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.replay import resolve_replay

HEAD = Path(__file__).parents[2] / "fixtures" / "traces" / "conversation_trace_head.jsonl"
SIZES = {"T1": "1M", "T2": "3M", "T3": "inf", "T4": None}


def test_tokens_without_a_model() -> None:
    inputs = resolve_replay(HEAD, sizes=SIZES)
    config = inputs.setup.config
    assert (config.unit, config.block_units) == ("tokens", 512)
    # a tier's M is --ctx's, 2^20 tokens, held in whole 512-token blocks
    assert config.capacity == {"T1": 2**20, "T2": 3 * 2**20, "T3": None, "T4": 0}
    assert inputs.sweep == {}
    assert inputs.setup.ttft is None


def test_a_model_sizes_blocks_in_bytes_in_its_kv_dtype() -> None:
    bf16 = resolve_replay(HEAD, sizes=SIZES, model="llama-3.1-70b", tp="8")
    fp8 = resolve_replay(HEAD, sizes=SIZES, model="llama-3.1-70b", tp="8", kv_dtype="fp8")
    # 512 tokens x 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 B, all ranks
    assert bf16.setup.config.block_units == 512 * 80 * 8 * 128 * 2 * 2
    assert fp8.setup.config.block_units * 2 == bf16.setup.config.block_units
    assert bf16.setup.config.unit == "bytes"


def test_hardware_fills_t1_and_t2_and_the_ttft_model() -> None:
    inputs = resolve_replay(HEAD, sizes={"T3": "inf"}, model="llama-3.1-8b", hardware="p5en")
    setup = inputs.setup
    assert setup.plan is not None
    assert setup.ttft is not None
    assert setup.config.capacity["T1"] == setup.plan.tiers.pressure_bytes_per_node
    assert any("from the p5en.48xlarge plan" in n for n in setup.notes)


def test_a_sweep_gives_each_tiers_sizes_in_units() -> None:
    inputs = resolve_replay(HEAD, sizes={"T1": "1M,2M,inf", "T2": "0"}, sweep=True)
    one, two = 2**20, 2 * 2**20  # M: x1024^2, as in --ctx
    assert inputs.sweep == {"T1": [one, two, None], "T2": [0]}
    assert inputs.setup.config.capacity["T1"] == one  # the first of each


def test_options_without_a_model_say_they_have_no_effect() -> None:
    inputs = resolve_replay(HEAD, sizes=SIZES, tp="8", kv_dtype="fp8")
    assert inputs.setup.notes[:2] == [
        "--tp has no effect without --model (blocks are counted in tokens)",
        "--kv-dtype has no effect without --model (blocks are counted in tokens)",
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"hardware": "p5en"}, "--hardware needs --model"),
        ({"block_bytes": "64KiB"}, "--block-bytes goes with --real and no --model"),
        ({"sizes": {"T1": "1M,2M"}}, "--t1 takes one size in a replay"),
        ({"sizes": {"T1": "80GiB"}}, r"--t1 80\.0 GiB is in bytes: that needs --model"),
        ({"policy": "clock"}, "unknown --policy 'clock'"),
        ({"posture": "EAGER"}, "unknown --posture 'EAGER'"),
        ({"t2_idle": 0.0}, "--t2-idle must be a positive duration, got 0"),
        ({"t2_idle": float("nan")}, "--t2-idle must be a positive duration, got nan"),
        ({"t3_idle": float("inf")}, "--t3-idle must be a positive duration, got inf"),
    ],
)
def test_each_mistake_names_its_option(options: dict[str, object], message: str) -> None:
    given: dict[str, object] = {"sizes": SIZES, **options}
    with pytest.raises(InputError, match=message):
        resolve_replay(HEAD, **given)  # type: ignore[arg-type]


def test_a_sweep_needs_sizes_to_vary() -> None:
    with pytest.raises(InputError, match="a sweep needs sizes to vary"):
        resolve_replay(HEAD, sizes={}, sweep=True)


def test_a_tier_past_what_the_hardware_holds_is_warned_of() -> None:
    fits = resolve_replay(HEAD, sizes={"T1": "1M"}, model="llama-3.1-8b", hardware="p5en")
    assert not any(n.startswith("warning:") for n in fits.setup.notes)
    past = resolve_replay(HEAD, sizes={"T1": "100TB"}, model="llama-3.1-8b", hardware="p5en")
    [warning] = [n for n in past.setup.notes if n.startswith("warning:")]
    assert "--t1 90.9 TiB is more than the p5en.48xlarge plan's T1" in warning
    unbounded = resolve_replay(HEAD, sizes={"T1": "inf"}, model="llama-3.1-8b", hardware="p5en")
    assert any("--t1 unbounded is more than" in n for n in unbounded.setup.notes)


def test_idle_times_are_durations_and_bare_seconds_get_a_note() -> None:
    timed = resolve_replay(HEAD, sizes=SIZES, t2_idle="30s", t3_idle="2h")
    assert (timed.setup.config.t2_idle_s, timed.setup.config.t3_idle_s) == (30.0, 7200.0)
    assert not any("--t2-idle" in n for n in timed.setup.notes)
    bare = resolve_replay(HEAD, sizes=SIZES, t2_idle="30")
    assert bare.setup.config.t2_idle_s == 30.0
    assert "--t2-idle 30 is read as 30s; give the unit" in bare.setup.notes[0]
    with pytest.raises(InputError, match="--t3-idle 'soon' is not a duration"):
        resolve_replay(HEAD, sizes=SIZES, t3_idle="soon")
