"""A node type, its shared tiers and the overrides, as typed, into one ``Hardware``; and the
reload-vs-recompute assumptions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvtool.errors import InputError
from kvtool.inputs.plan_settings import flag
from kvtool.plan.deployment import Hardware, make_hardware
from kvtool.plan.placement import GPU_MEMORY_UTILIZATION
from kvtool.plan.reload import (
    DEFAULT_CONCURRENT_LOADS,
    DEFAULT_MFU,
    DEFAULT_T3_RELOAD_FROM_TOKENS,
    ReloadAssumptions,
    parse_t3_path,
)
from kvtool.plan.workload import MAX_IDLE_S
from kvtool.profiles.load import load_node_profile, load_storage_profile
from kvtool.units import parse_bytes, parse_count, parse_duration, parse_fraction

if TYPE_CHECKING:
    from kvtool.profiles.hardware import NodeProfile, StorageProfile

DEFAULT_T3 = "fsx-lustre-persistent2"
DEFAULT_T4 = "s3-standard"


def resolve_hardware(
    node: str,
    *,
    nodes: str | int | None = None,
    t3_path: str | None = None,
    t3: str | None = None,
    t4: str | None = None,
    fsx_capacity: str | None = None,
    fsx_throughput: str | None = None,
    gpu_memory_utilization: str | None = None,
    bench: str | None = None,
    metadata_iops: str | None = None,
) -> Hardware:
    """Load the node and storage profiles, parse the FSx settings (``metadata_iops``: --set
    metadata_iops), and with ``bench`` (a ``kvtool bench --json`` file) put its measured
    bandwidths in place of the spec."""
    throughput = None
    if fsx_throughput is not None:
        try:
            throughput = int(fsx_throughput)
        except ValueError:
            raise InputError(
                f"--fsx-throughput {fsx_throughput!r} is not an FSx option",
                "give the MB/s per TiB, e.g. 1000",
            ) from None
    count = (
        nodes
        if isinstance(nodes, int)
        else parse_count("1" if nodes is None else nodes, what="--nodes")
    )
    hardware = make_hardware(
        load_node_profile(node),
        load_storage_profile(DEFAULT_T3 if t3 is None else t3),
        load_storage_profile(DEFAULT_T4 if t4 is None else t4),
        nodes=count,
        t3_path=parse_t3_path("efa" if t3_path is None else t3_path),
        fsx_capacity_bytes=None
        if fsx_capacity is None
        else parse_bytes(fsx_capacity, what="--fsx-capacity"),
        fsx_throughput_mbps_per_tib=throughput,
        gpu_memory_utilization=GPU_MEMORY_UTILIZATION
        if gpu_memory_utilization is None
        else parse_fraction(gpu_memory_utilization, what="--gpu-memory-utilization"),
        gpu_memory_utilization_given=gpu_memory_utilization is not None,
        metadata_iops=None
        if metadata_iops is None
        else parse_count(metadata_iops, what="--set metadata_iops"),
    )
    if bench is not None:
        from dataclasses import replace
        from pathlib import Path

        from kvtool.inputs.evidence import read_bench

        measured = read_bench(Path(bench)).measured(chips=hardware.node.chips)
        if not measured:
            raise InputError(
                f"--bench {bench} has no measurement a plan can use",
                "it needs a T3 read, a pinned T2 h2d or a T4 get that ran (kvtool bench --json)",
            )
        hardware = replace(hardware, measured=measured)
    return hardware


def resolve_spec_profiles(
    node: str | None, *, t3: str | None, t4: str | None, t3_path: str | None
) -> tuple[NodeProfile | None, StorageProfile | None, StorageProfile | None, str]:
    """The profiles a measurement is set beside (``kvtool bench --hardware``): none without a
    node, and then a storage option is a mistake."""
    if node is None:
        for name, value in (("--t3-storage", t3), ("--t4-storage", t4), ("--t3-path", t3_path)):
            if value is not None:
                raise InputError(
                    f"{name} needs --hardware NODE", "add --hardware (kvtool hardware)"
                )
        return None, None, None, "efa"
    hardware = resolve_hardware(node, t3_path=t3_path, t3=t3, t4=t4)
    return hardware.node, hardware.t3, hardware.t4, hardware.t3_path


def resolve_assumptions(
    *,
    mfu: str | None = None,
    concurrent_loads: str | None = None,
    restore_slo: str | None = None,
    reload_from: str | None = None,
    settings: Mapping[str, str] | None = None,
) -> ReloadAssumptions:
    """The reload-vs-recompute assumptions and what a T3 that kvtool sizes must reach,
    defaults filled in."""
    slo = None if restore_slo is None else parse_duration(restore_slo, what="--set restore_slo")
    if slo is not None and not 0 < slo < 86_400:
        raise InputError(f"--set restore_slo={restore_slo} is not a restore time", "e.g. 500ms")
    return ReloadAssumptions(
        mfu=DEFAULT_MFU if mfu is None else parse_fraction(mfu, what="--mfu"),
        concurrent_loads=DEFAULT_CONCURRENT_LOADS
        if concurrent_loads is None
        else parse_count(concurrent_loads, what="--concurrent-loads"),
        restore_slo_s=slo,
        t3_reload_from_tokens=DEFAULT_T3_RELOAD_FROM_TOKENS
        if reload_from is None
        else parse_count(reload_from, what="--set reload_from"),
        **model_settings(settings or {}),
    )


def model_settings(settings: Mapping[str, str]) -> dict[str, Any]:
    """The storage and reload model's ``--set`` keys (``plan_settings.MODEL_KEYS``) as
    ReloadAssumptions fields, each checked; absent keys keep the defaults."""
    out: dict[str, Any] = {}
    if "fp8_attention" in settings:
        out["fp8_attention"] = flag(dict(settings), "fp8_attention")
    for key in ("chunk_tokens", "io_threads", "s3_connections", "s3_prefixes",
                "s3_lookups_at_once"):  # fmt: skip
        if key in settings:
            out[key] = parse_count(settings[key], what=f"--set {key}")
    for key in ("mean_idle", "release_after"):
        if key in settings:
            seconds = parse_duration(settings[key], what=f"--set {key}")
            if not 0 < seconds <= MAX_IDLE_S:
                raise InputError(f"--set {key}={settings[key]} is not an idle time", "e.g. 30m")
            out[f"{key}_s"] = seconds
    if "lookup_timeout" in settings:
        # LMCache's lookup_timeout_ms, a whole number of ms that zmq takes as a C int
        timeout = parse_duration(settings["lookup_timeout"], what="--set lookup_timeout")
        if not 1e-3 <= timeout <= (2**31 - 1) / 1e3:
            raise InputError(
                f"--set lookup_timeout={settings['lookup_timeout']} is not a lookup timeout",
                "from 1ms to 24d, e.g. 3s (LMCache's lookup_timeout_ms, 3000 by default)",
            )
        out["lookup_timeout_s"] = round(timeout * 1e3) / 1e3
    if "s3_lookups" in settings:
        text = settings["s3_lookups"].strip()
        out["s3_lookups"] = 0 if text == "0" else parse_count(text, what="--set s3_lookups")
    return out
