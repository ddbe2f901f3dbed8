"""The pre-deployment checklist as a library: ``check_plan`` over a plan, the model's shape and
the cluster, each rule's PASS, WARN, FAIL and SKIP with the figures it rests on."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.findings import Finding
from kvtool.inputs.evidence import read_doctor_report
from kvtool.inputs.plan_file import CheckInputs, read_plan
from kvtool.inputs.shape import resolve_shape
from kvtool.plan.checklist import (
    MIN_IO_THREADS,
    Evidence,
    check_plan,
    declared_facts,
    t3_profile_for,
)
from kvtool.plan.deployment import make_hardware
from kvtool.plan.fsx_rules import FsxFacts
from kvtool.plan.measured import MeasuredTier
from kvtool.plan.workload import FsxSettings, Measured, plan_from_mapping
from kvtool.profiles.load import load_node_profile, load_storage_profile
from kvtool.units import format_bytes

EXAMPLES = Path(__file__).parents[3] / "examples" / "check"
PASS = read_plan(EXAMPLES / "plan-pass.yaml")
FAIL = read_plan(EXAMPLES / "plan-fail.yaml")
DOCTOR_OK = read_doctor_report(EXAMPLES / "doctor-node-a.json")
DOCTOR_FAILING = read_doctor_report(EXAMPLES / "doctor-node-b.json")

ORDER = [
    "plan.fsx_size",
    "plan.capacity",
    "plan.tiers",
    "plan.posture",
    "fsx.deployment",
    "fsx.storage_type",
    "fsx.compression",
    "fsx.efa",
    "fsx.same_az",
    "fsx.s3_association",
    "fsx.mount_options",
    "fsx.stripe",
    "client.odirect",
    "client.io_threads",
    "plan.bandwidth",
    "measured.bandwidth",
    "measured.doctor",
    "folder.contents",
    "folder.orphans",
    "folder.cap",
    "folder.files_per_dir",
]
GIB = 2**30
# Llama 3.1 70B, bf16, vLLM: 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B/token; the
# examples' 128k is 128,000 tokens (lowercase k: x1000), 8,000 blocks of 16
LLAMA_70B_128K = 128_000 * 327_680  # 41,943,040,000 B = 41.9 GB
# 48,000 GiB at 1,000 MB/s/TiB = 46.875 GB/s, over the examples' 8 nodes
PASS_SHARE = 48_000 / 1024 * 1000e6 / 8  # 5,859,375,000 B/s per node


def check(inputs: CheckInputs, evidence: Evidence | None = None, **plan: Any) -> list[Finding]:
    """``check_plan`` on ``inputs`` with plan fields replaced (``fsx={...}`` replaces fsx
    fields, ``fsx=None`` removes the file system)."""
    changes = dict(plan)
    if isinstance(changes.get("fsx"), dict):
        assert inputs.plan.fsx is not None
        changes["fsx"] = inputs.plan.fsx._replace(**changes["fsx"])
    return check_plan(
        inputs.plan._replace(**changes),
        inputs.shape,
        inputs.hardware,
        evidence=inputs.evidence if evidence is None else evidence,
    )


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def from_mapping(data: dict[str, Any], **evidence: Any) -> CheckInputs:
    """What ``read_plan`` builds, from a mapping instead of a file."""
    plan = plan_from_mapping(data, source="plan.yaml")
    w = plan.workload
    hardware = make_hardware(
        load_node_profile(w.hardware),
        load_storage_profile(t3_profile_for(plan.fsx)),
        load_storage_profile("s3-standard"),
        nodes=w.nodes,
        t3_path=plan.t3_path,
    )
    shape = resolve_shape(w.model, engine=w.engine, kv_dtype=w.kv_dtype, tp=w.tp)
    return CheckInputs(plan, shape, hardware, Evidence(**evidence))


def placed(finding: Finding) -> dict[str, int]:
    """The session counts of a plan.capacity finding's evidence."""
    assert finding.id == "plan.capacity"
    counts = dict(re.findall(r"(T1|T2|T3|released to S3|overflow) ([\d,]+)", finding.evidence))
    peak = re.match(r"([\d,]+) sessions at peak", finding.evidence)
    assert peak is not None
    counts["peak"] = peak.group(1)
    return {k: int(v.replace(",", "")) for k, v in counts.items()}


