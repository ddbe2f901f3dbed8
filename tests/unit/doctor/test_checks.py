"""The doctor on snapshots built from real outputs (snapshots.py): a healthy FSx + EFA + GDS node
passes, and each broken variant fails the check it should, with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.doctor.checks import DoctorOptions
from kvtool.doctor.folder import FolderAsk
from kvtool.doctor.run import merge_reports, run_doctor
from kvtool.errors import InputError
from kvtool.findings import Finding, Report
from kvtool.probe.gather import GatherOptions
from kvtool.probe.host import SnapshotHost

from .snapshots import KV_PATH, broken, healthy

LLAMA_70B_CHUNK = 256 * 327_680  # one 256-token chunk of Llama 3.1 70B in bf16: 80 MiB


def doctor(folder: Path, cap: int | None = 2**40, **options: object) -> Report:
    return run_doctor(
        SnapshotHost(folder),
        KV_PATH,
        gather_options=GatherOptions(),
        options=DoctorOptions(**options),  # type: ignore[arg-type]
        folder=FolderAsk(cap=cap),
    )


def by_id(report: Report) -> dict[str, Finding]:
    return {f.id: f for f in report.findings}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return healthy(tmp_path_factory.mktemp("snap") / "healthy")


def test_healthy_node_passes_everything_but_the_small_file_systems_throughput(base: Path) -> None:
    report = doctor(base, nodes=16, chunk_bytes=LLAMA_70B_CHUNK, gds="required")
    statuses = {f.id: f.status for f in report.findings}
    assert not report.failed
    assert {i for i, s in statuses.items() if s != "PASS"} == {"aws.throughput"}
    assert (
        "28,800 GiB x 1000 MB/s/TiB = 28.1 GB/s for 16 node(s)"
        in by_id(report)["aws.throughput"].evidence
    )


@pytest.mark.parametrize(
    ("kind", "check", "status", "fix"),
    [
        ("tcp", "network.efa_carries", "FAIL", "udsp"),
        ("compat", "gds.direct", "FAIL", "compatible mode"),
        ("compat", "gds.cufile_json", "FAIL", '"allow_compat_mode": false'),
        ("one_stripe", "layout.stripe", "WARN", f"lfs setstripe -c 6 -S 1M {KV_PATH}"),
        ("no_flock", "mount.flock", "FAIL", "-o relatime,flock 10.1.1.154@tcp:/krvlrbev"),
        ("other_az", "fsx.same_az", "FAIL", "AZ"),
    ],
)
def test_each_broken_node_fails_its_check_with_a_fix(
    base: Path, tmp_path: Path, kind: str, check: str, status: str, fix: str
) -> None:
    report = doctor(
        broken(kind, base, tmp_path / kind), nodes=16, chunk_bytes=LLAMA_70B_CHUNK, gds="required"
    )
    finding = by_id(report)[check]
    assert finding.status == status, finding
    assert fix in finding.fix
    others = {f.id for f in report.findings if f.status != "PASS"} - {check, "aws.throughput"}
    assert others <= {"gds.cufile_json", "gds.direct"}  # compat breaks both, nothing else moves


@pytest.mark.parametrize("kind", ["healthy", "one_stripe"])
def test_a_small_chunk_file_is_advised_a_stripe_size_it_fills(
    base: Path, tmp_path: Path, kind: str
) -> None:
    """Llama 3.1 405B at tp 8 x pp 18 writes 896 KiB chunk files (256 tokens x 516,096 B / 144
    workers): at 1 MiB stripes each spans 1 OST whatever -c says, -c -1 included, so the fix
    is 6 stripes of 128 KiB (896 KiB / 6 = 149 KiB, down to a multiple of 64 KiB), never
    '-c 6 -S 1M' (issue 49)."""
    folder = base if kind == "healthy" else broken(kind, base, tmp_path / kind)
    finding = by_id(doctor(folder, nodes=16, chunk_bytes=917_504))["layout.stripe"]
    assert finding.status == "WARN"
    assert finding.message.startswith("896 KiB chunk files span 1 OST(s) at 1.00 MiB stripes")
    assert finding.fix.startswith(f"lfs setstripe -c 6 -S 128K {KV_PATH}")
    assert "stripe count >= nodes" in finding.evidence
    assert "Lustre_Striping_Best_Practices" in finding.evidence


def test_without_the_chunk_size_no_stripe_count_is_suggested(base: Path, tmp_path: Path) -> None:
    finding = by_id(doctor(broken("one_stripe", base, tmp_path / "s"), nodes=16))["layout.stripe"]
    assert (finding.status, finding.fix) == ("SKIP", "")
    assert "pass --model" in finding.message


def test_tcp_fallback_names_the_tcp_ceiling(base: Path, tmp_path: Path) -> None:
    finding = by_id(doctor(broken("tcp", base, tmp_path / "t"), nodes=4))["network.efa_carries"]
    assert "100 Gbps per client, 30 Gbps with 6 OSTs at 5 Gbps each" in finding.message
    assert "efa send_count +0, tcp +64" in finding.measured


def test_gds_optional_only_warns(base: Path, tmp_path: Path) -> None:
    report = doctor(broken("compat", base, tmp_path / "c"), gds="optional")
    assert by_id(report)["gds.direct"].status == "WARN"
    assert not report.failed


def test_missing_captures_skip_never_pass(tmp_path: Path) -> None:
    (tmp_path / "hostname.txt").write_text("x\n")
    report = doctor(tmp_path)
    assert {f.status for f in report.findings} == {"SKIP"}


def test_garbled_snapshot_output_is_not_captured_and_garbled_json_is_refused(
    base: Path, tmp_path: Path
) -> None:
    """A command's output in words that do not parse reads as not observed (SKIP); a JSON
    observation that is not the live host's shape is refused by name, never graded."""
    folder = broken("no_flock", base, tmp_path / "g")
    (folder / "lfs_df.txt").write_text("complete nonsense\n")
    assert by_id(doctor(folder))["mount.flock"].status == "FAIL"  # the rest still graded
    (folder / "aws_fsx.json").write_bytes(b"\x00\xff garbage")
    with pytest.raises(InputError, match=r"aws_fsx\.json is not JSON"):
        doctor(folder)
    (folder / "aws_fsx.json").write_text(
        '{"FileSystems": [{"FileSystemId": "fs-1", "SubnetIds": 7}]}'
    )
    with pytest.raises(InputError, match=r"FileSystems\[0\]\.SubnetIds must be a JSON list, got 7"):
        doctor(folder)


