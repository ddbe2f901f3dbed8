"""Gather a node's facts for ``kvtool doctor PATH`` through a ``Host``, in a fixed order:
mount and client state first, then LNet and nvidia-fs counters around the O_DIRECT and cuFile
probes (so a counter that moves proves which path carried the bytes), then instance metadata
and the AWS describe calls. Every observation has the key docs/doctor.md lists.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

from kvtool.probe import parse
from kvtool.probe.facts import AwsFacts, GdsFacts, LustreFacts, NetFacts, NodeFacts
from kvtool.probe.host import Host

# The client tunings AWS recommends, read back in one call (shared/reference/
# fsx-lustre-gds-facts.md 2.4, from the FSx performance tips).
LCTL_TUNABLES = (
    "ldlm.namespaces.*.lru_max_age",
    "ldlm.namespaces.*.lru_size",
    "osc.*.max_rpcs_in_flight",
    "mdc.*.max_rpcs_in_flight",
    "mdc.*.max_mod_rpcs_in_flight",
)


class GatherOptions(NamedTuple):
    """What to observe: the probe size (64 MiB moves LNet counters by about 64 RPCs), whether
    to write at all, whether to try GDS and AWS, and the FSx file system id if known."""

    probe_mib: int = 64
    write_probe: bool = True
    gds: bool = True
    aws: bool = True
    file_system_id: str | None = None


def gather(host: Host, path: str, options: GatherOptions | None = None) -> NodeFacts:
    """Observe ``path`` and this node. Never raises for what is missing: absent facts are None."""
    options = options or GatherOptions()
    info = host.path_info("path", path)
    real = str(info.get("realpath") or path)
    mounts_text = host.read("proc_mounts", "/proc/self/mounts")
    mount = parse.mount_for(real, parse.parse_proc_mounts(mounts_text)) if mounts_text else None
    modules_text = host.read("proc_modules", "/proc/modules")
    modprobe_text = host.read("modprobe_conf", "/etc/modprobe.d/modprobe.conf")
    meminfo = host.read("proc_meminfo", "/proc/meminfo")
    cpuinfo = host.read("proc_cpuinfo", "/proc/cpuinfo")

    lustre = LustreFacts(None, None, None, None, None)
    is_lustre = mount is not None and mount.fstype == "lustre"
    if is_lustre:
        lustre = LustreFacts(
            layout=_parsed(
                host.run("lfs_getstripe", ["lfs", "getstripe", "-d", real]),
                parse.parse_lfs_getstripe_dir,
            ),
            targets=_parsed(host.run("lfs_df", ["lfs", "df", real]), parse.parse_lfs_df),
            inodes=_parsed(host.run("lfs_df_i", ["lfs", "df", "-i", real]), parse.parse_lfs_df),
            tunables=_parsed(
                host.run("lctl_tunables", ["lctl", "get_param", *LCTL_TUNABLES]),
                parse.parse_lctl_params,
            ),
            ost_connections=_parsed(
                host.run("lctl_ost_state", ["lctl", "get_param", "osc.*.ost_server_uuid"]),
                parse.parse_ost_server_uuid,
            ),
        )
    lnet_cmd = ["lnetctl", "net", "show", "-v"]
    nis_before = _parsed(host.run("lnet_before", lnet_cmd), parse.parse_lnetctl_net_show)
    odirect = None
    writable = bool(info.get("is_dir") and info.get("writable"))
    if options.write_probe and (writable or info.get("captured") is False):
        odirect = host.odirect_probe("odirect", real, options.probe_mib)
        if odirect.get("captured") is False:
            odirect = None
    nis_after = _parsed(host.run("lnet_after", lnet_cmd), parse.parse_lnetctl_net_show)
    stats = _parsed(host.run("lnet_stats", ["lnetctl", "stats", "show"]), parse.parse_lnetctl_stats)
    fi = host.run("fi_info", ["fi_info", "-p", "efa"])
    efa_provider = None if fi.returncode == 127 else (fi.ok and "provider: efa" in fi.stdout)

    gds = (
        _gds(host, real, options)
        if options.gds
        else GdsFacts(None, None, None, None, "", None, None)
    )
    aws = (
        _aws(host, mount, options)
        if options.aws
        else AwsFacts(False, None, None, None, None, None, None, None, {})
    )
    return NodeFacts(
        path=path,
        path_info=info,
        mount=mount,
        modules=parse.parse_lsmod(modules_text) if modules_text else None,
        modprobe=parse.parse_modprobe_options(modprobe_text) if modprobe_text is not None else None,
        cpus=parse.parse_cpu_count(cpuinfo) if cpuinfo else None,
        memory_gib=parse.parse_meminfo_gib(meminfo) if meminfo else None,
        lustre=lustre,
        net=NetFacts(nis_before, nis_after, efa_provider, stats),
        odirect=odirect,
        gds=gds,
        aws=aws,
    )


def _parsed(result: Any, parser: Any) -> Any:
    return parser(result.stdout) if result.ok else None


def _gds(host: Host, directory: str, options: GatherOptions) -> GdsFacts:
    smi = host.run("nvidia_smi", ["nvidia-smi", "-L"])
    gpus = (
        None
        if smi.returncode == 127
        else sum(line.startswith("GPU ") for line in smi.stdout.splitlines())
    )
    cufile_path = os.environ.get("CUFILE_ENV_PATH_JSON") or "/etc/cufile.json"
    cufile_text = host.read("cufile_json", cufile_path)
    check = host.run("gdscheck", ["gdscheck", "-p"])
    if check.returncode == 127:
        check = host.run("gdscheck", ["/usr/local/cuda/gds/tools/gdscheck", "-p"])
    stats = host.read("nvidia_fs_stats", "/proc/driver/nvidia-fs/stats")
    probe = None
    if gpus and options.write_probe:
        probe = host.cufile_read_probe("cufile_read", directory, options.probe_mib)
    before = after = parse.parse_nvidia_fs_stats(stats) if stats else None
    if probe and probe.get("ran"):
        before = parse.parse_nvidia_fs_stats(probe.get("nvfs_before") or "")
        after = parse.parse_nvidia_fs_stats(probe.get("nvfs_after") or "")
    return GdsFacts(
        gpus=gpus,
        nvfs_before=before,
        nvfs_after=after,
        cufile=parse.parse_cufile_json(cufile_text) if cufile_text else None,
        cufile_path=cufile_path,
        gdscheck=parse.parse_gdscheck(check.stdout) if check.ok else None,
        cufile_read=probe,
    )


def _aws(host: Host, mount: parse.Mount | None, options: GatherOptions) -> AwsFacts:
    errors: dict[str, str] = {}
    az_id = host.imds("imds_az_id", "placement/availability-zone-id")
    instance_type = host.imds("imds_instance_type", "instance-type")
    region = (
        host.imds("imds_region", "placement/region")
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
    )
    if az_id is None:
        errors["imds"] = "no instance metadata (not on EC2, IMDS disabled, or hop limit 1)"
    if region is None:  # no API call can go anywhere: say why, not botocore's NoRegionError
        errors["fsx"] = (
            "not on EC2 (no instance metadata) and no AWS_REGION set"
            if az_id is None
            else "no region: IMDS gave none and AWS_REGION is not set"
        )
        return AwsFacts(
            asked=True,
            availability_zone_id=az_id,
            instance_type=instance_type,
            region=None,
            file_system=None,
            associations=None,
            subnet_az_id=None,
            security_groups=None,
            errors=errors,
        )
    mount_name = parse.lustre_mount_name(mount.source) if mount else None
    params: dict[str, Any] = {"_region": region}
    if options.file_system_id:
        params["FileSystemIds"] = [options.file_system_id]
    response = host.aws("aws_fsx", "fsx", "describe_file_systems", params)
    file_system = None
    if "error" in response:
        errors["fsx"] = str(response["error"])
    else:
        for candidate in response.get("FileSystems", []):
            if candidate.get("FileSystemType", "LUSTRE") != "LUSTRE":
                continue  # Windows, ONTAP and OpenZFS file systems have no mount name
            lustre = candidate.get("LustreConfiguration") or {}
            by_id = (
                options.file_system_id and candidate.get("FileSystemId") == options.file_system_id
            )
            by_name = mount_name is not None and lustre.get("MountName") == mount_name
            if by_id or by_name:
                file_system = candidate
                break
        wanted = options.file_system_id
        if file_system is not None and wanted and file_system.get("FileSystemId") != wanted:
            errors["fsx"] = (
                f"--fsx-id {wanted} is not the file system mounted here"
                f" ({file_system.get('FileSystemId')}, mount name {mount_name!r})"
            )
            file_system = None
        elif file_system is None:
            errors["fsx"] = (
                f"no FSx for Lustre file system with mount name {mount_name!r} in"
                f" {region or 'the default region'}"
            )
    associations = subnet_az = groups = None
    if file_system:
        fs_id = file_system["FileSystemId"]
        dra = host.aws(
            "aws_dra",
            "fsx",
            "describe_data_repository_associations",
            {"_region": region, "Filters": [{"Name": "file-system-id", "Values": [fs_id]}]},
        )
        associations = None if "error" in dra else list(dra.get("Associations", []))
        if "error" in dra:
            errors["dra"] = str(dra["error"])
        subnets = file_system.get("SubnetIds") or []
        if subnets:
            sub = host.aws(
                "aws_subnet",
                "ec2",
                "describe_subnets",
                {"_region": region, "SubnetIds": subnets[:1]},
            )
            found = sub.get("Subnets") or []
            subnet_az = found[0].get("AvailabilityZoneId") if found else None
            if "error" in sub:
                errors["subnet"] = str(sub["error"])
        enis = file_system.get("NetworkInterfaceIds") or []
        if enis:
            nic = host.aws(
                "aws_enis",
                "ec2",
                "describe_network_interfaces",
                {"_region": region, "NetworkInterfaceIds": enis[:1]},
            )
            group_ids = sorted(
                {
                    g["GroupId"]
                    for n in nic.get("NetworkInterfaces", [])
                    for g in n.get("Groups", [])
                }
            )
            if group_ids:
                sg = host.aws(
                    "aws_security_groups",
                    "ec2",
                    "describe_security_groups",
                    {"_region": region, "GroupIds": group_ids},
                )
                groups = None if "error" in sg else list(sg.get("SecurityGroups", []))
                if "error" in sg:
                    errors["security_groups"] = str(sg["error"])
            if "error" in nic:
                errors["security_groups"] = str(nic["error"])
    return AwsFacts(
        asked=True,
        availability_zone_id=az_id,
        instance_type=instance_type,
        region=region,
        file_system=json.loads(json.dumps(file_system)) if file_system else None,
        associations=associations,
        subnet_az_id=subnet_az,
        security_groups=groups,
        errors=errors,
    )