# --- the examples -----------------------------------------------------------------------------


def test_the_passing_example_grades_every_rule_in_order() -> None:
    findings = check(PASS)
    assert [f.id for f in findings] == ORDER
    assert {f.area for f in findings} == {"plan", "fsx", "client", "measured", "folder"}
    statuses = {f.id: f.status for f in findings}
    # 5.86 GB/s per node is below the 87.5 GB/s EFA link: the one WARN
    assert statuses.pop("plan.bandwidth") == "WARN"
    assert set(statuses.values()) == {"PASS"}


def test_the_passing_examples_capacity_holds_400_sessions_at_a_peak_of_two() -> None:
    finding = by_id(check(PASS))["plan.capacity"]
    # its Terraform links an S3 bucket (a DRA): of 800 sessions idle 2 minutes on average,
    # exp(-10m / 2m) = 0.67%, 5, are idle past 10 minutes and released to S3
    assert finding.message == "the deployed tiers hold the peak working set"
    # the FSx kvtool plan sizes for the 308 hot sessions (plan --nodes 8 --sessions 800 --ctx
    # 128k --set mean_idle=2m): 14,400 GiB holds them, 43,200 GiB restores them in time
    assert finding.evidence.endswith(
        "; 43,200 GiB of FSx holds the hot share (sized for throughput, as kvtool plan sizes it:"
        " T3 reload beats recompute from 50,000 tokens (the AWS article's line); 14,400 GiB"
        " would hold what stays on T3)"
    )
    counts = placed(finding)
    assert counts["peak"] == 800  # 400 mean sessions x peak-to-mean 2
    assert counts["overflow"] == 0
    assert counts["released to S3"] == 5 == math.floor(800 * math.exp(-5))
    assert counts["T1"] + counts["T2"] + counts["T3"] + 5 == 800
    assert f"x {format_bytes(LLAMA_70B_128K)} mean" in finding.evidence  # 41.9 GB (39.1 GiB)


def test_the_passing_examples_bandwidth_is_bound_by_the_file_system() -> None:
    finding = by_id(check(PASS))["plan.bandwidth"]
    # fan-in: 5.859 GB/s / 41.94 GB = 0.14 sessions/s; the EFA link: 700 Gbps = 87.5 GB/s,
    # / 41.94 GB = 2.09 sessions/s
    assert finding.message == (
        "the file system, not the link, bounds T3 reads: fan-in is 0.14 sessions/s per node"
        " instead of 2.09"
    )
    assert finding.evidence == (
        "file system 5.86 GB/s per node, efa link 87.5 GB/s: 0.14 cache-hit sessions/s per node"
        " at the longest context"
    )
    assert finding.fix == "raise storage_capacity_gib or per_unit_storage_throughput"


def test_the_passing_examples_measured_bandwidth_is_within_tolerance() -> None:
    finding = by_id(check(PASS))["measured.bandwidth"]
    assert finding.status == "PASS"
    # bench-t3.json: 5.6 GB/s against 5.86 x (1 - 0.2) = 4.69 GB/s
    assert finding.evidence == "measured 5.6 GB/s, plan 5.86 GB/s per node, tolerance 20%"


def test_the_failing_example_fails_one_rule_of_each_kind() -> None:
    statuses = {f.id: f.status for f in check(FAIL)}
    assert statuses == {
        "plan.fsx_size": "PASS",  # 2,400 GiB is a size FSx provisions
        "plan.capacity": "FAIL",
        "plan.tiers": "PASS",
        "plan.posture": "FAIL",
        "fsx.deployment": "FAIL",
        "fsx.storage_type": "PASS",
        "fsx.compression": "WARN",
        "fsx.efa": "FAIL",
        "fsx.same_az": "FAIL",
        "fsx.s3_association": "WARN",
        "fsx.mount_options": "FAIL",
        "fsx.stripe": "WARN",
        "client.odirect": "WARN",
        "client.io_threads": "WARN",
        "plan.bandwidth": "WARN",
        "measured.bandwidth": "FAIL",
        "measured.doctor": "FAIL",
    }


