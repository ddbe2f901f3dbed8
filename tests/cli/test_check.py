"""``kvtool check PLAN.yaml``: the examples, JUnit that CI shows, infrastructure code as input,
and bad plans as one line with exit 2."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.plan.infra import fsx_from_cloudformation, fsx_from_terraform
from kvtool.plan.workload import plan_from_mapping
from tests.conftest import CliResult

Run = Callable[..., CliResult]
EXAMPLES = Path(__file__).parents[2] / "examples" / "check"


def test_passing_example_exits_0(kvtool: Run) -> None:
    result = kvtool("check", str(EXAMPLES / "plan-pass.yaml"), "--json")
    assert result.exit_code == 0, result.stdout
    data = json.loads(result.stdout)
    statuses = {f["id"]: f["status"] for f in data["findings"]}
    assert "FAIL" not in statuses.values()
    assert statuses["measured.bandwidth"] == "PASS"  # the bench JSON's 5.6 GB/s vs 5.9 planned
    assert statuses["fsx.deployment"] == "PASS"  # read from the Terraform plan's child module


def test_failing_example_fails_each_kind_of_rule(kvtool: Run, tmp_path: Path) -> None:
    junit = tmp_path / "check.xml"
    result = kvtool("check", str(EXAMPLES / "plan-fail.yaml"), "--junit", str(junit))
    assert result.exit_code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    failed = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert failed == {
        "plan.capacity",
        "plan.posture",
        "fsx.deployment",
        "fsx.efa",
        "fsx.same_az",
        "fsx.mount_options",
        "measured.bandwidth",
        "measured.doctor",
    }
    warned = [ln for ln in result.stdout.splitlines() if ln.strip().startswith("WARN")]
    assert {ln.split()[1] for ln in warned} >= {
        "fsx.compression",
        "fsx.stripe",
        "client.odirect",
        "client.io_threads",
        "fsx.s3_association",
    }


def test_strict_fails_the_gate_on_a_warn_and_junit_shows_it_failed(
    kvtool: Run, tmp_path: Path
) -> None:
    """``check`` could not fail a CI gate on WARN, and in JUnit a WARN was a passing case
    (issue 54). plan-pass.yaml has one WARN (plan.bandwidth) and no FAIL."""
    plan = str(EXAMPLES / "plan-pass.yaml")

    def cases(path: Path) -> dict[str, str]:
        suite = ET.parse(path).getroot().find("testsuite")
        assert suite is not None
        return {
            str(c.get("name")): "failure" if c.find("failure") is not None
            else "skipped" if c.find("skipped") is not None else "passed"
            for c in suite.iter("testcase")
        }  # fmt: skip

    plain = kvtool("check", plan, "--junit", str(tmp_path / "plain.xml"))
    assert plain.exit_code == 0
    assert cases(tmp_path / "plain.xml")["plan.bandwidth"] == "passed"  # WARN: passes, said
    assert "<system-out>WARN: the file system" in (tmp_path / "plain.xml").read_text()

    strict = kvtool("check", plan, "--strict", "--junit", str(tmp_path / "strict.xml"))
    assert strict.exit_code == 1
    assert "(problems found: --strict fails a WARN)" in strict.stdout
    found = cases(tmp_path / "strict.xml")
    assert [name for name, how in found.items() if how == "failure"] == ["plan.bandwidth"]
    root = ET.parse(tmp_path / "strict.xml").getroot()
    assert root.get("failures") == "1"
    (failure,) = root.iter("failure")
    assert failure.get("type") == "WARN"
    data = json.loads(kvtool("check", plan, "--strict", "--json").stdout)
    assert data["strict"] is True
    assert kvtool("check", plan, "--strict", "--json").exit_code == 1
    fail = kvtool("check", str(EXAMPLES / "plan-fail.yaml"), "--strict")
    assert fail.exit_code == 1
    assert "(problems found)" in fail.stdout


def test_a_size_fsx_cannot_provision_fails_with_the_nearest(kvtool: Run, tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        (EXAMPLES / "plan-pass.yaml")
        .read_text()
        .replace(
            "  from_terraform: terraform-plan.json\n",
            "  deployment_type: PERSISTENT_2\n  storage_capacity_gib: 49152\n"
            "  per_unit_storage_throughput: 1000\n  efa_enabled: true\n",
        )
        .replace("  bench: bench-t3.json\n  doctor: [doctor-node-a.json]\n", "")
        .replace("t3_dir: kvcache ", f"t3_dir: {EXAMPLES / 'kvcache'} ")
    )
    result = kvtool("check", str(plan), "--json")
    finding = {f["id"]: f for f in json.loads(result.stdout)["findings"]}["plan.fsx_size"]
    assert finding["status"] == "FAIL"
    assert finding["fix"] == "use 48,000 GiB or 52,800 GiB"
    assert result.exit_code == 1


def test_terraform_and_cloudformation_readers() -> None:
    tf = fsx_from_terraform(json.loads((EXAMPLES / "terraform-plan.json").read_text()), source="t")
    assert (tf.deployment_type, tf.storage_capacity_gib, tf.efa_enabled, tf.s3_association) == (
        "PERSISTENT_2",
        48_000,
        True,
        True,
    )
    assert "module.kv_tier.aws_fsx_lustre_file_system.kv" in tf.source
    template = {
        "Resources": {
            "Fs": {
                "Type": "AWS::FSx::FileSystem",
                "Properties": {
                    "FileSystemType": "LUSTRE",
                    "StorageCapacity": {"Fn": "Ref"},
                    "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "EfaEnabled": "true"},
                },
            }
        }
    }
    cf = fsx_from_cloudformation(template, source="c")
    assert (cf.storage_capacity_gib, cf.efa_enabled, cf.data_compression_type) == (
        None,
        True,
        "NONE",
    )  # a !Ref is undeclared; absent compression is AWS's NONE
    with pytest.raises(InputError, match="no aws_fsx_lustre_file_system"):
        fsx_from_terraform({"planned_values": {"root_module": {"resources": []}}}, source="t")


def test_the_plan_extends_the_workload_loader() -> None:
    plan = plan_from_mapping(
        {
            "model": "llama-3.1-8b",
            "hardware": "p5en",
            "sessions": "1k",
            "t3_path": "efa-gds",
            "fsx": {"stripe_count": -1, "mount_options": "noatime, flock"},
        },
        source="p.yaml",
    )
    assert plan.workload.sessions == 1000
    assert plan.t3_path == "efa_gds"
    assert plan.fsx is not None
    assert plan.fsx.mount_options == ("noatime", "flock")


def test_advise_refuses_plan_keys_by_name(kvtool: Run) -> None:
    result = kvtool("advise", str(EXAMPLES / "plan-pass.yaml"))
    assert result.exit_code == 2
    assert "belongs to a deployment plan, which kvtool check reads" in result.stderr


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t + "fsx_capacity: 1\n", "unknown key 'fsx_capacity'"),
        (lambda t: t.replace("stripe_count: -1", "stripe_count: 0"), "fsx.stripe_count must be"),
        (lambda t: t.replace("  mount_options:", "  mount_opts:"), "fsx: unknown key 'mount_opts'"),
        (lambda t: t.replace("terraform-plan.json", "missing.json"), "cannot read"),
        (lambda t: t.replace("posture: eager", "posture: sometimes"), "posture must be eager"),
        (lambda t: t.replace("tolerance: 0.2", "tolerance: 2"), "tolerance must be below 1"),
        (lambda t: t + "extra: [unclosed\n", "malformed YAML at line"),
    ],
)
def test_bad_plans_are_one_line_exit_2(
    kvtool: Run, tmp_path: Path, edit: Callable[[str], str], message: str
) -> None:
    for name in ("terraform-plan.json", "bench-t3.json", "doctor-node-a.json"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    plan = tmp_path / "plan.yaml"
    plan.write_text(edit((EXAMPLES / "plan-pass.yaml").read_text()))
    result = kvtool("check", str(plan))
    assert result.exit_code == 2, result.stdout
    assert result.stderr.count("\n") == 1
    assert message in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["terraform-plan.json", "bench-t3.json", "doctor-node-a.json", "plan.yaml"]
    )


def test_check_reads_bench_json_as_size_bench_does(tmp_path: Path) -> None:
    """One parser for bench JSON: check's measured T3 is the figure `size --bench` plans
    with (per node, only measurements that ran)."""
    import json

    from kvtool.inputs.evidence import read_bench

    read = {"tier": "t3", "op": "seq_read", "status": "ok", "bytes_per_s": 8e9, "clients": 4}
    skipped = {**read, "status": "skip", "bytes_per_s": None}
    write = {**read, "op": "seq_write", "bytes_per_s": 80e9}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"results": [read, skipped, write]}))
    (t3,) = read_bench(path).measured(chips=8)
    assert (t3.tier, t3.bytes_per_s) == ("T3", 2e9)


# (model, hardware, sessions, context, t3 path, FSx GiB or None, kv dtype, tp or None)
DEPLOYMENTS = [
    ("gemma-3-27b", "p5en", 2000, "128K", "efa-gds", 96_000, "auto", None),  # the case
    ("llama-3.1-70b", "p5en", 2000, "128K", "efa-gds", 96_000, "auto", None),
    ("llama-3.1-70b", "p5en", 400, "32k", "efa", None, "fp8", 4),
    ("deepseek-r1", "p5en", 500, "128K", "efa", 192_000, "auto", None),
    ("qwen3-next-80b-a3b", "p5en", 300, "64k", "ena", None, "auto", None),
]


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=[f"{d[0]}-{d[4]}" for d in DEPLOYMENTS])
def test_check_places_sessions_as_size_hardware_does(
    kvtool: Run,
    tmp_path: Path,
    deployment: tuple[str, str, int, str, str, int | None, str, int | None],
) -> None:
    """One pipeline: `kvtool check` and `kvtool size --hardware` put the same sessions in T1,
    T2 and T3 for the same deployment (the admission charge and the GDS reserve included)."""
    model, node, sessions, ctx, path, gib, dtype, tp = deployment
    plan = {
        "model": model, "hardware": node, "sessions": sessions, "contexts": {ctx: 1.0},
        "t3_path": path, "kv_dtype": dtype,
        **({"tp": tp} if tp else {}),
        "fsx": {"deployment_type": "PERSISTENT_2", "efa_enabled": path != "ena",
                **({"storage_capacity_gib": gib} if gib else {})},
    }  # fmt: skip
    (tmp_path / "plan.yaml").write_text(json.dumps(plan))
    checked = kvtool("check", str(tmp_path / "plan.yaml"), "--json")
    assert checked.exit_code in (0, 1), checked.stderr
    evidence = next(
        f["evidence"] for f in json.loads(checked.stdout)["findings"] if f["id"] == "plan.capacity"
    )
    counts = [
        int(part.split()[-1].replace(",", "")) for part in evidence.split(": ")[1].split(", ")
    ]
    args = ["size", model, "--ctx", ctx, "--sessions", str(sessions), "--hardware", node,
            "--t3-path", path, "--kv-dtype", dtype, "--json"]  # fmt: skip
    args += ["--tp", str(tp)] if tp else []
    args += ["--fsx-capacity", f"{gib}GiB"] if gib else []
    sized = kvtool(*args)
    assert sized.exit_code == 0, sized.stderr
    tiers = json.loads(sized.stdout)["results"][0]["tiers"]
    assert counts[:3] == [t["sessions"] for t in tiers[:3]], (evidence, tiers)
    assert counts[0] > 0


def test_a_t3_folder_past_its_cap_fails_the_build(kvtool: Run, tmp_path: Path) -> None:
    for name in ("terraform-plan.json", "bench-t3.json", "doctor-node-a.json"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    shutil.copytree(EXAMPLES / "kvcache", tmp_path / "kvcache")
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        (EXAMPLES / "plan-pass.yaml").read_text().replace("max_size: 1TiB", "max_size: 60KiB")
    )
    result = kvtool("check", str(plan), "--json")
    assert result.exit_code == 1
    found = {f["id"]: f for f in json.loads(result.stdout)["findings"]}
    assert found["folder.cap"]["status"] == "FAIL"  # 16 x 4 KiB = 64 KiB
    assert found["folder.cap"]["message"] == "over its cap by 4.00 KiB"
    assert found["folder.orphans"]["status"] == "PASS"  # the Instruct alias is the plan's model
    assert kvtool("check", str(EXAMPLES / "plan-pass.yaml")).exit_code == 0
