"""Measurements as records and JSON: the issue's field names, percentiles, reading back."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.bench.result import BenchResult, Latency, percentile, results_from_json, skipped

ISSUE_FIELDS = {
    "tier", "op", "block_bytes", "threads", "direct", "tool", "bytes_per_s", "iops",
    "latency_us", "status", "spec_bytes_per_s",
}  # fmt: skip


@given(
    st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=200),
    st.sampled_from([0, 50, 99, 99.9, 100]),
)
def test_percentile_matches_numpy_linear(values: list[float], q: float) -> None:
    assert np.isclose(percentile(values, q), np.percentile(values, q), rtol=1e-9, atol=1e-9)


def test_json_has_the_issue_fields_and_reads_back() -> None:
    result = BenchResult(
        tier="t3",
        op="seq_read",
        status="ok",
        tool="fio-3.33",
        block_bytes=2**20,
        threads=32,
        direct=True,
        clients=2,
        bytes_per_s=5e9,
        iops=4768.4,
        latency_us=Latency(5800, 9100, 12000),
        spec_bytes_per_s=1e10,
        filesystem="lustre",
    )
    data = result.to_json()
    assert set(data) >= ISSUE_FIELDS
    assert data["latency_us"] == {"p50": 5800, "p99": 9100, "p999": 12000}
    assert data["ratio"] == 0.5
    (back,) = results_from_json(json.loads(json.dumps({"results": [data]})))
    assert back == result


def test_a_skip_carries_its_reason_and_no_number() -> None:
    data = skipped("t1", "d2d", "no CUDA device").to_json()
    assert data["status"] == "skip"
    assert data["reason"] == "no CUDA device"
    assert data["bytes_per_s"] is None
    assert data["ratio"] is None


def test_objects_that_are_not_measurements_are_ignored() -> None:
    assert results_from_json({"results": [{"tier": "t3"}, "x", {"op": "get"}]}) == []
    assert results_from_json({}) == []


def test_a_gpu_row_names_its_gpu_in_json_and_reads_back() -> None:
    from kvtool.bench.result import GpuId, PcieLink

    gpu = GpuId(2, "NVIDIA H200", "GPU-1234", "0000:38:00.0", 0, PcieLink(4, 16), PcieLink(5, 16))
    result = BenchResult(tier="t2", op="h2d", status="ok", bytes_per_s=5e10, gpu=gpu, gpus=8)
    data = json.loads(json.dumps({"results": [result.to_json()]}))
    assert data["results"][0]["gpu"] == {
        "device": 2, "name": "NVIDIA H200", "uuid": "GPU-1234", "pci": "0000:38:00.0",
        "numa_node": 0, "link_now": {"gen": 4, "width": 16}, "link_max": {"gen": 5, "width": 16},
    }  # fmt: skip
    assert results_from_json(data) == [result]
    assert gpu.downtrained
    assert PcieLink(5, 16).bytes_per_s == pytest.approx(63.015e9, rel=1e-4)
    assert PcieLink(6, 16).bytes_per_s == pytest.approx(121.0e9)
    assert PcieLink(3, 16).bytes_per_s == pytest.approx(15.754e9, rel=1e-4)
    assert str(gpu) == "GPU 2 NVIDIA H200 (PCI 0000:38:00.0, NUMA 0, PCIe Gen4 x16 (max Gen5 x16))"
    assert str(GpuId(3, "")) == "GPU 3"  # known by its index alone


@pytest.mark.parametrize(
    ("gpu", "message"),
    [
        ("GPU 0", "results[0].gpu must be an object or null"),
        ({"device": -1, "name": "x"}, "results[0].gpu.device must be a whole number >= 0"),
        ({"device": 0, "numa_node": "0"}, "results[0].gpu.numa_node must be a whole number"),
        ({"device": 0, "link_max": {"gen": 7, "width": 16}}, "results[0].gpu.link_max must be"),
        ({"device": 0, "link_now": {"gen": 5, "width": True}}, "results[0].gpu.link_now must be"),
    ],
)
def test_a_bad_gpu_field_is_named(gpu: object, message: str) -> None:
    data = {"results": [{"tier": "t2", "op": "h2d", "gpu": gpu}]}
    with pytest.raises(ValueError, match=re.escape(message)):
        results_from_json(data)
