"""The AWS article's criteria for the four-tier architecture, one at a time and together."""

from __future__ import annotations

from kvtool.plan.advise import Capacity, advise
from kvtool.plan.workload import Workload as _Workload


def Workload(**fields: object) -> _Workload:
    return _Workload(model="m", hardware="h", **fields)  # type: ignore[arg-type]


GB = 10**9
# One node: 800 GB of HBM under the 85% line, 1,600 GB of DRAM, sessions of 10 GB at 32K.
CAPACITY = Capacity(
    session_bytes={32_000: 10 * GB, 128_000: 40 * GB},
    nodes=1,
    t1_pressure_bytes_per_node=800 * GB,
    t2_bytes_per_node=1_600 * GB,
    hbm_kv_space_bytes_per_node=940 * GB,
)


def met(advice_names: list[str], workload: Workload, capacity: Capacity = CAPACITY) -> None:
    advice = advise(workload, capacity)
    assert [c.name for c in advice.criteria if c.met] == advice_names


def test_short_contexts_at_low_concurrency_need_only_t1() -> None:
    advice = advise(Workload(sessions=10, contexts={32_000: 1.0}), CAPACITY)
    assert advice.tiers == ("T1",)
    assert advice.posture == "lazy"
    assert not any(c.met for c in advice.criteria)


def test_medium_working_set_adds_t2_only() -> None:
    advice = advise(Workload(sessions=100, contexts={32_000: 1.0}), CAPACITY)
    # 1 TB: over HBM, under HBM + DRAM, so T2; one criterion holds, and any one brings T3
    assert advice.tiers == ("T1", "T2", "T3")
    assert [c.name for c in advice.criteria if c.met] == ["working set exceeds HBM"]
    assert "T3: 1 criterion of the article's 6 holds (working set exceeds HBM), and any one" \
        " makes a shared tier worth it" in advice.reasons  # fmt: skip
    assert not any("exceeds T1 + T2" in r for r in advice.reasons)  # not for room


def test_each_criterion_is_evaluated_against_its_threshold() -> None:
    met(["shared prefixes"], Workload(sessions=1, contexts={32_000: 1.0}, shared_prefix=0.31))
    met([], Workload(sessions=1, contexts={32_000: 1.0}, shared_prefix=0.30))
    met(["long idle time"], Workload(sessions=1, contexts={32_000: 1.0}, mean_idle_s=31))
    met(["bursty concurrency"], Workload(sessions=1, contexts={32_000: 1.0}, peak_to_mean=3.5))
    met(
        ["disaggregated prefill/decode"],
        Workload(sessions=1, contexts={32_000: 1.0}, disaggregated=True),
    )
    met(
        ["GPUs added to hold KV"],
        Workload(sessions=1, contexts={32_000: 1.0}, gpus_added_for_kv=True),
    )


def test_disaggregation_alone_requires_a_shared_tier_and_eager_writes() -> None:
    """The article makes eager mandatory because decode nodes are never the prefill node:
    so a shared tier is required too, never "T1 only, eager"."""
    advice = advise(Workload(sessions=1, contexts={32_000: 1.0}, disaggregated=True), CAPACITY)
    assert [c.name for c in advice.criteria if c.met] == ["disaggregated prefill/decode"]
    assert advice.tiers == ("T1", "T3")
    assert advice.posture == "eager"
    assert advice.reasons[0].startswith("T3: required, prefill and decode are disaggregated")
    assert "posture eager: prefill and decode are disaggregated" in advice.reasons[-1]


def test_any_one_criterion_brings_t3_and_none_leaves_t1() -> None:
    one = advise(Workload(sessions=1, contexts={32_000: 1.0}, mean_idle_s=120), CAPACITY)
    assert one.tiers == ("T1", "T3")
    assert any("(long idle time)" in r for r in one.reasons)
    none = advise(Workload(sessions=1, contexts={32_000: 1.0}), CAPACITY)
    assert none.tiers == ("T1",)
    assert "T3 not needed: none of the article's 6 criteria holds" in none.reasons


def test_long_idle_sessions_are_exported_to_s3() -> None:
    advice = advise(
        Workload(sessions=30, contexts={128_000: 1.0}, mean_idle_s=900, shared_prefix=0.4),
        CAPACITY,
    )
    assert advice.tiers == ("T1", "T2", "T3", "T4")


def test_pooled_hbm_larger_than_dram_skips_t2() -> None:
    ultraserver = Capacity(
        session_bytes={128_000: 40 * GB},
        nodes=1,
        t1_pressure_bytes_per_node=15_000 * GB,
        t2_bytes_per_node=0,
        hbm_kv_space_bytes_per_node=17_600 * GB,
    )
    advice = advise(Workload(sessions=500, contexts={128_000: 1.0}, peak_to_mean=4), ultraserver)
    assert advice.tiers == ("T1", "T3")
    assert any("T2 skipped" in r for r in advice.reasons)


def test_working_set_is_weighted_by_the_context_mix() -> None:
    advice = advise(Workload(sessions=10, contexts={32_000: 0.75, 128_000: 0.25}), CAPACITY)
    assert advice.working_set_bytes == 10 * (0.75 * 10 + 0.25 * 40) * GB


def test_t2_that_stores_one_copy_of_a_replicated_latent_holds_that_many_more_sessions() -> None:
    """2.6 TB of peak HBM bytes over 0.8 TB of HBM and 1.6 TB of DRAM needs T3, unless T2
    saves one copy of what HBM keeps on each of 8 ranks (an MLA latent under vLLM's offload)."""
    w = Workload(sessions=260, contexts={32_000: 1.0})
    assert any("exceeds T1 + T2" in r for r in advise(w, CAPACITY).reasons)
    latent = Capacity(**{**CAPACITY.__dict__, "t2_divisor": 8})
    fits = advise(w, latent)  # T3 still, for the working-set criterion, not for room
    assert fits.tiers == ("T1", "T2", "T3")
    assert not any("exceeds T1 + T2" in r for r in fits.reasons)


def test_advise_agrees_with_its_placement_for_an_mla_model() -> None:
    """DeepSeek-R1 on 4 x p5en, 400 sessions of 8K and 128K: placement fits them in T1 + T2
    (T2 holds one copy of each latent), so advise must not ask for T3 for room."""
    from kvtool.inputs.hardware import resolve_hardware
    from kvtool.inputs.shape import resolve_shape
    from kvtool.plan.advise import advise_workload

    w = _Workload(model="deepseek-r1", hardware="p5en", nodes=4, sessions=400,
                  contexts={8_000: 0.5, 131_072: 0.5})  # fmt: skip
    result = advise_workload(w, resolve_shape("deepseek-r1"), resolve_hardware("p5en", nodes=4))
    assert result.placed is not None
    placed = {t.name: t.sessions for t in result.placed.tiers.tiers}
    assert placed["T3"] == placed["T4"] == 0
    assert "T2" in result.advice.tiers
    assert not any("exceeds T1 + T2" in r for r in result.advice.reasons)
