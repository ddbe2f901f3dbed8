"""Turn the tier-plan options, as typed, into the library's inputs (profiles loaded, numbers
parsed), each mistake one ``InputError`` line. Shared by the commands that plan."""

from __future__ import annotations

from kvtool.errors import InputError
from kvtool.plan.deployment import Hardware, make_hardware
from kvtool.plan.placement import GPU_MEMORY_UTILIZATION
from kvtool.plan.reload import DEFAULT_CONCURRENT_LOADS, DEFAULT_MFU, ReloadAssumptions
from kvtool.profiles.load import load_node_profile, load_storage_profile
from kvtool.units import parse_bytes, parse_count, parse_fraction

T3_PATHS = {"ena": "ena", "tcp": "ena", "efa": "efa", "efa-gds": "efa_gds", "gds": "efa_gds"}


def hardware_from_options(
    node: str,
    *,
    nodes: str | None,
    t3_path: str | None,
    t3: str | None,
    t4: str | None,
    fsx_capacity: str | None,
    fsx_throughput: str | None,
    gpu_memory_utilization: str | None,
) -> Hardware:
    """Load the node and storage profiles and parse the FSx settings."""
    throughput = None
    if fsx_throughput is not None:
        try:
            throughput = int(fsx_throughput)
        except ValueError:
            raise InputError(
                f"--fsx-throughput {fsx_throughput!r} is not an FSx option",
                "give the MB/s per TiB, e.g. 1000",
            ) from None
    path = T3_PATHS.get((t3_path or "efa").strip().lower())
    if path is None:
        raise InputError(f"unknown --t3-path {t3_path!r}", "choose ena, efa or efa-gds")
    return make_hardware(
        load_node_profile(node),
        load_storage_profile(t3 or "fsx-lustre-persistent2"),
        load_storage_profile(t4 or "s3-standard"),
        nodes=1 if nodes is None else parse_count(nodes, what="--nodes"),
        t3_path=path,
        fsx_capacity_bytes=None
        if fsx_capacity is None
        else parse_bytes(fsx_capacity, what="--fsx-capacity"),
        fsx_throughput_mbps_per_tib=throughput,
        gpu_memory_utilization=GPU_MEMORY_UTILIZATION
        if gpu_memory_utilization is None
        else parse_fraction(gpu_memory_utilization, what="--gpu-memory-utilization"),
    )


def measured_from_file(path: str, hardware: Hardware) -> Hardware:
    """``hardware`` with the bandwidths measured in a ``kvtool bench --json`` file in place of
    the spec; InputError when the file holds none a plan can use."""
    from dataclasses import replace
    from pathlib import Path

    from kvtool.bench.measured import measured_tiers
    from kvtool.bench.result import results_from_json
    from kvtool.files import read_json_object

    data = read_json_object(Path(path), what="kvtool bench --json report")
    measured = measured_tiers(results_from_json(data), chips=hardware.node.chips)
    if not measured:
        raise InputError(
            f"--bench {path} has no measurement a plan can use",
            "it needs a T3 read, a pinned T2 h2d or a T4 get that ran (kvtool bench --json)",
        )
    return replace(hardware, measured=measured)


def reload_assumptions(*, mfu: str | None, concurrent_loads: str | None) -> ReloadAssumptions:
    """The reload-vs-recompute assumptions, defaults filled in."""
    return ReloadAssumptions(
        mfu=DEFAULT_MFU if mfu is None else parse_fraction(mfu, what="--mfu"),
        concurrent_loads=DEFAULT_CONCURRENT_LOADS
        if concurrent_loads is None
        else parse_count(concurrent_loads, what="--concurrent-loads"),
    )