def test_the_failing_examples_file_system_overflows_by_whole_sessions() -> None:
    finding = by_id(check(FAIL))["plan.capacity"]
    counts = placed(finding)
    # 2,400 GiB = 2,576,980,377,600 B holds 61 sessions of 41,943,040,000 B
    assert 2400 * GIB // LLAMA_70B_128K == 61
    assert counts["T3"] == 61
    assert counts["overflow"] == 800 - counts["T1"] - counts["T2"] - counts["T3"]
    assert counts["overflow"] > 0
    spill = format_bytes(counts["overflow"] * LLAMA_70B_128K)
    assert finding.message == f"{spill} of the peak working set overflows the file system"
    # no DRA declared: nothing released; 14,400 GiB, SCRATCH_2's size holding the 313 past T1
    # and T2 (13,130 GB = 12,228 GiB, in 2,400 GiB steps), but the size kvtool plan gives
    # (--t3-storage fsx-lustre-scratch2), 211,200 GiB, restores them in time
    assert finding.fix == (
        "grow storage_capacity_gib to 211,200 GiB for what stays on T3 at peak (sized for"
        " throughput, as kvtool plan sizes it: T3 reload beats recompute from 50,000 tokens (the"
        " AWS article's line); 14,400 GiB would hold what stays on T3)"
    )
    assert "none released to S3: the plan declares no S3 data repository" in finding.evidence


def test_the_failing_examples_scratch_file_system_is_read_over_ena() -> None:
    finding = by_id(check(FAIL))["plan.bandwidth"]
    # SCRATCH_2: 2,400 GiB x 200 MB/s/TiB = 468.75 MB/s / 8 nodes = 58.6 MB/s per node; no EFA
    # on SCRATCH, so the client falls back to ENA: min(100 Gbps, the node's 100) = 12.5 GB/s
    assert finding.evidence.startswith("file system 0.0586 GB/s per node, ena link 12.5 GB/s")


# --- plan.fsx_size ----------------------------------------------------------------------------


def test_a_size_fsx_cannot_provision_fails_with_the_nearest_and_t3_is_sized_to_fit() -> None:
    found = by_id(check(PASS, fsx={"storage_capacity_gib": 49_152}))  # the README's old 48 TiB
    size = found["plan.fsx_size"]
    assert size.status == "FAIL"
    assert size.message == (
        "storage_capacity_gib 49,152 GiB cannot be provisioned: an EFA-enabled"
        " fsx-lustre-persistent2 at 1000 MB/s/TiB comes in multiples of 4,800 GiB"
    )
    assert size.fix == "use 48,000 GiB or 52,800 GiB"
    assert size.evidence == PASS.plan.fsx.source  # type: ignore[union-attr]
    assert found["plan.capacity"].status == "PASS"  # the T3 is sized to fit instead
    assert "plan.bandwidth" not in found  # no size: no throughput to grade
    assert found["measured.bandwidth"].status == "SKIP"
    assert found["measured.bandwidth"].message == "the plan declares no file system to compare"


def test_a_file_system_without_efa_has_the_plain_ssd_steps() -> None:
    size = by_id(check(PASS, fsx={"storage_capacity_gib": 3600, "efa_enabled": False}))
    assert size["plan.fsx_size"].fix == "use 2,400 GiB or 4,800 GiB"
    ok = by_id(check(PASS, fsx={"storage_capacity_gib": 2400, "efa_enabled": False}))
    assert ok["plan.fsx_size"].message == "2,400 GiB is a size FSx provisions"