def test_merge_flags_nodes_that_differ(base: Path, tmp_path: Path) -> None:
    a = doctor(base)
    b = doctor(broken("no_flock", base, tmp_path / "b"))._replace(node="node-b")
    merged = merge_reports([a, b])
    (difference,) = [d for d in merged.differences if d.id == "mount.flock"]
    assert difference.status == "FAIL"
    assert "PASS on node-a" in difference.evidence
    assert "FAIL on node-b" in difference.evidence
    assert merged.failed
    same = merge_reports([a, a._replace(node="node-c")])
    assert same.differences == ()


def test_lnet_drops_and_timeouts_warn(base: Path, tmp_path: Path) -> None:
    from .snapshots import sample, variant

    stats = sample("lnetctl_stats_show_fsx_client.txt").replace(
        "network_timeout_count: 0", "network_timeout_count: 12"
    )
    finding = by_id(doctor(variant(base, tmp_path / "l", lnet_stats=stats)))["network.lnet_errors"]
    assert finding.status == "WARN"
    assert "network_timeout_count=12 of 868,981 sends" in finding.evidence


def test_a_read_only_mount_is_told_to_remount_not_to_chown(base: Path, tmp_path: Path) -> None:
    from .snapshots import variant

    mounts = (base / "proc_mounts.txt").read_text().replace(" lustre rw,", " lustre ro,")
    path = {"path": KV_PATH, "exists": True, "is_dir": True, "writable": False,
            "realpath": KV_PATH}  # fmt: skip
    folder = variant(base, tmp_path / "ro", proc_mounts=mounts, path=path)
    finding = by_id(doctor(folder))["path.writable"]
    assert finding.status == "FAIL"
    assert "read-only mount" in finding.message
    assert finding.fix.startswith("sudo mount -o remount,rw /mnt/lustre")
    assert "chown" not in finding.fix


def test_atime_says_what_relatime_writes_and_why_it_passes_where_the_article_says_noatime(
    base: Path,
) -> None:
    from kvtool.doctor.checks import check_atime

    report = doctor(base, nodes=16, chunk_bytes=LLAMA_70B_CHUNK, gds="required")
    relatime = by_id(report)["mount.atime"]
    assert relatime.status == "PASS"
    assert "at most once a day" in relatime.message
    assert "accepted where the AWS article says noatime" in relatime.message
    from types import SimpleNamespace

    for options, status, words in (
        (("rw", "noatime", "flock"), "PASS", "reads never write access times"),
        (("rw", "flock"), "WARN", "updated on every read"),
    ):
        facts = SimpleNamespace(mount=SimpleNamespace(options=options))
        (found,) = check_atime(facts, None)  # type: ignore[arg-type]
        assert found.status == status
        assert words in found.message
