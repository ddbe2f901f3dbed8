"""What the doctor knows about a node and its shared folder: plain records, no behaviour.

Built by ``kvtool.probe.gather`` through a ``Host``; read by the pure checks in
``kvtool.doctor.checks``. ``None`` always means "not observed" (the tool is missing, the file
was not captured, AWS was not asked), which the checks report as SKIP, never as PASS.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kvtool.probe.parse import (
    GdsCheck,
    LnetNi,
    Mount,
    NvfsStats,
    OstConnection,
    StripeComponent,
    Target,
)


class LustreFacts(NamedTuple):
    """What ``lfs`` and ``lctl`` say about the folder and the client."""

    layout: list[StripeComponent] | None
    targets: list[Target] | None
    inodes: list[Target] | None
    tunables: dict[str, str] | None
    ost_connections: list[OstConnection] | None


class NetFacts(NamedTuple):
    """LNet interfaces before and after the O_DIRECT probe, and whether libfabric sees EFA."""

    nis_before: list[LnetNi] | None
    nis_after: list[LnetNi] | None
    efa_provider: bool | None
    lnet_stats: dict[str, int] | None = None


class GdsFacts(NamedTuple):
    """The GPUDirect Storage stack: GPUs, nvidia-fs counters around a cuFile read, cufile.json,
    ``gdscheck -p``."""

    gpus: int | None
    nvfs_before: NvfsStats | None
    nvfs_after: NvfsStats | None
    cufile: dict[str, Any] | None
    cufile_path: str
    gdscheck: GdsCheck | None
    cufile_read: dict[str, Any] | None


class AwsFacts(NamedTuple):
    """This instance (IMDS) and the file system (FSx and EC2 describe calls); ``errors`` says
    why a call gave nothing (no credentials, unreachable, not captured)."""

    asked: bool
    availability_zone_id: str | None
    instance_type: str | None
    region: str | None
    file_system: dict[str, Any] | None
    associations: list[dict[str, Any]] | None
    subnet_az_id: str | None
    security_groups: list[dict[str, Any]] | None
    errors: dict[str, str]


class NodeFacts(NamedTuple):
    """Everything observed for one ``kvtool doctor PATH`` run."""

    path: str
    path_info: dict[str, Any]
    mount: Mount | None
    modules: set[str] | None
    modprobe: dict[str, str] | None
    cpus: int | None
    memory_gib: float | None
    lustre: LustreFacts
    net: NetFacts
    odirect: dict[str, Any] | None
    gds: GdsFacts
    aws: AwsFacts