def test_no_declared_size_skips_the_size_rule() -> None:
    found = by_id(check(PASS, fsx={"storage_capacity_gib": None}))
    assert found["plan.fsx_size"].status == "SKIP"
    assert found["plan.fsx_size"].message == "no storage_capacity_gib declared"
    assert found["plan.capacity"].status == "PASS"


# --- plan.capacity and plan.tiers -------------------------------------------------------------


def test_without_a_file_system_the_overflow_has_nowhere_to_go() -> None:
    findings = check(PASS, fsx=None)
    found = by_id(findings)
    capacity = found["plan.capacity"]
    assert capacity.status == "FAIL"
    counts = placed(capacity)
    assert counts["T3"] == 0
    need = format_bytes(counts["overflow"] * LLAMA_70B_128K)
    assert capacity.message == (
        f"the peak working set does not fit HBM and host memory: {need} has nowhere to go"
    )
    assert capacity.fix == f"add an FSx for Lustre T3 of at least {need} (fsx: in the plan)"
    tiers = found["plan.tiers"]
    assert tiers.status == "FAIL"
    assert tiers.message.startswith(
        "the article's criteria call for a shared T3 (3 of 6 hold, any one enough"
    )
    assert tiers.fix == "add fsx: to the plan"
    # no file system: no size, FSx settings or bandwidth to grade, and the client rules go too
    assert [f.id for f in findings] == [
        "plan.capacity",
        "plan.tiers",
        "plan.posture",
        "fsx.checklist",
        "measured.bandwidth",
        "measured.doctor",
        *ORDER[-4:],  # the folder rules
    ]
    assert found["fsx.checklist"].status == "SKIP"
    assert found["fsx.checklist"].message == "the plan deploys no FSx file system"


SMALL = {"model": "llama-3.1-8b", "hardware": "p5en", "sessions": 10, "contexts": "8k"}


def test_a_small_workload_needs_only_hbm() -> None:
    found = by_id(check_plan(*from_mapping(SMALL)[:3]))
    # Llama 3.1 8B: 2 x 32 x 8 x 128 x 2 B = 131,072 B/token x 8,000 = 1,048,576,000 B
    counts = placed(found["plan.capacity"])
    assert counts == {"T1": 10, "T2": 0, "T3": 0, "overflow": 0, "peak": 10}
    assert "x 1.05 GB (1,000 MiB) mean" in found["plan.capacity"].evidence
    assert found["plan.tiers"].status == "PASS"
    assert found["plan.tiers"].message == "tiers match the article's criteria (0 of 6 hold): T1"


def test_a_t3_the_criteria_do_not_justify_warns() -> None:
    data = {**SMALL, "fsx": {"storage_capacity_gib": 4800, "efa_enabled": True}}
    tiers = by_id(check_plan(*from_mapping(data)[:3]))["plan.tiers"]
    assert tiers.status == "WARN"
    assert tiers.message == (
        "a T3 is deployed but none of the article's 6 criteria holds: it may not pay for itself"
    )


def test_weights_that_do_not_fit_fail_capacity_and_stop_there() -> None:
    # Llama 3.1 405B at tp 1: eight engines per p5en, each with ~810 GB of bf16 weights
    data = {
        "model": "llama-3.1-405b",
        "hardware": "p5en",
        "tp": 1,
        "fsx": {"storage_capacity_gib": 4800, "efa_enabled": True},
    }
    findings = check_plan(*from_mapping(data)[:3])
    assert [(f.id, f.status) for f in findings] == [
        ("plan.fsx_size", "PASS"),
        ("plan.capacity", "FAIL"),
    ]
    # 8 x 141 GiB = 1,128 GiB = 1.21 TB of HBM
    assert "leave no room for KV in p5en.48xlarge's 1.21 TB" in findings[1].message
    assert findings[1].fix.startswith("use more or larger accelerators")


