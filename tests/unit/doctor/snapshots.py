"""Doctor snapshots built from the recorded real outputs in tests/fixtures/probe/.

A snapshot is the folder ``kvtool doctor --capture`` writes (docs/doctor.md lists the keys).
``healthy`` lays out an FSx for Lustre PERSISTENT_2 + EFA + GDS node from the real wsi-cloud
captures (mount, lfs df, lctl tunables, modprobe block, lnetctl -v, nvidia-fs stats, AWS's GDS
cufile.json, gdscheck 1.13). What no sample holds is constructed here, in the tools' documented
formats, and marked so below: the CPU and memory counts of the wsi-cloud client (a
g6e.24xlarge: 96 vCPUs, 768 GiB), a folder laid out with ``lfs setstripe -c -1``, the
counter deltas of a 64 MiB probe, and the EC2 describe responses. The broken variants each
change one thing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from kvtool.plan.folder_rules import FolderFacts

PROBE = Path(__file__).parents[2] / "fixtures" / "probe"
KV_PATH = "/mnt/lustre/kvcache"
PROBE_MIB = 64


def sample(name: str) -> str:
    return (PROBE / name).read_text()


def _lnet_after(before: str, *, efa_each: int, tcp: int) -> str:
    """The -v sample after a probe: each efa NI's send_count up by ``efa_each``, tcp by ``tcp``
    (constructed: real counters move like this, lnet_efa_vs_tcp_send_count_transport_proof)."""
    out, net = [], ""
    for line in before.splitlines():
        stripped = line.strip()
        if stripped.startswith("- net type:"):
            net = stripped.split(":")[1].strip()
        if stripped.startswith("send_count:"):
            value = int(stripped.split(":")[1]) + {"efa": efa_each, "tcp": tcp}.get(net, 0)
            line = line[: line.index("send_count:")] + f"send_count: {value}"
        out.append(line)
    return "\n".join(out) + "\n"


def _nvfs_after(before: str, mib: int) -> str:
    """The idle nvidia-fs sample after a ``mib`` MiB direct read (constructed)."""
    return before.replace(
        "Reads\t\t\t\t: n=0 ok=0 err=0 readMiB=0",
        f"Reads\t\t\t\t: n={mib} ok={mib} err=0 readMiB={mib}",
    ).replace("Ops\t\t\t\t: Read=0", f"Ops\t\t\t\t: Read={mib}")


def healthy(folder: Path) -> Path:
    """A node that passes: Lustre with flock, striped folder, EFA carrying the probe, GDS direct."""
    folder.mkdir(parents=True, exist_ok=True)
    lnet_before = sample("lnetctl_net_show_v_fsx_efa_2nis.txt")
    nvfs_idle = sample("proc_driver_nvidia-fs_stats_idle_ver4.txt")
    texts = {
        "hostname": "node-a\n",
        "proc_mounts": sample("proc_mounts_fsx_lustre_efa_client_al2023.txt"),
        "proc_modules": sample("lsmod_lustre_efa_nvidia_fs_excerpt.txt") + "nvidia_fs 262144 0\n",
        "modprobe_conf": sample("etc_modprobe_d_modprobe_conf_aws_efa_block.txt"),
        "proc_meminfo": "MemTotal:       805306368 kB\n",
        "proc_cpuinfo": "".join(f"processor\t: {i}\n\n" for i in range(96)),
        "lfs_getstripe": "stripe_count:  -1 stripe_size:   1048576 pattern:       raid0"
        " stripe_offset: -1\n",
        "lfs_df": sample("lfs_df_h_fsx_persistent2_efa_4mdt_6ost.txt"),
        "lfs_df_i": sample("lfs_df_ih_fsx_persistent2_efa_4mdt_6ost.txt"),
        "lctl_tunables": sample("lctl_get_param_fsx_tunables_applied_aws_recommended.txt"),
        "lctl_ost_state": "".join(
            f"osc.krvlrbev-OST000{i}-osc-ffff8a0c24d60000.ost_server_uuid="
            f"krvlrbev-OST000{i}_UUID\tFULL\n"
            for i in range(6)
        ),
        "lnet_before": lnet_before,
        "lnet_after": _lnet_after(lnet_before, efa_each=PROBE_MIB // 2, tcp=2),
        "fi_info": sample("fi_info_p_efa_newer_fabric_efa_rdmap_domain.txt"),
        "lnet_stats": sample("lnetctl_stats_show_fsx_client.txt"),
        "nvidia_smi": "".join(
            f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d})\n" for i in range(8)
        ),
        "cufile_json": sample("cufile_json_fsx_lustre_gds_aws_sample.json"),
        "gdscheck": sample("gdscheck_p_v1.13_h100x8_nvme_nfs_supported.txt"),
        "nvidia_fs_stats": nvfs_idle,
        "imds_az_id": "apne2-az1\n",
        "imds_region": "ap-northeast-2\n",
        "imds_instance_type": "g6e.24xlarge\n",
    }
    for key, text in texts.items():
        (folder / f"{key}.txt").write_text(text)
    dra = json.loads(sample("CONSTRUCTED_boto3_fsx_describe_data_repository_associations.json"))
    dra["Associations"][0]["S3"]["AutoExportPolicy"]["Events"] = []
    documents: dict[str, dict[str, Any]] = {
        "path": {
            "path": KV_PATH,
            "exists": True,
            "is_dir": True,
            "writable": True,
            "realpath": KV_PATH,
            "entries": 1200,
            "files": 363_707_808,
            "files_free": 363_706_392,
        },
        "odirect": {
            "ok": True,
            "errno": None,
            "error": "",
            "bytes": PROBE_MIB * 2**20,
            "write_s": 0.05,
            "read_s": 0.04,
        },
        "cufile_read": {
            "ran": True,
            "rc": 0,
            "nvfs_before": nvfs_idle,
            "nvfs_after": _nvfs_after(nvfs_idle, PROBE_MIB),
        },
        "aws_fsx": json.loads(
            sample("CONSTRUCTED_boto3_fsx_describe_file_systems_lustre_persistent2_efa.json")
        ),
        "aws_dra": dra,
        "aws_subnet": {
            "Subnets": [
                {
                    "SubnetId": "subnet-0abc1234def567890",
                    "AvailabilityZone": "ap-northeast-2a",
                    "AvailabilityZoneId": "apne2-az1",
                }
            ]
        },
        "aws_enis": {
            "NetworkInterfaces": [
                {"NetworkInterfaceId": "eni-0aaa1111bbb222333", "Groups": [{"GroupId": "sg-0f5a"}]}
            ]
        },
        # what doctor/folder.py records of the folder: LMCache's files of Llama 3.1 70B at tp 8
        "folder_contents": FolderFacts(
            path=KV_PATH,
            chunk_files=8_000,
            chunk_bytes=8_000 * 80 * 2**20 // 8,
            engines=("LMCache",),
            layouts=1,
            model="meta-llama/Llama-3.1-70B",
            world=8,
            busiest_files=8_000,
            folders=1,
        )._asdict(),
        "aws_security_groups": {
            "SecurityGroups": [
                {
                    "GroupId": "sg-0f5a",
                    "IpPermissions": [
                        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": "sg-0f5a"}]}
                    ],
                }
            ]
        },
    }
    for key, data in documents.items():
        (folder / f"{key}.json").write_text(json.dumps(data, indent=1))
    return folder


def variant(base: Path, folder: Path, **changes: str | dict[str, Any] | None) -> Path:
    """A copy of ``base`` with some keys replaced (text or JSON) or removed (None)."""
    shutil.copytree(base, folder)
    for key, value in changes.items():
        for suffix in (".txt", ".json"):
            (folder / f"{key}{suffix}").unlink(missing_ok=True)
        if isinstance(value, str):
            (folder / f"{key}.txt").write_text(value)
        elif isinstance(value, dict):
            (folder / f"{key}.json").write_text(json.dumps(value))
    return folder


def broken(kind: str, base: Path, folder: Path) -> Path:
    """One broken node: ``tcp`` (EFA up, traffic on TCP), ``compat`` (GDS in compat mode),
    ``one_stripe`` (the FSx default PFL), ``no_flock``, ``other_az``."""
    if kind == "tcp":
        before = sample("lnetctl_net_show_v_fsx_efa_2nis.txt")
        return variant(base, folder, lnet_after=_lnet_after(before, efa_each=0, tcp=PROBE_MIB))
    if kind == "compat":
        idle = sample("proc_driver_nvidia-fs_stats_idle_ver4.txt")
        return variant(
            base,
            folder,
            cufile_json=sample("cufile_json_minimal_allow_compat_mode.json"),
            cufile_read={"ran": True, "rc": 0, "nvfs_before": idle, "nvfs_after": idle},
        )
    if kind == "one_stripe":
        return variant(
            base,
            folder,
            lfs_getstripe=sample("lfs_getstripe_d_fsx_root_default_pfl_4component.txt"),
        )
    if kind == "no_flock":
        mounts = sample("proc_mounts_fsx_lustre_efa_client_al2023.txt").replace(",flock", "")
        return variant(base, folder, proc_mounts=mounts)
    if kind == "other_az":
        return variant(base, folder, imds_az_id="apne2-az3\n")
    raise ValueError(kind)
