"""``gather`` through a snapshot of real captures (examples/doctor-snapshot, and variants of it
from tests/unit/doctor/snapshots.py): what it asks the host for, in which order and with which
arguments, and how each missing or failed observation becomes None or an error, never a guess."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kvtool.probe import parse
from kvtool.probe.facts import AwsFacts, GdsFacts
from kvtool.probe.gather import GatherOptions, gather
from kvtool.probe.host import CommandResult, SnapshotHost
from tests.unit.doctor.snapshots import KV_PATH, sample, variant

EXAMPLE = Path(__file__).parents[3] / "examples" / "doctor-snapshot"
FS_ID = "fs-0a0a63dea8324225b"


class Recording:
    """A ``SnapshotHost`` that notes every observation asked of it: (method, key, argument)."""

    def __init__(self, folder: Path) -> None:
        self.inner = SnapshotHost(folder)
        self.calls: list[tuple[str, str, Any]] = []

    @property
    def keys(self) -> list[str]:
        return [key for _, key, _ in self.calls]

    def asked(self, key: str) -> list[Any]:
        """The arguments of every call with ``key``."""
        return [arg for _, k, arg in self.calls if k == key]

    def read(self, key: str, path: str) -> str | None:
        self.calls.append(("read", key, path))
        return self.inner.read(key, path)

    def run(self, key: str, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        self.calls.append(("run", key, list(argv)))
        return self.inner.run(key, argv, timeout_s)

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        self.calls.append(("path_info", key, path))
        return self.inner.path_info(key, path)

    def odirect_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        self.calls.append(("odirect_probe", key, (directory, size_mib)))
        return self.inner.odirect_probe(key, directory, size_mib)

    def cufile_read_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        self.calls.append(("cufile_read_probe", key, (directory, size_mib)))
        return self.inner.cufile_read_probe(key, directory, size_mib)

    def imds(self, key: str, path: str) -> str | None:
        self.calls.append(("imds", key, path))
        return self.inner.imds(key, path)

    def aws(self, key: str, service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("aws", key, (service, operation, dict(params))))
        return self.inner.aws(key, service, operation, params)


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The region and cufile.json fallbacks read the environment: start from none."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "CUFILE_ENV_PATH_JSON"):
        monkeypatch.delenv(name, raising=False)


def example_variant(tmp_path: Path, **changes: str | dict[str, Any] | None) -> Path:
    return variant(EXAMPLE, tmp_path / "snapshot", **changes)


def test_the_example_snapshot_gives_every_fact() -> None:
    facts = gather(SnapshotHost(EXAMPLE), KV_PATH)
    assert facts.mount is not None
    assert (facts.mount.source, facts.mount.fstype) == ("10.1.1.154@tcp:/krvlrbev", "lustre")
    assert {"lustre", "lnet", "kefalnd", "nvidia_fs"} <= (facts.modules or set())
    assert facts.modprobe == {"ksocklnd.credits": "2560", "ptlrpc.ptlrpcd_per_cpt_max": "32"}
    assert (facts.cpus, facts.memory_gib) == (96, 768.0)
    lustre = facts.lustre
    assert [(c.stripe_count, c.stripe_size) for c in lustre.layout or []] == [(-1, 1_048_576)]
    assert [t.kind for t in lustre.targets or []].count("OST") == 6
    assert [t.kind for t in lustre.inodes or []].count("MDT") == 4
    assert set(parse.param_values(lustre.tunables or {}, "max_rpcs_in_flight", "osc.")) == {"32"}
    assert [c.state for c in lustre.ost_connections or []] == ["FULL"] * 6
    before = parse.sent_by_net(facts.net.nis_before or [])
    after = parse.sent_by_net(facts.net.nis_after or [])
    assert {net: after[net] - before[net] for net in before} == {"tcp": 2, "efa": 64}
    assert facts.net.efa_provider is True
    assert (facts.net.lnet_stats or {})["send_count"] == 868_981
    assert facts.odirect is not None
    assert (facts.odirect["ok"], facts.odirect["bytes"]) == (True, 64 * 2**20)
    gds = facts.gds
    assert gds.gpus == 8
    assert (gds.nvfs_before, gds.nvfs_after) == (
        parse.NvfsStats(True, 0, 0, 0),
        parse.NvfsStats(True, 64, 64, 64),
    )
    assert (gds.cufile or {})["properties"]["allow_compat_mode"] is False
    assert gds.cufile_path == "/etc/cufile.json"
    assert gds.gdscheck is not None
    assert (gds.gdscheck.verified, gds.gdscheck.gpus_supporting) == (True, 8)
    aws = facts.aws
    assert (aws.availability_zone_id, aws.instance_type, aws.region) == (
        "apne2-az1",
        "g6e.24xlarge",
        "ap-northeast-2",
    )
    assert (aws.file_system or {})["FileSystemId"] == FS_ID
    assert [a["AssociationId"] for a in aws.associations or []] == ["dra-0123456789abcdef0"]
    assert aws.subnet_az_id == "apne2-az1"
    assert [g["GroupId"] for g in aws.security_groups or []] == ["sg-0f5a"]
    assert aws.errors == {}


def test_observations_come_in_the_documented_order_around_the_probes() -> None:
    host = Recording(EXAMPLE)
    gather(host, KV_PATH)
    assert host.keys == [
        "path",
        "proc_mounts",
        "proc_modules",
        "modprobe_conf",
        "proc_meminfo",
        "proc_cpuinfo",
        "lfs_getstripe",
        "lfs_df",
        "lfs_df_i",
        "lctl_tunables",
        "lctl_ost_state",
        "lnet_before",
        "odirect",
        "lnet_after",
        "lnet_stats",
        "fi_info",
        "nvidia_smi",
        "cufile_json",
        "gdscheck",
        "nvidia_fs_stats",
        "cufile_read",
        "imds_az_id",
        "imds_instance_type",
        "imds_region",
        "aws_fsx",
        "aws_dra",
        "aws_subnet",
        "aws_enis",
        "aws_security_groups",
    ]


def test_lustre_commands_name_the_resolved_folder_and_the_aws_tunings(tmp_path: Path) -> None:
    info = json.loads((EXAMPLE / "path.json").read_text())
    folder = example_variant(tmp_path, path={**info, "realpath": "/mnt/lustre/real/kv"})
    host = Recording(folder)
    facts = gather(host, "/home/me/kv-link", GatherOptions(probe_mib=8))
    assert facts.path == "/home/me/kv-link"
    assert facts.mount is not None
    assert facts.mount.mountpoint == "/mnt/lustre"  # found from the real path, not the link
    assert host.asked("lfs_getstripe") == [["lfs", "getstripe", "-d", "/mnt/lustre/real/kv"]]
    assert host.asked("lfs_df_i") == [["lfs", "df", "-i", "/mnt/lustre/real/kv"]]
    assert host.asked("lctl_tunables") == [  # as docs/doctor.md tells a hand capture
        [
            "lctl",
            "get_param",
            "ldlm.namespaces.*.lru_max_age",
            "ldlm.namespaces.*.lru_size",
            "osc.*.max_rpcs_in_flight",
            "mdc.*.max_rpcs_in_flight",
            "mdc.*.max_mod_rpcs_in_flight",
        ]
    ]
    assert host.asked("odirect") == [("/mnt/lustre/real/kv", 8)]
    assert host.asked("cufile_read") == [("/mnt/lustre/real/kv", 8)]
    assert (
        host.asked("lnet_before") == host.asked("lnet_after") == [["lnetctl", "net", "show", "-v"]]
    )


def test_a_folder_off_lustre_asks_no_lfs_or_lctl(tmp_path: Path) -> None:
    folder = example_variant(tmp_path, proc_mounts="/dev/nvme0n1p1 / xfs rw,noatime 0 0\n")
    host = Recording(folder)
    facts = gather(host, KV_PATH)
    assert facts.mount is not None
    assert facts.mount.fstype == "xfs"
    assert tuple(facts.lustre) == (None, None, None, None, None)
    assert not [k for k in host.keys if k.startswith(("lfs_", "lctl_"))]
    assert facts.net.nis_before is not None  # LNet is still read: it says what the node has


def test_no_mount_table_means_no_mount_and_no_lustre(tmp_path: Path) -> None:
    facts = gather(SnapshotHost(example_variant(tmp_path, proc_mounts=None)), KV_PATH)
    assert facts.mount is None
    assert facts.lustre.layout is None


def test_without_write_probe_neither_probe_runs_and_stats_come_from_the_file() -> None:
    host = Recording(EXAMPLE)
    facts = gather(host, KV_PATH, GatherOptions(write_probe=False))
    assert "odirect" not in host.keys
    assert "cufile_read" not in host.keys
    assert facts.odirect is None
    assert facts.gds.cufile_read is None
    idle = parse.NvfsStats(True, 0, 0, 0)  # nvidia_fs_stats.txt: the idle real capture
    assert (facts.gds.nvfs_before, facts.gds.nvfs_after) == (idle, idle)


def test_a_folder_this_user_cannot_write_gets_no_odirect_probe(tmp_path: Path) -> None:
    info = json.loads((EXAMPLE / "path.json").read_text())
    host = Recording(example_variant(tmp_path, path={**info, "writable": False}))
    facts = gather(host, KV_PATH)
    assert "odirect" not in host.keys
    assert facts.odirect is None
    assert facts.path_info["writable"] is False


def test_an_uncaptured_path_still_replays_the_captured_probe(tmp_path: Path) -> None:
    facts = gather(SnapshotHost(example_variant(tmp_path, path=None)), KV_PATH)
    assert facts.path_info == {"path": KV_PATH, "captured": False}
    assert facts.odirect is not None
    assert facts.odirect["bytes"] == 64 * 2**20


def test_an_uncaptured_probe_is_none_not_a_failed_probe(tmp_path: Path) -> None:
    facts = gather(SnapshotHost(example_variant(tmp_path, path=None, odirect=None)), KV_PATH)
    assert facts.odirect is None


@pytest.mark.parametrize(
    ("fi_info", "error", "expected"),
    [
        (sample("fi_info_p_efa_newer_fabric_efa_rdmap_domain.txt"), None, True),
        (None, None, None),  # fi_info not installed: not observed
        (None, "rc=1\nfi_getinfo: -61 (No data available)\n", False),  # no EFA provider
        ("provider: tcp\n    fabric: 10.0.0.0/24\n", None, False),
    ],
)
def test_efa_provider_from_fi_info(
    tmp_path: Path, fi_info: str | None, error: str | None, expected: bool | None
) -> None:
    folder = example_variant(tmp_path, fi_info=fi_info)
    if error is not None:
        (folder / "fi_info.error.txt").write_text(error)
    assert gather(SnapshotHost(folder), KV_PATH).net.efa_provider is expected


def test_lnet_not_installed_leaves_both_sides_none(tmp_path: Path) -> None:
    folder = example_variant(tmp_path, lnet_before=None, lnet_after=None, lnet_stats=None)
    net = gather(SnapshotHost(folder), KV_PATH).net
    assert (net.nis_before, net.nis_after, net.lnet_stats) == (None, None, None)


def test_a_failed_lfs_df_is_none_not_an_empty_list(tmp_path: Path) -> None:
    folder = example_variant(tmp_path, lfs_df=None)
    (folder / "lfs_df.error.txt").write_text("rc=19\nlfs df: No such device\n")
    lustre = gather(SnapshotHost(folder), KV_PATH).lustre
    assert lustre.targets is None
    assert lustre.inodes is not None  # the -i call succeeded on its own


def test_gdscheck_not_on_path_is_tried_at_the_cuda_location(tmp_path: Path) -> None:
    host = Recording(example_variant(tmp_path, gdscheck=None))
    facts = gather(host, KV_PATH)
    assert host.asked("gdscheck") == [
        ["gdscheck", "-p"],
        ["/usr/local/cuda/gds/tools/gdscheck", "-p"],
    ]
    assert facts.gds.gdscheck is None


def test_gdscheck_that_ran_and_failed_is_not_retried(tmp_path: Path) -> None:
    folder = example_variant(tmp_path, gdscheck=None)
    (folder / "gdscheck.error.txt").write_text("rc=1\nfailed to load libcufile.so\n")
    host = Recording(folder)
    assert gather(host, KV_PATH).gds.gdscheck is None
    assert host.asked("gdscheck") == [["gdscheck", "-p"]]


def test_no_nvidia_smi_means_no_gpu_count_and_no_cufile_probe(tmp_path: Path) -> None:
    host = Recording(example_variant(tmp_path, nvidia_smi=None))
    gds = gather(host, KV_PATH).gds
    assert gds.gpus is None
    assert "cufile_read" not in host.keys
    assert gds.cufile_read is None


def test_a_failing_nvidia_smi_counts_zero_gpus_and_skips_the_probe(tmp_path: Path) -> None:
    folder = example_variant(tmp_path, nvidia_smi=None)
    (folder / "nvidia_smi.error.txt").write_text(
        "rc=9\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    )
    host = Recording(folder)
    assert gather(host, KV_PATH).gds.gpus == 0
    assert "cufile_read" not in host.keys


def test_a_cufile_probe_that_did_not_run_keeps_the_stats_files_counters(tmp_path: Path) -> None:
    not_run = {"ran": False, "reason": "gdsio (the GDS tools) is not installed"}
    gds = gather(SnapshotHost(example_variant(tmp_path, cufile_read=not_run)), KV_PATH).gds
    idle = parse.NvfsStats(True, 0, 0, 0)
    assert (gds.nvfs_before, gds.nvfs_after) == (idle, idle)
    assert gds.cufile_read == not_run


def test_cufile_json_is_read_where_cufile_env_path_json_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUFILE_ENV_PATH_JSON", "/opt/app/cufile.json")
    host = Recording(EXAMPLE)
    gds = gather(host, KV_PATH).gds
    assert host.asked("cufile_json") == ["/opt/app/cufile.json"]
    assert gds.cufile_path == "/opt/app/cufile.json"


def test_gds_off_asks_nothing_of_the_gpu_stack() -> None:
    host = Recording(EXAMPLE)
    gds = gather(host, KV_PATH, GatherOptions(gds=False)).gds
    assert gds == GdsFacts(None, None, None, None, "", None, None)
    gpu_keys = {"nvidia_smi", "cufile_json", "gdscheck", "nvidia_fs_stats", "cufile_read"}
    assert not gpu_keys & set(host.keys)


def test_aws_off_asks_no_metadata_and_no_api() -> None:
    host = Recording(EXAMPLE)
    aws = gather(host, KV_PATH, GatherOptions(aws=False)).aws
    assert aws == AwsFacts(False, None, None, None, None, None, None, None, {})
    assert not [k for k in host.keys if k.startswith(("imds_", "aws_"))]


def test_aws_calls_carry_the_region_and_the_file_systems_own_ids() -> None:
    host = Recording(EXAMPLE)
    gather(host, KV_PATH)
    region = {"_region": "ap-northeast-2"}
    assert host.asked("aws_fsx") == [("fsx", "describe_file_systems", region)]
    assert host.asked("aws_dra") == [
        (
            "fsx",
            "describe_data_repository_associations",
            {**region, "Filters": [{"Name": "file-system-id", "Values": [FS_ID]}]},
        )
    ]
    assert host.asked("aws_subnet") == [
        ("ec2", "describe_subnets", {**region, "SubnetIds": ["subnet-0abc1234def567890"]})
    ]
    assert host.asked("aws_enis") == [  # the first of the file system's three interfaces
        (
            "ec2",
            "describe_network_interfaces",
            {**region, "NetworkInterfaceIds": ["eni-0aaa1111bbb222333"]},
        )
    ]
    assert host.asked("aws_security_groups") == [
        ("ec2", "describe_security_groups", {**region, "GroupIds": ["sg-0f5a"]})
    ]
    assert host.asked("imds_az_id") == ["placement/availability-zone-id"]


def test_without_instance_metadata_the_region_comes_from_aws_region(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    folder = example_variant(tmp_path, imds_az_id=None, imds_region=None, imds_instance_type=None)
    host = Recording(folder)
    aws = gather(host, KV_PATH).aws
    assert (aws.availability_zone_id, aws.instance_type, aws.region) == (None, None, "us-west-2")
    assert aws.errors == {
        "imds": "no instance metadata (not on EC2, IMDS disabled, or hop limit 1)"
    }
    assert host.asked("aws_fsx") == [("fsx", "describe_file_systems", {"_region": "us-west-2"})]
    assert (aws.file_system or {})["FileSystemId"] == FS_ID  # still found by mount name


def test_an_fsx_error_is_reported_and_nothing_else_is_described(tmp_path: Path) -> None:
    error = {"error": "An error occurred (AccessDeniedException) when calling DescribeFileSystems"}
    host = Recording(example_variant(tmp_path, aws_fsx=error))
    aws = gather(host, KV_PATH).aws
    assert aws.file_system is None
    assert aws.errors == {"fsx": error["error"]}
    assert (aws.associations, aws.subnet_az_id, aws.security_groups) == (None, None, None)
    assert not {"aws_dra", "aws_subnet", "aws_enis", "aws_security_groups"} & set(host.keys)


def test_no_file_system_with_this_mount_name_names_it_and_the_region(tmp_path: Path) -> None:
    response = json.loads((EXAMPLE / "aws_fsx.json").read_text())
    response["FileSystems"][0]["LustreConfiguration"]["MountName"] = "zz9plural"
    aws = gather(SnapshotHost(example_variant(tmp_path, aws_fsx=response)), KV_PATH).aws
    assert aws.file_system is None
    assert aws.errors["fsx"] == (
        "no FSx for Lustre file system with mount name 'krvlrbev' in ap-northeast-2"
    )


def test_the_file_system_id_option_filters_and_picks_that_file_system(tmp_path: Path) -> None:
    ours = json.loads((EXAMPLE / "aws_fsx.json").read_text())["FileSystems"][0]
    other = json.loads(json.dumps(ours))
    other["FileSystemId"] = "fs-0ther"
    other["LustreConfiguration"]["MountName"] = "other"
    ours["LustreConfiguration"]["MountName"] = "renamed"  # only the id can match it
    host = Recording(example_variant(tmp_path, aws_fsx={"FileSystems": [other, ours]}))
    aws = gather(host, KV_PATH, GatherOptions(file_system_id=FS_ID)).aws
    assert host.asked("aws_fsx") == [
        ("fsx", "describe_file_systems", {"_region": "ap-northeast-2", "FileSystemIds": [FS_ID]})
    ]
    assert (aws.file_system or {})["FileSystemId"] == FS_ID
    assert "fsx" not in aws.errors


def test_a_file_system_id_that_is_not_the_mounted_one_is_said_not_ignored(
    tmp_path: Path,
) -> None:
    """A snapshot answers every describe with the file system recorded; --fsx-id naming
    another one was silently passed over (the mount name matched)."""
    host = Recording(example_variant(tmp_path))
    aws = gather(host, KV_PATH, GatherOptions(file_system_id="fs-0123456789abcdef0")).aws
    assert aws.file_system is None
    assert aws.errors["fsx"] == (
        f"--fsx-id fs-0123456789abcdef0 is not the file system mounted here ({FS_ID},"
        " mount name 'krvlrbev')"
    )


def test_describe_errors_after_the_file_system_are_kept_per_call(tmp_path: Path) -> None:
    folder = example_variant(
        tmp_path,
        aws_dra={"error": "dra denied"},
        aws_subnet={"error": "subnet denied"},
        aws_enis={"error": "eni denied"},
    )
    host = Recording(folder)
    aws = gather(host, KV_PATH).aws
    assert (aws.file_system or {})["FileSystemId"] == FS_ID
    assert (aws.associations, aws.subnet_az_id, aws.security_groups) == (None, None, None)
    assert aws.errors == {
        "dra": "dra denied",
        "subnet": "subnet denied",
        "security_groups": "eni denied",
    }
    assert "aws_security_groups" not in host.keys  # no interface, no group ids to ask about


def test_a_folder_off_lustre_is_not_matched_to_a_file_system_without_a_mount_name(
    tmp_path: Path,
) -> None:
    """None == None used to pick a Windows (or ONTAP, OpenZFS) file system for an ext4 folder,
    and the FSx checks then graded it."""
    windows = {"FileSystems": [{"FileSystemId": "fs-0win", "FileSystemType": "WINDOWS"}]}
    folder = example_variant(tmp_path, proc_mounts="/dev/vda / ext4 rw 0 0\n", aws_fsx=windows)
    facts = gather(SnapshotHost(folder), KV_PATH)
    assert facts.aws.file_system is None
    assert "no FSx for Lustre file system with mount name None" in facts.aws.errors["fsx"]


def test_a_failed_security_group_call_is_the_reason_given(tmp_path: Path) -> None:
    folder = example_variant(tmp_path, aws_security_groups={"error": "AccessDenied"})
    facts = gather(SnapshotHost(folder), KV_PATH)
    assert facts.aws.security_groups is None
    assert facts.aws.errors["security_groups"] == "AccessDenied"


def test_off_ec2_without_a_region_asks_no_aws_api_and_says_why(tmp_path: Path) -> None:
    """It used to call the FSx API with no region and report botocore's NoRegionError."""
    folder = example_variant(
        tmp_path, imds_az_id=None, imds_region=None, imds_instance_type=None, aws_fsx=None
    )
    recorder = Recording(folder)
    facts = gather(recorder, KV_PATH)
    assert facts.aws.errors["fsx"] == "not on EC2 (no instance metadata) and no AWS_REGION set"
    assert not [c for c in recorder.calls if c[0] == "aws"]