def test_a_tp_the_node_cannot_run_is_bad_input_not_a_finding() -> None:
    """An invalid tp is a mistake in the plan (exit 2), as the docstring says; it used to come
    back as a plan.capacity FAIL (exit 1)."""
    with pytest.raises(InputError, match=r"3 does not divide p5en\.48xlarge's 8 accelerators"):
        check_plan(*from_mapping({**SMALL, "tp": 3})[:3])


def test_a_throughput_fsx_does_not_offer_fails_the_size_rule() -> None:
    """PERSISTENT_2 offers 125, 250, 500 or 1,000 MB/s/TiB; 300 used to PASS and be planned."""
    fsx = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 48_000,
           "per_unit_storage_throughput": 300, "efa_enabled": True}  # fmt: skip
    found = by_id(check_plan(*from_mapping({**SMALL, "fsx": fsx})[:3]))
    size = found["plan.fsx_size"]
    assert size.status == "FAIL"
    assert size.message == "per_unit_storage_throughput 300 is not an FSx option"
    assert "125, 250, 500, 1000" in size.fix


# --- plan.posture -----------------------------------------------------------------------------


def test_posture_against_the_advice() -> None:
    assert by_id(check(PASS))["plan.posture"].message == "posture eager"
    lazy = by_id(check(PASS, posture="lazy"))["plan.posture"]
    assert (lazy.status, lazy.message) == ("WARN", "posture lazy; kvtool recommends eager")
    assert (
        lazy.evidence
        == "posture eager: shared prefixes are worth writing to T3 once for the cluster"
    )
    none = by_id(check(PASS, posture=None))["plan.posture"]
    assert (none.status, none.message) == ("SKIP", "no posture declared; kvtool recommends eager")
    eager = by_id(check_plan(*from_mapping({**SMALL, "posture": "eager"})[:3]))["plan.posture"]
    assert (eager.status, eager.message) == ("WARN", "posture eager; kvtool recommends lazy")


def test_disaggregated_serving_with_a_lazy_posture_fails() -> None:
    disaggregated = dataclasses.replace(PASS.plan.workload, disaggregated=True)
    lazy = by_id(check(PASS, workload=disaggregated, posture="lazy"))["plan.posture"]
    assert lazy.status == "FAIL"
    assert lazy.message == (
        "disaggregated prefill and decode need an eager posture: the decode node never ran the"
        " prefill"
    )
    assert lazy.fix == "posture: eager"
    assert by_id(check(PASS, workload=disaggregated))["plan.posture"].status == "PASS"


# --- the FSx settings as the plan uses them ---------------------------------------------------


def test_the_nodes_want_efa_only_on_an_efa_path() -> None:
    no_efa = {"efa_enabled": False}
    assert by_id(check(PASS, fsx=no_efa))["fsx.efa"].status == "FAIL"  # t3_path efa
    assert by_id(check(PASS, fsx=no_efa, t3_path="efa_gds"))["fsx.efa"].status == "FAIL"
    # over ENA a 46.9 GB/s file system without EFA is a WARN (AWS: EFA above 10 GB/s)
    ena = by_id(check(PASS, fsx=no_efa, t3_path="ena"))["fsx.efa"]
    assert ena.status == "WARN"
    assert "(46.9 GB/s file system)" in ena.message


def test_another_az_fails_over_efa_and_warns_over_ena() -> None:
    assert by_id(check(PASS, fsx={"same_az": False}))["fsx.same_az"].status == "FAIL"
    over_ena = by_id(check(PASS, fsx={"same_az": False}, t3_path="ena"))["fsx.same_az"]
    assert over_ena.status == "WARN"


def test_an_s3_association_not_declared_in_the_plan_is_none() -> None:
    found = by_id(check(PASS, fsx={"s3_association": None}))["fsx.s3_association"]
    assert found.status == "WARN"
    assert found.fix.startswith("aws_fsx_data_repository_association (Terraform)")


