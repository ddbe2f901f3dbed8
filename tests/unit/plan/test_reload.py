"""Reload vs recompute: the brief's rule of thumb must come out of the model, not be coded in."""

from __future__ import annotations

import pytest

from kvtool.plan.reload import (
    ReloadAssumptions,
    crossover_tokens,
    prefill_flops,
    reload_seconds,
    tier_paths,
)
from kvtool.profiles.load import load_node_profile, load_storage_profile

from .conftest import model, session_bytes

P5EN = load_node_profile("p5en")
FSX = load_storage_profile("fsx")
S3 = load_storage_profile("s3")


def crossovers(name: str, **assume: object) -> dict[str, int | None]:
    spec, params = model(name)
    a = ReloadAssumptions(**assume)  # type: ignore[arg-type]
    paths = tier_paths(P5EN, FSX, S3, t3_path=a.t3_path, fsx_bytes_per_s_per_node=None)
    return {
        p.tier: crossover_tokens(spec, params.active, P5EN, p, lambda n: session_bytes(spec, n), a)
        for p in paths
    }


def test_llama_70b_on_p5en_typical_settings_match_the_brief() -> None:
    """16 restores in flight over EFA, 40% MFU: reload from T3 wins between 10K and 50K
    tokens, T2 wins almost at once, and S3 loses until far beyond any context in use."""
    result = crossovers("llama-3.1-70b")
    assert result["T2"] is not None
    assert result["T2"] < 100
    assert result["T3"] is not None
    assert 10_000 < result["T3"] < 50_000
    assert result["T4"] is None or result["T4"] > 500_000


def test_more_bandwidth_moves_the_crossover_down() -> None:
    slow = crossovers("llama-3.1-70b", t3_path="ena")["T3"]
    fast = crossovers("llama-3.1-70b", t3_path="efa_gds")["T3"]
    assert slow is not None
    assert fast is not None
    assert fast < slow


def test_fewer_concurrent_loads_make_t3_win_sooner() -> None:
    busy = crossovers("llama-3.1-70b", concurrent_loads=64)["T3"]
    quiet = crossovers("llama-3.1-70b", concurrent_loads=1)["T3"]
    assert quiet is not None
    assert busy is not None
    assert quiet < busy


def test_prefill_flops_worked_number() -> None:
    spec, params = model("llama-3.1-70b")
    flops = prefill_flops(spec, params.active, 100_000)
    assert flops == pytest.approx(2 * params.active * 1e5 + 80 * 64 * 256 * 1e10, rel=1e-9)


def test_sliding_window_attention_stays_linear() -> None:
    spec, params = model("gpt-oss-120b")
    ratio = prefill_flops(spec, params.active, 200_000) / prefill_flops(
        spec, params.active, 100_000
    )
    assert 2.0 < ratio < 4.0  # the full layers are quadratic, the sliding ones are not


def test_reload_time_is_latency_plus_shared_bandwidth() -> None:
    paths = tier_paths(P5EN, FSX, S3, t3_path="efa", fsx_bytes_per_s_per_node=None)
    t3 = next(p for p in paths if p.tier == "T3")
    assert t3.node_bytes_per_s == 700e9 / 8
    seconds = reload_seconds(t3, 10**9, ReloadAssumptions(concurrent_loads=4))
    assert seconds == pytest.approx(300e-6 + 4e9 / 87.5e9)


def test_fsx_share_caps_the_t3_path() -> None:
    paths = tier_paths(P5EN, FSX, S3, t3_path="efa_gds", fsx_bytes_per_s_per_node=5e9)
    assert next(p for p in paths if p.tier == "T3").node_bytes_per_s == 5e9


def test_gds_path_falls_back_to_efa_without_gds() -> None:
    trn2 = load_node_profile("trn2")
    paths = tier_paths(trn2, FSX, S3, t3_path="efa_gds", fsx_bytes_per_s_per_node=None)
    assert next(p for p in paths if p.tier == "T3").node_bytes_per_s == 700e9 / 8


def test_file_system_without_efa_falls_back_to_tcp() -> None:
    scratch = load_storage_profile("fsx-scratch2")
    paths = tier_paths(P5EN, scratch, S3, t3_path="efa_gds", fsx_bytes_per_s_per_node=None)
    assert next(p for p in paths if p.tier == "T3").node_bytes_per_s == 100e9 / 8
