"""Measured bandwidths in place of the spec: which measurement, per node, and the plan's use."""

from __future__ import annotations

import pytest

from kvtool.bench.measured import capacity_t3, measured_tiers
from kvtool.bench.result import BenchResult, skipped
from kvtool.plan.measured import MeasuredTier, apply_measured
from kvtool.plan.reload import TierPath


def _ok(tier: str, op: str, bps: float, **fields: object) -> BenchResult:
    return BenchResult(tier=tier, op=op, status="ok", bytes_per_s=bps, **fields)  # type: ignore[arg-type]


def test_t3_takes_the_best_read_per_node() -> None:
    results = [
        _ok("t3", "seq_write", 9e9),
        _ok("t3", "seq_read", 4e9, clients=1),
        _ok("t3", "rand_read", 10e9, clients=4),  # 2.5 GB/s per node
    ]
    (t3,) = measured_tiers(results, chips=8)
    assert t3.tier == "T3"
    assert t3.bytes_per_s == 4e9
    assert "seq_read" in t3.source


def test_an_aggregate_over_nodes_is_divided_by_them() -> None:
    (t3,) = measured_tiers([_ok("t3", "seq_read", 12e9, clients=3)], chips=8)
    assert t3.bytes_per_s == 4e9
    assert "3 nodes' aggregate / 3" in t3.source


def test_t2_uses_pinned_h2d_times_chips_as_an_estimate_and_never_a_host_copy() -> None:
    results = [
        _ok("t2", "h2d", 50e9, variant="pinned"),
        _ok("t2", "h2d", 54e9, variant="pinned"),
        _ok("t2", "h2d", 20e9, variant="pageable"),
        _ok("t2", "copy", 9e9, variant="host-only"),
    ]
    (t2,) = measured_tiers(results, chips=8)
    assert t2.bytes_per_s == 52e9 * 8
    assert "estimate" in t2.source
    assert measured_tiers([_ok("t2", "copy", 9e9, variant="host-only")], chips=8) == ()


def test_skips_and_writes_are_never_used() -> None:
    results = [skipped("t3", "seq_read", "no --path"), _ok("t3", "seq_write", 9e9)]
    assert measured_tiers(results, chips=8) == ()


def test_a_folder_that_is_not_lustre_says_so() -> None:
    (t3,) = measured_tiers([_ok("t3", "seq_read", 1e9, filesystem="ext4")], chips=8)
    assert "on ext4, not Lustre" in t3.source


PATHS = [
    TierPath("T2", "host DRAM", 5e-6, 400e9),
    TierPath("T3", "fsx", 300e-6, 9e9, op_s=300e-6, io_threads=32),
    TierPath("T4", "s3", 0.1, 5e9),
]


def test_apply_measured_replaces_only_the_measured_tier_and_says_so() -> None:
    out = apply_measured(PATHS, [MeasuredTier("T4", 2e9, "kvtool bench: boto3 GET")])
    assert [p.node_bytes_per_s for p in out] == [400e9, 9e9, 2e9]
    assert out[2].bandwidth_source == "measured"
    assert "in place of the spec 5.00 GB/s" in out[2].description
    assert out[0] == PATHS[0]
    assert out[2].latency_s == PATHS[2].latency_s  # latency stays the profile's


def test_one_nodes_t3_measurement_is_capped_at_its_file_system_share() -> None:
    out = apply_measured(PATHS, [MeasuredTier("T3", 20e9, "fio")], t3_share_bytes_per_s=6e9)
    assert out[1].node_bytes_per_s == 6e9
    assert "capped at this node's file-system share" in out[1].description


DIRECT = "fio libcufile...; direct (GPUDirect): nvidia-fs readMiB +9,000 of 9,000 MiB read"
COMPAT_NOTE = "fio libcufile...; compat mode: no read went through nvidia-fs (...)"


def test_only_a_direct_gds_aggregate_or_a_posix_read_stands_for_t3() -> None:
    posix = _ok("t3", "seq_read", 3e9)
    never = [
        _ok("t3", "seq_read", 50e9, variant="gds-compat", note=COMPAT_NOTE),
        _ok("t3", "seq_read", 40e9, variant="gds", note=COMPAT_NOTE),  # a file from before
        _ok("t3", "seq_read", 30e9, variant="gds", note="...; unknown: nvidia-fs IO stats off"),
        _ok("t3", "seq_read", 20e9, variant="gds-gpu", note=DIRECT),
        _ok("t3", "seq_read", 20e9, variant="gds-compat-gpu", note=COMPAT_NOTE),
    ]
    (t3,) = measured_tiers([posix, *never], chips=8)
    assert t3.bytes_per_s == 3e9
    baseline = _ok("t3", "seq_read", 4e9, variant="posix-baseline")
    direct = _ok("t3", "seq_read", 9e9, variant="gds", note=DIRECT)
    (t3,) = measured_tiers([posix, baseline, *never], chips=8)
    assert t3.bytes_per_s == 4e9
    (t3,) = measured_tiers([posix, baseline, direct, *never], chips=8)
    assert t3.bytes_per_s == 9e9
    assert "(GDS)" in t3.source