@pytest.mark.parametrize(
    ("options", "status"),
    [
        (("relatime", "flock"), "PASS"),
        (("noatime", "flock"), "PASS"),
        (("flock",), "WARN"),  # access times written on every read
        (("relatime",), "FAIL"),  # no coherent locks across nodes
        ((), "FAIL"),
    ],
)
def test_mount_options_need_flock_and_an_atime_setting(
    options: tuple[str, ...], status: str
) -> None:
    finding = by_id(check(PASS, fsx={"mount_options": options}))["fsx.mount_options"]
    assert finding.status == status
    assert finding.message == f"mount options {','.join(options)}"
    assert finding.fix == ("" if status == "PASS" else "mount -o relatime,flock (or noatime,flock)")


@pytest.mark.parametrize(
    ("stripe", "status", "said", "fix"),
    [
        (-1, "PASS", "10.0 MiB chunk files span up to 10 OST(s) (-c -1 -S 1M), >= 8 nodes", ""),
        (8, "PASS", "10.0 MiB chunk files span up to 8 OST(s) (-c 8 -S 1M), >= 8 nodes", ""),
        (16, "WARN", "stripe count 16 is more than 10.0 MiB chunk files fill at 1.00 MiB"
         " stripes: it spans 10, and 6 empty OST object(s)", "lfs setstripe -c 8 -S 1M"),
        (7, "WARN", "span up to 7 OST(s) at 1.00 MiB stripes (stripe count 7), fewer than"
         " min(nodes, OSTs) = 8", "lfs setstripe -c 8 -S 1M"),
        (1, "WARN", "10.0 MiB chunk files span 1 OST(s)", "lfs setstripe -c 8 -S 1M"),
    ],
)  # fmt: skip
def test_the_stripe_count_is_judged_by_what_a_chunk_file_fills(
    stripe: int, status: str, said: str, fix: str
) -> None:
    """Llama 3.1 70B at tp 8 writes 10 MiB chunk files (256 x 327,680 B / 8): at 1 MiB stripes
    one spans at most 10 OSTs, so 16 stripes leave 6 empty; its 8 nodes share prefixes (40%),
    so the AWS article's "stripe count >= nodes" holds it too (plan/striping.py, issue 49)."""
    finding = by_id(check(PASS, fsx={"stripe_count": stripe}))["fsx.stripe"]
    assert finding.status == status
    assert said in finding.message
    assert finding.fix.startswith(fix)
    assert "chunk files of 10,485,760 B" in finding.evidence
    assert "stripe count >= nodes, for files every node reads at once" in finding.evidence


def test_without_shared_prefixes_one_stripe_serves_a_chunk_file() -> None:
    """No prefix shared across nodes: each chunk file is read by the node restoring its
    session, and Lustre's guidance (1 to 4 stripes under 1 GiB) is the rule, not the
    article's line."""
    private = dataclasses.replace(PASS.plan.workload, shared_prefix=0.0)
    finding = by_id(check(PASS, workload=private, fsx={"stripe_count": 1}))["fsx.stripe"]
    assert finding.status == "PASS"
    assert "not here: no prefix is shared" in finding.evidence


def test_odirect_off_warns_with_the_lmcache_settings() -> None:
    off = by_id(check(PASS, odirect=False))["client.odirect"]
    assert (off.status, off.message) == ("WARN", "O_DIRECT off: KV goes through the page cache")
    assert off.fix == (
        "odirect: true (LMCache: save_chunk_meta false + fs_connector_use_odirect true)"
    )
    assert by_id(check(PASS))["client.odirect"].message == "O_DIRECT on"


@pytest.mark.parametrize(
    ("threads", "status", "message"),
    [
        (MIN_IO_THREADS, "PASS", "32 I/O threads per node"),
        (64, "PASS", "64 I/O threads per node"),
        (31, "WARN", "31 I/O threads per node, below 32"),
    ],
)
def test_io_threads_need_32_per_node(threads: int, status: str, message: str) -> None:
    finding = by_id(check(PASS, io_threads=threads))["client.io_threads"]
    assert (finding.status, finding.message) == (status, message)


