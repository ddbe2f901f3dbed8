"""Parsers on recorded real outputs (tests/fixtures/probe/README.md says where each came from)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.probe import parse

FIXTURES = Path(__file__).parents[2] / "fixtures" / "probe"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_proc_mounts_fsx_lustre_line() -> None:
    (mount,) = parse.parse_proc_mounts(fixture("proc_mounts_fsx_lustre_efa_client_al2023.txt"))
    assert (mount.source, mount.mountpoint, mount.fstype) == (
        "10.1.1.154@tcp:/krvlrbev",
        "/mnt/lustre",
        "lustre",
    )
    assert "flock" in mount.options
    assert "relatime" in mount.options
    assert parse.lustre_mount_name(mount.source) == "krvlrbev"


@pytest.mark.parametrize(
    ("fstype", "source", "kind"),
    [("lustre", "10.0.0.1@tcp:/abc", "lustre"), ("nfs4", "server:/export", "shared"),
     ("fuse.mountpoint-s3", "mountpoint-s3", "shared"), ("ext4", "/dev/vda", "local"),
     ("tmpfs", "tmpfs", "local"), ("squashfs", "/dev/loop0", "local"),
     ("virtiofs", "share", "unknown")],
)  # fmt: skip
def test_mount_kind_is_the_one_rule_for_a_t3_folder(fstype: str, source: str, kind: str) -> None:
    """doctor's mount.shared and bench/capacity's not-Lustre note read the same rule."""
    assert parse.mount_kind(fstype, source) == kind


def test_mount_for_picks_the_longest_prefix_and_not_a_sibling() -> None:
    text = (
        "/dev/root / ext4 rw 0 0\n"
        "10.0.0.1@tcp:/abc /fsx lustre rw,flock 0 0\n"
        "tmpfs /fsx2 tmpfs rw 0 0\n"
        "server:/export /fsx/nfs nfs4 rw 0 0\n"
        "/dev/x /mnt/with\\040space ext4 rw 0 0\n"
    )
    mounts = parse.parse_proc_mounts(text)
    assert parse.mount_for("/fsx/kv", mounts).fstype == "lustre"  # type: ignore[union-attr]
    assert parse.mount_for("/fsx2/kv", mounts).fstype == "tmpfs"  # type: ignore[union-attr]
    assert parse.mount_for("/fsx/nfs/kv", mounts).fstype == "nfs4"  # type: ignore[union-attr]
    assert parse.mount_for("/home", mounts).mountpoint == "/"  # type: ignore[union-attr]
    assert parse.mount_for("/mnt/with space/x", mounts).fstype == "ext4"  # type: ignore[union-attr]


def test_fsx_default_pfl_has_four_components_and_small_files_get_one_stripe() -> None:
    components = parse.parse_lfs_getstripe_dir(
        fixture("lfs_getstripe_d_fsx_root_default_pfl_4component.txt")
    )
    assert [(c.start, c.end, c.stripe_count) for c in components] == [
        (0, 104_857_600, 1),
        (104_857_600, 10_737_418_240, 8),
        (10_737_418_240, 107_374_182_400, 16),
        (107_374_182_400, None, 32),
    ]
    # an 80 MiB KV chunk (Llama 70B, 256 tokens) lands in the first, one-OST component
    assert parse.component_for(80 * 2**20, components).stripe_count == 1  # type: ignore[union-attr]
    assert parse.component_for(2 * 2**30, components).stripe_count == 8  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "count", "size"),
    [
        ("lfs_getstripe_d_dir_plain_wiki.txt", 2, 4_194_304),
        ("lfs_getstripe_dir_plain_stripe_all_osts_older_client.txt", -1, 4_194_304),
    ],
)
def test_plain_directory_layouts(name: str, count: int, size: int) -> None:
    (component,) = parse.parse_lfs_getstripe_dir(fixture(name))
    assert (component.stripe_count, component.stripe_size, component.end) == (count, size, None)


def test_lfs_df_fsx_efa_has_4_mdts_and_6_osts() -> None:
    targets = parse.parse_lfs_df(fixture("lfs_df_h_fsx_persistent2_efa_4mdt_6ost.txt"))
    osts = [t for t in targets if t.kind == "OST"]
    assert len(osts) == 6
    assert len([t for t in targets if t.kind == "MDT"]) == 4
    assert osts[0].total == pytest.approx(4.5 * 2**40)
    assert {t.use_percent for t in osts} == {1}


def test_lfs_df_flags_and_inactive_devices() -> None:
    targets = parse.parse_lfs_df(fixture("lfs_df_hv_manpage_degraded_readonly_inactive.txt"))
    by_index = {(t.kind, t.number): t for t in targets}
    assert by_index[("OST", 1)].flags == "D"
    assert by_index[("OST", 2)].flags == "DR"
    inactive = [t for t in targets if not t.active]
    assert [(t.kind, t.number) for t in inactive] == [("OST", 3)]


def test_lfs_df_with_collapsed_whitespace_finds_the_full_ost() -> None:
    targets = parse.parse_lfs_df(fixture("lfs_df_h_unbalanced_ost_repost_whitespace_collapsed.txt"))
    assert max(t.use_percent for t in targets if t.kind == "OST") == 99


def test_lfs_df_inodes() -> None:
    targets = parse.parse_lfs_df(fixture("lfs_df_ih_fsx_persistent2_efa_4mdt_6ost.txt"))
    mdt0 = next(t for t in targets if t.kind == "MDT" and t.number == 0)
    assert (mdt0.total, mdt0.used) == (93_652_003, 437)


def test_lctl_tunables_aws_recommended() -> None:
    params = parse.parse_lctl_params(
        fixture("lctl_get_param_fsx_tunables_applied_aws_recommended.txt")
    )
    assert set(parse.param_values(params, "max_rpcs_in_flight", "osc.")) == {"32"}
    assert set(parse.param_values(params, "max_rpcs_in_flight", "mdc.")) == {"64"}
    assert set(parse.param_values(params, "max_mod_rpcs_in_flight", "mdc.")) == {"50"}
    assert set(parse.param_values(params, "lru_size", "ldlm.")) == {"9600"}
    assert set(parse.param_values(params, "lru_max_age", "ldlm.")) == {"600000"}


def test_ost_server_uuid_states() -> None:
    conns = parse.parse_ost_server_uuid(
        fixture("CONSTRUCTED_lctl_get_param_osc_ost_server_uuid.txt")
    )
    assert [(c.state, c.deactivated) for c in conns] == [
        ("FULL", False),
        ("IDLE", False),
        ("DISCONN", False),
        ("FULL", True),
    ]


def test_lsmod_and_modprobe() -> None:
    modules = parse.parse_lsmod(fixture("lsmod_lustre_efa_nvidia_fs_excerpt.txt"))
    assert {"lustre", "lnet", "kefalnd", "ksocklnd", "efa"} <= modules
    assert "Module" not in modules
    options = parse.parse_modprobe_options(
        fixture("etc_modprobe_d_modprobe_conf_aws_efa_block.txt")
    )
    assert options == {"ksocklnd.credits": "2560", "ptlrpc.ptlrpcd_per_cpt_max": "32"}


def test_lnetctl_verbose_counts_two_efa_nis_and_tcp() -> None:
    nis = parse.parse_lnetctl_net_show(fixture("lnetctl_net_show_v_fsx_efa_2nis.txt"))
    assert [(n.net, n.nid) for n in nis] == [
        ("tcp", "10.1.1.251@tcp"),
        ("efa", "1.251.92.0@efa"),
        ("efa", "1.251.91.0@efa"),
    ]
    assert parse.sent_by_net(nis) == {"tcp": 109_138, "efa": 379_155 + 380_688}


def test_lnetctl_plain_has_no_counters() -> None:
    nis = parse.parse_lnetctl_net_show(fixture("lnetctl_net_show_fsx_efa_1ni_plain.txt"))
    assert [(n.net, n.status, n.send_count) for n in nis] == [
        ("tcp", "up", None),
        ("efa", "up", None),
    ]


def test_transport_proof_excerpt_shows_efa_carrying_the_write() -> None:
    text = fixture("lnet_efa_vs_tcp_send_count_transport_proof.txt")
    before, _, rest = text.partition("--- counters AFTER write ---")
    after = rest.split("---")[0]
    b = parse.sent_by_net(parse.parse_lnetctl_net_show(before))
    a = parse.sent_by_net(
        parse.parse_lnetctl_net_show("- net type: tcp\n" + after.split("- net type: tcp")[1])
    )
    assert a["efa"] - b["efa"] == 1000  # 1000 MiB of direct I/O, about one RPC per MiB
    assert a["tcp"] - b["tcp"] == 10


def test_nvidia_fs_stats_idle() -> None:
    stats = parse.parse_nvidia_fs_stats(fixture("proc_driver_nvidia-fs_stats_idle_ver4.txt"))
    assert stats == parse.NvfsStats(io_stats_enabled=True, reads=0, read_mib=0, ops_read=0)
    assert parse.parse_nvidia_fs_stats("not that file") is None


def test_cufile_json_with_comments_and_the_aws_sample() -> None:
    sample = parse.parse_cufile_json(fixture("cufile_json_fsx_lustre_gds_aws_sample.json"))
    assert sample is not None
    assert sample["properties"]["allow_compat_mode"] is False
    assert sample["fs"]["lustre"]["posix_gds_min_kb"] == 0
    commented = (
        '// NVIDIA ships comments\n{\n  // here too\n  "properties": {"allow_compat_mode": true}\n}'
    )
    assert parse.parse_cufile_json(commented) == {"properties": {"allow_compat_mode": True}}
    assert parse.parse_cufile_json("{broken") is None


def test_gdscheck_new_and_old_formats() -> None:
    new = parse.parse_gdscheck(fixture("gdscheck_p_v1.13_h100x8_nvme_nfs_supported.txt"))
    assert (new.verified, new.gpus, new.gpus_supporting) == (True, 8, 8)
    assert (new.use_compat_mode, new.force_compat_mode, new.lustre_supported) == (
        True,
        False,
        False,
    )
    old = parse.parse_gdscheck(fixture("gdscheck_p_v1.0_quadro_nvme_only_compat.txt"))
    assert (old.gpus, old.force_compat_mode, old.lustre_supported) == (1, None, False)


@given(st.text(max_size=400))
def test_parsers_never_raise_on_any_text(text: str) -> None:
    parse.parse_proc_mounts(text)
    parse.parse_lfs_getstripe_dir(text)
    parse.parse_lfs_df(text)
    parse.parse_lctl_params(text)
    parse.parse_ost_server_uuid(text)
    parse.parse_lsmod(text)
    parse.parse_modprobe_options(text)
    parse.parse_lnetctl_net_show(text)
    parse.parse_nvidia_fs_stats(text)
    parse.parse_cufile_json(text)
    parse.parse_gdscheck(text)


def test_lnetctl_stats_of_a_healthy_client() -> None:
    stats = parse.parse_lnetctl_stats(fixture("lnetctl_stats_show_fsx_client.txt"))
    assert stats["send_count"] == 868_981
    assert all(stats[k] == 0 for k in parse.LNET_TROUBLE)


def test_meminfo_available_in_bytes_on_this_machines_proc_meminfo() -> None:
    text = Path("/proc/meminfo").read_text()
    available = parse.parse_meminfo_available_bytes(text)
    total = parse.parse_meminfo_gib(text)
    assert available is not None
    assert total is not None
    assert 0 < available <= total * 2**30
    assert parse.parse_meminfo_available_bytes("MemAvailable:  2048 kB\n") == 2 * 2**20
    assert parse.parse_meminfo_available_bytes("MemTotal: 1 kB\n") is None


def test_the_nvidia_driver_version_from_the_open_and_the_proprietary_module() -> None:
    open_module = fixture("proc_driver_nvidia_version_open_580.txt")
    assert parse.parse_nvidia_driver_version(open_module) == "580.95.05"
    proprietary = fixture("proc_driver_nvidia_version_proprietary_550.txt")
    assert parse.parse_nvidia_driver_version(proprietary) == "550.135"
    assert parse.parse_nvidia_driver_version("GCC version: gcc 12\n") is None


@pytest.mark.parametrize(
    ("text", "gen"),
    [
        ("32.0 GT/s PCIe\n", 5),  # the kernel's pci_speed_string(), sysfs since Linux 5.x
        ("2.5 GT/s PCIe\n", 1),
        ("64.0 GT/s PCIe\n", 6),
        ("8 GT/s\n", 3),  # older kernels
        ("Unknown\n", None),
        ("12.0 GT/s PCIe\n", None),
        ("", None),
    ],
)
def test_a_sysfs_link_speed_is_its_pcie_generation(text: str, gen: int | None) -> None:
    assert parse.parse_pcie_speed(text) == gen


def test_sysfs_numbers_and_cpu_lists() -> None:
    assert parse.parse_whole("16\n") == 16
    assert parse.parse_whole("-1\n") == -1
    assert parse.parse_whole("x16") is None
    assert parse.parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse.parse_cpulist("0-47,96-143\n") == set(range(48)) | set(range(96, 144))
    assert parse.parse_cpulist("\n") == frozenset()
    assert parse.parse_cpulist("0-") == frozenset()
