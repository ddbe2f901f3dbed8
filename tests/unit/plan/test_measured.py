"""Measured tier bandwidths in place of the spec (``kvtool size --bench``): only the tiers
measured change, the description says what was replaced, and one node's T3 measurement is
capped at its share of the file system."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.plan.measured import MeasuredTier, apply_measured
from kvtool.plan.reload import ReloadAssumptions, TierPath, tier_paths
from kvtool.profiles.load import load_node_profile, load_storage_profile

# One p5en reading T2, T3 (PERSISTENT_2 over EFA) and T4 (S3 Standard) at the profiles' spec:
# T2 = min(8 chips x 63 GB/s PCIe Gen5 = 504 GB/s, DRAM 614.4 GB/s) = 504 GB/s;
# T3 = min(700 Gbps EFA client ceiling x 1 instance, 3,200 Gbps NIC) = 87.5 GB/s;
# T4 = ENA 100 Gbps = 12.5 GB/s (S3's per-connection rate and request rate are request terms,
# plan/requests.py).
SPEC = tier_paths(
    load_node_profile("p5en"),
    load_storage_profile("fsx-lustre-persistent2"),
    load_storage_profile("s3-standard"),
    t3_path="efa",
    a=ReloadAssumptions(),
    fsx_bytes_per_s_per_node=None,
)
# examples/check/bench-t3.json: fio seq_read, 1 MiB blocks, 32 threads, O_DIRECT: 5.6 GB/s
BENCH_T3 = MeasuredTier(
    "T3", 5.6e9, "kvtool bench: fio 3.33 seq_read, 1.00 MiB blocks, 32 threads, O_DIRECT"
)
# 48,000 GiB at 1,000 MB/s/TiB over 8 nodes: 46.875 TiB x 1,000 MB/s / 8 = 5.859375 GB/s
SHARE_8_NODES = 48_000 / 1024 * 1000e6 / 8


def by_tier(paths: list[TierPath]) -> dict[str, TierPath]:
    return {p.tier: p for p in paths}


def test_the_spec_paths_are_the_profiles_ceilings() -> None:
    spec = by_tier(SPEC)
    assert spec["T2"].node_bytes_per_s == pytest.approx(504e9)
    assert spec["T3"].node_bytes_per_s == pytest.approx(87.5e9)
    assert spec["T4"].node_bytes_per_s == pytest.approx(12.5e9)
    assert {p.bandwidth_source for p in SPEC} == {"spec"}


def test_a_t3_measurement_replaces_only_t3_and_names_the_spec_it_replaced() -> None:
    out = apply_measured(SPEC, [BENCH_T3], t3_share_bytes_per_s=SHARE_8_NODES)
    assert [p.tier for p in out] == ["T2", "T3", "T4"]
    assert out[0] is SPEC[0]
    assert out[2] is SPEC[2]
    t3 = out[1]
    assert t3.node_bytes_per_s == 5.6e9  # below the 5.86 GB/s share: not capped
    assert t3.bandwidth_source == "measured"
    assert t3.description == (
        "measured 5.60 GB/s (kvtool bench: fio 3.33 seq_read, 1.00 MiB blocks, 32 threads,"
        " O_DIRECT) in place of the spec 87.50 GB/s; first-byte latency the spec's (no latency"
        " measured)"
    )


def test_latency_chunk_cost_and_threads_stay_the_profiles() -> None:
    (t3,) = [p for p in apply_measured(SPEC, [BENCH_T3]) if p.tier == "T3"]
    spec = by_tier(SPEC)["T3"]
    assert (t3.latency_s, t3.op_s, t3.io_threads, t3.bytes_divisor) == (
        spec.latency_s,
        spec.op_s,
        spec.io_threads,
        spec.bytes_divisor,
    )
    assert t3.latency_s == pytest.approx(300e-6)  # the profile's 300 us, not fio's latency


def test_a_measured_first_byte_latency_replaces_the_spec_and_says_so() -> None:
    """A bench that measured latencies gives the path its first byte (and the per-chunk
    operation, one open-and-read per file), named with how it was estimated."""
    timed = MeasuredTier("T3", 5.6e9, "fio", 0.0012, "fio rand_read median 1.5 ms at 64 KiB")
    (t3,) = [p for p in apply_measured(SPEC, [timed]) if p.tier == "T3"]
    assert (t3.latency_s, t3.op_s) == (0.0012, 0.0012)
    assert t3.io_threads == by_tier(SPEC)["T3"].io_threads
    assert t3.description.endswith(
        "; first byte 1.2 ms measured (fio rand_read median 1.5 ms at 64 KiB) in place of the"
        " spec 0.3 ms"
    )
    (t2,) = [p for p in apply_measured(SPEC, [MeasuredTier("T2", 4e11, "h2d", 1e-5, "x")])
             if p.tier == "T2"]  # fmt: skip
    assert (t2.latency_s, t2.op_s) == (1e-5, 0.0)  # T2 has no per-chunk operation


def test_one_nodes_t3_reading_above_its_file_system_share_is_capped_and_says_why() -> None:
    out = apply_measured(
        SPEC, [MeasuredTier("T3", 20e9, "fio")], t3_share_bytes_per_s=SHARE_8_NODES
    )
    t3 = by_tier(out)["T3"]
    assert t3.node_bytes_per_s == SHARE_8_NODES
    assert t3.description == (
        "measured 20.00 GB/s (fio) in place of the spec 87.50 GB/s, capped at this node's"
        " file-system share 5.86 GB/s (one node's measurement cannot see the others' load)"
        "; first-byte latency the spec's (no latency measured)"
    )


@pytest.mark.parametrize("share", [None, 0.0, 20e9])
def test_no_cap_without_a_share_or_when_the_share_is_not_lower(share: float | None) -> None:
    out = apply_measured(SPEC, [MeasuredTier("T3", 20e9, "fio")], t3_share_bytes_per_s=share)
    t3 = by_tier(out)["T3"]
    assert t3.node_bytes_per_s == 20e9
    assert "capped" not in t3.description


def test_only_t3_is_capped_by_the_file_system_share() -> None:
    measured = [MeasuredTier("T2", 416e9, "pinned h2d x 8"), MeasuredTier("T4", 2e9, "boto3 GET")]
    out = by_tier(apply_measured(SPEC, measured, t3_share_bytes_per_s=1e9))
    assert (out["T2"].node_bytes_per_s, out["T4"].node_bytes_per_s) == (416e9, 2e9)
    assert out["T3"] is by_tier(SPEC)["T3"]
    assert out["T4"].description == (
        "measured 2.00 GB/s (boto3 GET) in place of the spec 12.50 GB/s; first-byte latency the"
        " spec's (no latency measured)"
    )


def test_tier_names_are_matched_case_insensitively_and_unknown_tiers_are_ignored() -> None:
    out = apply_measured(SPEC, [MeasuredTier("t3", 5.6e9, "fio"), MeasuredTier("T1", 1e12, "x")])
    assert [p.bandwidth_source for p in out] == ["spec", "measured", "spec"]
    assert len(out) == len(SPEC)


def test_no_measurements_leave_the_paths_as_they_are() -> None:
    out = apply_measured(SPEC, [])
    assert out == SPEC
    assert out is not SPEC  # a new list; the caller's is not touched


@given(
    measured=st.floats(1e6, 1e12, allow_nan=False),
    share=st.one_of(st.none(), st.floats(1e6, 1e12, allow_nan=False)),
    tier=st.sampled_from(["T2", "T3", "T4"]),
)
def test_the_bandwidth_used_is_the_measurement_capped_only_for_t3(
    measured: float, share: float | None, tier: str
) -> None:
    out = by_tier(
        apply_measured(SPEC, [MeasuredTier(tier, measured, "m")], t3_share_bytes_per_s=share)
    )
    capped = tier == "T3" and share is not None and share < measured
    assert out[tier].node_bytes_per_s == (share if capped else measured)
    assert out[tier].bandwidth_source == "measured"
    assert ("capped" in out[tier].description) is capped
    others = [t for t in ("T2", "T3", "T4") if t != tier]
    assert all(out[t] == by_tier(SPEC)[t] for t in others)