def test_undeclared_client_and_layout_settings_skip() -> None:
    found = by_id(
        check(
            PASS,
            fsx={"mount_options": None, "stripe_count": None},
            odirect=None,
            io_threads=None,
        )
    )
    assert [(found[i].status, found[i].message) for i in ORDER[10:14]] == [
        ("SKIP", "mount_options not declared"),
        ("SKIP", "stripe_count of the KV folder not declared"),
        ("SKIP", "odirect not declared"),
        ("SKIP", "io_threads not declared"),
    ]


# --- plan.bandwidth ---------------------------------------------------------------------------


def test_a_file_system_faster_than_the_ena_link_passes() -> None:
    data = {
        "model": "llama-3.1-8b",
        "hardware": "p5en",
        "sessions": 10,
        "contexts": "128k",
        "t3_path": "ena",
        "fsx": {"storage_capacity_gib": 48_000},
    }
    finding = by_id(check_plan(*from_mapping(data)[:3]))["plan.bandwidth"]
    assert finding.status == "PASS"
    assert finding.message == "the file system's throughput covers the client link"
    # one node: 46.9 GB/s of file system against ENA's 100 Gbps = 12.5 GB/s; Llama 3.1 8B at
    # 128,000 tokens is 131,072 x 128,000 = 16.8 GB: 12.5 / 16.78 = 0.745 sessions/s
    assert finding.evidence == (
        "file system 46.9 GB/s per node, ena link 12.5 GB/s: 0.745 cache-hit sessions/s per"
        " node at the longest context"
    )


def test_fan_in_is_priced_at_the_longest_context_of_the_mix() -> None:
    mix = dataclasses.replace(PASS.plan.workload, contexts={8000: 0.5, 128_000: 0.5})
    found = by_id(check(PASS, workload=mix))
    assert found["plan.bandwidth"].message.endswith("instead of 2.09")  # 87.5 GB/s / 41.9 GB
    mean = (8000 * 327_680 + LLAMA_70B_128K) // 2
    assert f"x {format_bytes(mean)} mean" in found["plan.capacity"].evidence


def test_an_mla_session_on_t3_is_one_copy_not_one_per_rank() -> None:
    data = {
        "model": "deepseek-r1",
        "hardware": "p5en",
        "nodes": 8,
        "sessions": 400,
        "contexts": "128k",
        "fsx": {"storage_capacity_gib": 48_000, "efa_enabled": True},
    }
    finding = by_id(check_plan(*from_mapping(data)[:3]))["plan.bandwidth"]
    # DeepSeek-R1: (512 + 64) x 2 B x 61 = 70,272 B/token, held on all 8 ranks in HBM but
    # saved once to T3 (LMCache): 128,000 x 70,272 = 8.99 GB; 87.5 GB/s / 8.99 GB = 9.73
    assert finding.message.endswith("fan-in is 0.651 sessions/s per node instead of 9.73")


# --- measured.bandwidth and measured.doctor ---------------------------------------------------


def test_a_bench_measurement_wins_over_a_stated_figure() -> None:
    stated = Measured(t3_read_gbytes_per_s=0.01)
    assert by_id(check(PASS, measured=stated))["measured.bandwidth"].status == "PASS"
    alone = by_id(check(PASS, Evidence(), measured=stated))["measured.bandwidth"]
    assert alone.status == "FAIL"
    assert alone.message == "measured T3 reads fall short of the plan"
    assert alone.evidence == "measured 0.01 GB/s, plan 5.86 GB/s per node, tolerance 20%"
    assert alone.fix.startswith("run kvtool doctor on the nodes")


def test_only_a_t3_measurement_counts() -> None:
    t2_only = Evidence(measured=(MeasuredTier("T2", 416e9, "pinned h2d x 8"),))
    found = by_id(check(PASS, t2_only, measured=Measured()))["measured.bandwidth"]
    assert found.status == "SKIP"
    assert found.message == (
        "no measured T3 bandwidth (measured.bench or measured.t3_read_gbytes_per_s)"
    )


