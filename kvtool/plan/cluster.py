"""The cluster a plan is made for: the node, how many, the file system and object store it
reaches, and the client path to them (``Hardware``, built by ``make_hardware``). Pure: the
profiles arrive loaded."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvtool.errors import InputError
from kvtool.plan.fsx import FileSystem, file_system
from kvtool.plan.measured import MeasuredTier
from kvtool.plan.metadata import check_iops
from kvtool.plan.placement import (
    GPU_MEMORY_UTILIZATION,
)
from kvtool.plan.reload import (
    parse_t3_path,
    t3_client_gbps,
)
from kvtool.profiles.hardware import NodeProfile, StorageProfile


@dataclass(frozen=True)
class Hardware:
    """The cluster a plan is for: nodes, the shared tiers behind them, and the client path
    (``ena``, ``efa`` or ``efa_gds``) the nodes use to reach T3."""

    node: NodeProfile
    nodes: int
    t3: StorageProfile
    t4: StorageProfile
    t3_path: str = "efa"
    fsx_capacity_bytes: int | None = None
    fsx_throughput_mbps_per_tib: int | None = None
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    measured: tuple[MeasuredTier, ...] = ()  # kvtool bench figures that replace the spec
    # one engine instance's KV pool in tokens as the engine's metrics report it (kvtool plan
    # --calibrate): the plan's T1 space, in place of kvtool's estimate; None: the estimate
    kv_pool_tokens_per_instance: int | None = None
    # one engine instance's host tier in bytes as its metrics report it (vLLM's
    # kv_offloading_size, --calibrate): the plan's T2, in place of host memory x 80%
    host_pool_bytes_per_instance: int | None = None
    # nodes one engine spans (pipeline stages across nodes, ``over_nodes``): ``node`` is then
    # that many nodes as one, and ``nodes`` counts such groups
    engine_nodes: int = 1
    # the engine's KV share is of the memory left after the weights and reserves
    # (TensorRT-LLM's free_gpu_memory_fraction, set by ``engine_pool``), not of all HBM
    pool_of_free: bool = False
    gpu_memory_utilization_given: bool = False  # --gpu-memory-utilization was typed
    # the file system's Metadata IOPS as given (--set metadata_iops, USER_PROVISIONED); None:
    # AUTOMATIC, or what kvtool sizes for the plan's restores (plan/metadata.py)
    metadata_iops: int | None = None

    @property
    def efa_file_system(self) -> bool:
        """An EFA path means an EFA-enabled file system (with EFA's capacity steps)."""
        return (
            self.t3_path in ("efa", "efa_gds")
            and self.t3.client_efa_gbps > 0
            and self.node.efa_gbps > 0
        )

    def file_system(self, need_bytes: int = 0) -> FileSystem:
        """The T3 file system: ``--fsx-capacity`` checked against FSx's sizes, or the smallest
        valid size holding ``need_bytes`` (marked assumed)."""
        return file_system(
            self.t3,
            capacity_bytes=self.fsx_capacity_bytes,
            throughput_mbps_per_tib=self.fsx_throughput_mbps_per_tib,
            efa=self.efa_file_system,
            need_bytes=need_bytes,
        )


def make_hardware(
    node: NodeProfile,
    t3: StorageProfile,
    t4: StorageProfile,
    *,
    nodes: int = 1,
    t3_path: str = "efa",
    fsx_capacity_bytes: int | None = None,
    fsx_throughput_mbps_per_tib: int | None = None,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    measured: tuple[MeasuredTier, ...] = (),
    gpu_memory_utilization_given: bool = False,
    metadata_iops: int | None = None,
) -> Hardware:
    """A validated Hardware: T3 and T4 profiles of the right tier, an FSx throughput option
    the T3 offers, a capacity FSx can provision, Metadata IOPS it can provision. Raises
    InputError naming the option at fault (for a capacity, with the nearest valid sizes)."""
    for profile, tier, option in ((t3, "t3", "--t3-storage"), (t4, "t4", "--t4-storage")):
        if profile.tier != tier:
            raise InputError(
                f"{option} {profile.name!r} is a {profile.tier.upper()} profile",
                "kvtool hardware lists the storage profiles and their tiers",
            )
    if nodes < 1:
        raise InputError(f"--nodes must be at least 1, got {nodes}")
    throughput = fsx_throughput_mbps_per_tib  # checked with the capacity (plan/fsx.py)
    t3_path = parse_t3_path(t3_path)
    hardware = Hardware(
        node=node,
        nodes=nodes,
        t3=t3,
        t4=t4,
        t3_path=t3_path,
        fsx_capacity_bytes=fsx_capacity_bytes,
        fsx_throughput_mbps_per_tib=throughput,
        gpu_memory_utilization=gpu_memory_utilization,
        gpu_memory_utilization_given=gpu_memory_utilization_given,
        measured=measured,
        metadata_iops=metadata_iops,
    )
    if metadata_iops is not None:
        wrong = check_iops(t3, metadata_iops)
        if wrong:
            raise InputError(f"--set metadata_iops {metadata_iops:,} cannot be provisioned", wrong)
    hardware.file_system()  # raises for a throughput or capacity FSx cannot provision
    return hardware


def over_nodes(hardware: Hardware, span: int) -> Hardware:
    """``hardware`` with each engine over ``span`` nodes, its pipeline stages on different
    nodes (vLLM's ``--pipeline-parallel-size`` across nodes, tensor parallel within each): the
    ``span`` nodes are planned as one node of ``span`` times their chips, host memory and
    links (as a UltraServer's instances are), and ``nodes`` counts such groups. Each node
    then holds its stages' share of the weights and of every session's KV. InputError where
    ``nodes`` is not a whole number of groups."""
    if span == 1:
        return hardware
    node = hardware.node
    if hardware.nodes % span:
        raise InputError(
            f"--nodes {hardware.nodes} is not a whole number of engines over {span} nodes"
            f" (--tp x --pp = {span} x {node.chips} accelerators)",
            f"give --nodes a multiple of {span}",
        )
    group = replace(
        node,
        name=f"{span} x {node.name}",
        chips=node.chips * span,
        host_memory_gib=node.host_memory_gib * span,
        host_memory_gbytes_per_s=node.host_memory_gbytes_per_s * span,
        ena_gbps=node.ena_gbps * span,
        efa_gbps=node.efa_gbps * span,
        instances=node.instances * span,
    )
    return replace(hardware, node=group, nodes=hardware.nodes // span, engine_nodes=span)


def client_path(hardware: Hardware) -> str:
    """The path the nodes really take to T3: the one asked for when the node and the file
    system both offer it, else the best they do (no EFA on PERSISTENT_1 or SCRATCH, no GDS on
    Trainium)."""
    return t3_client_gbps(hardware.node, hardware.t3, hardware.t3_path)[0]


def uses_gds(hardware: Hardware) -> bool:
    """The nodes read T3 over EFA with GPUDirect Storage (the path they really take)."""
    return client_path(hardware) == "efa_gds" and hardware.node.gds