def test_the_first_byte_is_the_smallest_blocks_median_less_its_transfer() -> None:
    from kvtool.bench.result import Latency

    def timed(block: int, threads: int, bps: float, p50_us: float) -> BenchResult:
        return _ok("t3", "rand_read", bps, block_bytes=block, threads=threads,
                   latency_us=Latency(p50_us, p50_us * 2, p50_us * 3))  # fmt: skip

    results = [
        timed(2**20, 32, 5.6e9, 5_800),  # 1 MiB: the transfer is the whole latency
        timed(65_536, 1, 40e6, 1_900),  # 64 KiB at 40 MB/s: 1.638 ms of it is the transfer
    ]
    (t3,) = measured_tiers(results, chips=8)
    assert t3.latency_s is not None
    assert round(t3.latency_s, 9) == round(1.9e-3 - 65_536 / 40e6, 9)
    assert "median 1.9 ms at 0.06 MiB less its transfer at 0.04 GB/s a thread" in t3.latency_source
    # a real recording (examples/check/bench-t3.json): at 1 MiB and 32 threads the transfer
    # (5.99 ms a request) is all of fio's 5.8 ms median: no first byte, the spec's stays
    import json
    from pathlib import Path

    from kvtool.bench.result import results_from_json

    data = json.loads((Path(__file__).parents[3] / "examples/check/bench-t3.json").read_text())
    (real,) = measured_tiers(results_from_json(data), chips=8)
    assert real.latency_s is None


def test_reads_made_one_at_a_time_are_the_first_byte_as_measured() -> None:
    """``bench --tier t3`` reads 4 KiB and 64 KiB one at a time in every run: the smaller's
    median is the first-byte latency (subtracting a transfer at its own rate would leave
    nothing), and its bandwidth never stands for T3's."""
    from kvtool.bench.result import Latency

    big = _ok("t3", "seq_read", 5.6e9, block_bytes=2**20, threads=32,
              latency_us=Latency(5_800, 9_000, 12_000))  # fmt: skip
    four = _ok("t3", "rand_read", 70e6, block_bytes=4096, threads=1, variant="qd1",
               latency_us=Latency(240, 600, 900))  # fmt: skip
    sixty_four = four._replace(block_bytes=65_536, latency_us=Latency(400, 800, 990))
    (t3,) = measured_tiers([big, sixty_four, four], chips=8)
    assert t3.bytes_per_s == 5.6e9
    assert t3.latency_s == pytest.approx(240e-6)
    assert t3.latency_source.endswith("one at a time, median at 4 KiB")


def _capacity(*levels: tuple[int, float, int], fleet: int = 0) -> dict[str, object]:
    """A capacity --json report's fields that the plan reads: (sessions, bytes/s, restores)."""
    return {
        "capacity": {"levels": [{"sessions": n, "bytes_per_s": bps, "restores": r,
                                 "restore_p95_s": 0.25 * n} for n, bps, r in levels]},
        "workload": {"file_bytes": 8 << 20, "restore_parallel": 8, "direct": True,
                     "fleet_nodes": fleet},
    }  # fmt: skip


def test_capacity_takes_the_level_that_read_fastest() -> None:
    t3 = capacity_t3(_capacity((1, 0.8e9, 30), (4, 1.1e9, 30), (16, 0.9e9, 40)))
    assert (t3.tier, t3.bytes_per_s, t3.latency_s) == ("T3", 1.1e9, None)
    assert t3.source == (
        "kvtool capacity: 4 sessions restoring at once, 8 chunk files of 8.00 MiB at a time"
        " each, O_DIRECT; p95 restore 1,000 ms"
    )
    fleet = capacity_t3(_capacity((2, 0.5e9, 9), fleet=3))
    assert "while 3 more node(s) loaded T3 alike" in fleet.source


@pytest.mark.parametrize(
    ("report", "why"),
    [
        ({}, "no capacity and workload"),
        ({"capacity": {"levels": "x"}, "workload": {}}, "levels is not a list"),
        (_capacity((1, 0.0, 0)), "no level restored"),
        ({"capacity": {"levels": [{"sessions": 1, "bytes_per_s": "9e9"}]}, "workload": {}},
         r"levels\[0\] has no bytes_per_s"),
        ({"capacity": {"levels": [{"sessions": 1, "bytes_per_s": 1e9, "restores": 3}]},
          "workload": {"file_bytes": None}}, "no file_bytes"),
    ],
)  # fmt: skip
def test_a_capacity_report_the_plan_cannot_use_is_a_value_error(
    report: dict[str, object], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        capacity_t3(report)