def test_the_tolerance_is_a_floor_below_the_per_node_share() -> None:
    # tolerance 0.5: floor = 5,859,375,000 x 0.5 = 2,929,687,500 B/s = 2.9296875 GB/s exactly
    at_floor = Measured(t3_read_gbytes_per_s=2.9296875)
    assert (
        by_id(check(PASS, Evidence(), measured=at_floor, tolerance=0.5))[
            "measured.bandwidth"
        ].status
        == "PASS"
    )
    below = Measured(t3_read_gbytes_per_s=2.929)
    assert (
        by_id(check(PASS, Evidence(), measured=below, tolerance=0.5))["measured.bandwidth"].status
        == "FAIL"
    )
    # a node measuring more than its share is fine
    above = Measured(t3_read_gbytes_per_s=20.0)
    assert (
        by_id(check(PASS, Evidence(), measured=above, tolerance=0.0))["measured.bandwidth"].status
        == "PASS"
    )


@settings(max_examples=40, deadline=None)
@given(
    gbytes=st.floats(0.001, 20.0, allow_nan=False),
    tolerance=st.floats(0.0, 0.95, allow_nan=False),
)
def test_measured_bandwidth_passes_exactly_at_or_above_the_floor(
    gbytes: float, tolerance: float
) -> None:
    finding = by_id(
        check(
            PASS,
            Evidence(),
            measured=Measured(t3_read_gbytes_per_s=gbytes),
            tolerance=tolerance,
        )
    )["measured.bandwidth"]
    assert finding.status == ("PASS" if gbytes * 1e9 >= PASS_SHARE * (1 - tolerance) else "FAIL")
    assert f"tolerance {tolerance:.0%}" in finding.evidence


def test_doctor_reports_fail_the_plan_when_any_node_fails() -> None:
    declared = Measured(doctor=("doctor-node-a.json", "doctor-node-b.json"))
    both = Evidence(doctor=(DOCTOR_OK, DOCTOR_FAILING))
    found = by_id(check(PASS, both, measured=declared))["measured.doctor"]
    assert (found.status, found.message) == ("FAIL", "1 node(s) fail kvtool doctor")
    assert found.evidence == "node-b: mount.flock"
    assert found.fix == "fix what kvtool doctor prints on those nodes"
    ok = by_id(check(PASS, Evidence(doctor=(DOCTOR_OK,)), measured=declared))["measured.doctor"]
    assert (ok.status, ok.message) == ("PASS", "1 doctor report(s) without failures")
    none = by_id(check(PASS, measured=Measured()))["measured.doctor"]
    assert (none.status, none.message) == ("SKIP", "no kvtool doctor reports given")


# --- helpers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deployment", "profile"),
    [
        ("PERSISTENT_2", "fsx-lustre-persistent2"),
        ("PERSISTENT_1", "fsx-lustre-persistent1"),
        ("SCRATCH_2", "fsx-lustre-scratch2"),
        ("SCRATCH_1", "fsx-lustre-persistent2"),  # no bundled profile
        (None, "fsx-lustre-persistent2"),
    ],
)
def test_the_t3_profile_follows_the_declared_deployment_type(
    deployment: str | None, profile: str
) -> None:
    assert t3_profile_for(FsxSettings(deployment_type=deployment)) == profile
    assert load_storage_profile(profile).tier == "t3"


def test_no_file_system_is_planned_as_persistent_2() -> None:
    assert t3_profile_for(None) == "fsx-lustre-persistent2"


def test_declared_facts_are_the_plans_settings_with_no_association_as_none() -> None:
    fsx = FAIL.plan.fsx
    assert fsx is not None
    assert declared_facts(fsx) == FsxFacts(
        deployment_type="SCRATCH_2",
        storage_type="SSD",
        storage_capacity_gib=2400,
        per_unit_storage_throughput=None,
        efa_enabled=False,
        data_compression_type="LZ4",
        same_az=False,
        s3_association=False,  # the template has no AWS::FSx::DataRepositoryAssociation
        source=fsx.source,
    )
    assert declared_facts(fsx).file_system_id is None  # declared: fixes are code, not CLI
