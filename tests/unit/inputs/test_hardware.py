"""The front door's hardware: a node type with its storage profiles, FSx settings and overrides
into one Hardware; a bench report's measurements in place of the spec; the reload
assumptions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.hardware import resolve_assumptions, resolve_hardware, resolve_spec_profiles
from kvtool.plan.reload import DEFAULT_CONCURRENT_LOADS, DEFAULT_MFU

EXAMPLES = Path(__file__).parents[3] / "examples" / "check"


def test_defaults_are_one_node_persistent2_s3_and_efa() -> None:
    hardware = resolve_hardware("p5en")
    assert hardware.node.name == "p5en.48xlarge"
    assert (hardware.nodes, hardware.t3.name, hardware.t4.name) == (
        1,
        "fsx-lustre-persistent2",
        "s3-standard",
    )
    assert hardware.t3_path == "efa"
    assert hardware.gpu_memory_utilization == 0.92  # vLLM 0.33.0's default
    assert hardware.measured == ()


def test_options_as_typed() -> None:
    hardware = resolve_hardware(
        "p5en",
        nodes="4",
        t3_path="efa-gds",
        fsx_capacity="48000GiB",
        fsx_throughput="1000",
        gpu_memory_utilization="0.85",
    )
    assert (hardware.nodes, hardware.t3_path) == (4, "efa_gds")
    assert hardware.fsx_capacity_bytes == 48_000 * 2**30
    assert hardware.fsx_throughput_mbps_per_tib == 1000
    assert hardware.gpu_memory_utilization == 0.85


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"t3_path": "nfs"}, "unknown --t3-path 'nfs'"),
        ({"fsx_throughput": "fast"}, "--fsx-throughput 'fast' is not an FSx option"),
        ({"fsx_throughput": "300"}, "--fsx-throughput 300 is not an FSx option"),
        ({"fsx_capacity": "48TiB"}, "cannot be provisioned"),
        ({"t3": "s3-standard"}, "--t3-storage 's3-standard' is a T4 profile"),
        ({"nodes": "0"}, "--nodes"),
    ],
)
def test_each_mistake_names_its_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        resolve_hardware("p5en", **options)  # type: ignore[arg-type]


def test_a_bench_report_replaces_the_spec(tmp_path: Path) -> None:
    hardware = resolve_hardware("p5en", bench=str(EXAMPLES / "bench-t3.json"))
    (t3,) = hardware.measured
    assert (t3.tier, t3.bytes_per_s) == ("T3", 5.6e9)
    empty = tmp_path / "bench.json"
    empty.write_text(json.dumps({"results": [{"tier": "t3", "op": "seq_read", "status": "skip"}]}))
    with pytest.raises(InputError, match="has no measurement a plan can use"):
        resolve_hardware("p5en", bench=str(empty))


def test_spec_profiles_need_a_node() -> None:
    assert resolve_spec_profiles(None, t3=None, t4=None, t3_path=None) == (None, None, None, "efa")
    with pytest.raises(InputError, match="--t3-storage needs --hardware"):
        resolve_spec_profiles(None, t3="fsx-lustre-persistent2", t4=None, t3_path=None)
    node, t3, t4, path = resolve_spec_profiles("p5en", t3=None, t4=None, t3_path="ena")
    assert node is not None
    assert t3 is not None
    assert t4 is not None
    assert (node.name, t3.tier, t4.tier, path) == ("p5en.48xlarge", "t3", "t4", "ena")


def test_assumptions_default_and_parse() -> None:
    default = resolve_assumptions()
    assert (default.mfu, default.concurrent_loads) == (DEFAULT_MFU, DEFAULT_CONCURRENT_LOADS)
    given = resolve_assumptions(mfu="0.5", concurrent_loads="4")
    assert (given.mfu, given.concurrent_loads) == (0.5, 4)
    with pytest.raises(InputError, match="--mfu"):
        resolve_assumptions(mfu="2")
