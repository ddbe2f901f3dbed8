"""The AWS article's FSx for Lustre settings checklist over typed facts: one id, status and
threshold per setting, whether the facts were declared (a plan, Terraform, CloudFormation) or
described live (the FSx API, with a file system id)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.findings import Finding
from kvtool.plan.fsx_rules import (
    EFA_RECOMMENDED_GBYTES_S,
    TCP_CLIENT_GBPS,
    FsxFacts,
    T4Release,
    fsx_settings,
)
from tests.aws_cli import aws_request, validate

IDS = [
    "fsx.deployment",
    "fsx.storage_type",
    "fsx.compression",
    "fsx.efa",
    "fsx.same_az",
    "fsx.s3_association",
]
FS_ID = "fs-0123456789abcdef0"
# examples/check/terraform-plan.json: PERSISTENT_2, 48,000 GiB at 1,000 MB/s/TiB, EFA, no
# compression, an S3 association; the node in the same AZ
GOOD = FsxFacts(
    deployment_type="PERSISTENT_2",
    storage_type="SSD",
    storage_capacity_gib=48_000,
    per_unit_storage_throughput=1000,
    efa_enabled=True,
    data_compression_type="NONE",
    same_az=True,
    s3_association=True,
    source="terraform-plan.json (module.kv_tier.aws_fsx_lustre_file_system.kv)",
)
# examples/check/cloudformation-fsx.yaml: SCRATCH_2, 2,400 GiB, LZ4, no EFA, no association
SCRATCH = FsxFacts(
    deployment_type="SCRATCH_2",
    storage_type="SSD",
    storage_capacity_gib=2400,
    efa_enabled=False,
    data_compression_type="LZ4",
    s3_association=False,
    source="cloudformation-fsx.yaml (KvFileSystem)",
)


def by_id(facts: FsxFacts, *, wants_efa: bool | None = True) -> dict[str, Finding]:
    return {f.id: f for f in fsx_settings(facts, wants_efa=wants_efa)}


def test_every_rule_in_order_and_all_in_the_fsx_area() -> None:
    findings = fsx_settings(GOOD, wants_efa=True)
    assert [f.id for f in findings] == IDS
    assert {f.area for f in findings} == {"fsx"}
    assert [f.status for f in findings] == ["PASS"] * 6
    assert all(f.fix == "" for f in findings)


def test_read_rate_is_capacity_in_tib_times_per_unit_throughput() -> None:
    # 48,000 GiB / 1,024 = 46.875 TiB x 1,000 MB/s/TiB = 46,875 MB/s = 46.875 GB/s
    assert GOOD.read_gbytes_per_s == pytest.approx(46.875)
    # 2,400 GiB at 125 MB/s/TiB: 2.34375 TiB x 125 = 292.97 MB/s
    assert GOOD._replace(
        storage_capacity_gib=2400, per_unit_storage_throughput=125
    ).read_gbytes_per_s == pytest.approx(0.29296875)
    assert GOOD._replace(storage_capacity_gib=None).read_gbytes_per_s is None
    assert GOOD._replace(per_unit_storage_throughput=None).read_gbytes_per_s is None
    assert GOOD._replace(per_unit_storage_throughput=0).read_gbytes_per_s is None


# --- fsx.deployment ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "words"),
    [
        ("PERSISTENT_2", "PASS", "deployment type PERSISTENT_2"),
        ("PERSISTENT_1", "WARN", "no EFA or GDS (PERSISTENT_2 only)"),
        ("SCRATCH_2", "FAIL", "SCRATCH data is not replicated and is lost if a file server fails"),
        ("SCRATCH_1", "FAIL", "SCRATCH data is not replicated"),
    ],
)
def test_deployment_type_grades(kind: str, status: str, words: str) -> None:
    finding = by_id(GOOD._replace(deployment_type=kind))["fsx.deployment"]
    assert finding.status == status
    assert words in finding.message
    if status != "PASS":
        assert finding.evidence == GOOD.source
        assert finding.fix.startswith("deployment_type = PERSISTENT_2")


def test_a_live_file_system_cannot_change_its_deployment_type_so_the_fix_says_create() -> None:
    finding = by_id(SCRATCH._replace(file_system_id=FS_ID))["fsx.deployment"]
    assert finding.status == "FAIL"
    assert finding.fix == (
        "create a PERSISTENT_2 file system (the type cannot be changed) and move the KV folder"
        " to it"
    )


# --- fsx.storage_type -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status"), [("SSD", "PASS"), ("INTELLIGENT_TIERING", "WARN"), ("HDD", "FAIL")]
)
def test_storage_type_grades(kind: str, status: str) -> None:
    finding = by_id(GOOD._replace(storage_type=kind))["fsx.storage_type"]
    assert finding.status == status
    assert kind in finding.message
    if status != "PASS":
        assert "KV reads need SSD latency" in finding.message
        assert finding.fix == "storage_type = SSD"
        live = by_id(GOOD._replace(storage_type=kind, file_system_id=FS_ID))["fsx.storage_type"]
        assert live.fix == "create an SSD file system (the storage type cannot be changed)"


# --- fsx.compression --------------------------------------------------------------------------


def test_compression_off_passes_and_lz4_warns_with_a_fix_for_code_or_the_cli() -> None:
    assert by_id(GOOD)["fsx.compression"].message == "data compression off"
    declared = by_id(SCRATCH)["fsx.compression"]
    assert declared.status == "WARN"
    assert "LZ4: KV tensors compress poorly and cost server CPU" in declared.message
    assert declared.fix == "data_compression_type = NONE"
    live = by_id(SCRATCH._replace(file_system_id=FS_ID))["fsx.compression"]
    assert live.fix == (
        f"aws fsx update-file-system --file-system-id {FS_ID}"
        " --lustre-configuration DataCompressionType=NONE"
    )


# --- fsx.efa ----------------------------------------------------------------------------------


def test_efa_disabled_fails_when_the_nodes_read_over_efa_and_names_the_tcp_ceiling() -> None:
    finding = by_id(GOOD._replace(efa_enabled=False), wants_efa=True)["fsx.efa"]
    assert finding.status == "FAIL"
    assert finding.message == (
        "the nodes read T3 over EFA but the file system is not EFA-enabled:"
        f" {TCP_CLIENT_GBPS} Gbps per client over TCP"
    )
    assert finding.fix.startswith("efa_enabled = true (set at creation; needs PERSISTENT_2")


def test_a_scratch_file_system_read_over_efa_is_told_it_cannot_be_efa_enabled() -> None:
    finding = by_id(SCRATCH, wants_efa=True)["fsx.efa"]
    assert finding.status == "FAIL"
    assert "(SCRATCH_2 cannot be: EFA needs PERSISTENT_2)" in finding.message
    assert finding.evidence == SCRATCH.source
    # an undeclared type is not accused of anything
    unknown = by_id(SCRATCH._replace(deployment_type=None), wants_efa=True)["fsx.efa"]
    assert "cannot be" not in unknown.message


@pytest.mark.parametrize(
    ("gib", "status"),
    [
        (48_000, "WARN"),  # 46.9 GB/s: above AWS's 10 GB/s
        (12_000, "WARN"),  # 11.7 GB/s
        (10_240, "PASS"),  # exactly 10 TiB x 1,000 MB/s/TiB = 10.0 GB/s: not above
        (9_600, "PASS"),  # 9.4 GB/s
    ],
)
def test_efa_disabled_over_tcp_warns_only_above_10_gb_per_s(gib: int, status: str) -> None:
    facts = GOOD._replace(efa_enabled=False, storage_capacity_gib=gib)
    finding = by_id(facts, wants_efa=False)["fsx.efa"]
    assert finding.status == status
    rate = gib / 1024 * 1000 / 1000
    assert f"({rate:,.1f} GB/s file system)" in finding.message
    big = status == "WARN"
    assert (f"AWS recommends EFA above {EFA_RECOMMENDED_GBYTES_S:g} GB/s" in finding.message) is big
    assert bool(finding.fix) is big
    assert finding.evidence == (GOOD.source if big else "")


def test_efa_disabled_without_a_known_rate_passes_over_tcp() -> None:
    finding = by_id(SCRATCH._replace(deployment_type="PERSISTENT_2"), wants_efa=False)["fsx.efa"]
    assert finding.status == "PASS"  # 2,400 GiB but no per-unit throughput: no rate to judge
    assert (
        finding.message == f"EFA not enabled: clients are held to {TCP_CLIENT_GBPS} Gbps over TCP"
    )


def test_a_live_node_not_known_to_want_efa_never_fails_efa() -> None:
    facts = GOOD._replace(efa_enabled=False, storage_capacity_gib=2400)
    assert by_id(facts, wants_efa=None)["fsx.efa"].status == "PASS"
    assert by_id(facts, wants_efa=True)["fsx.efa"].status == "FAIL"


# --- fsx.same_az ------------------------------------------------------------------------------


def test_another_az_fails_over_efa_and_warns_over_tcp() -> None:
    facts = GOOD._replace(same_az=False, same_az_evidence="instance use1-az4, file system use1-az6")
    over_efa = by_id(facts, wants_efa=True)["fsx.same_az"]
    assert over_efa.status == "FAIL"
    assert over_efa.message.endswith(": EFA does not work across AZs")
    assert over_efa.evidence == "instance use1-az4, file system use1-az6"
    assert over_efa.fix == "run the serving nodes in the file system's AZ (or create one in theirs)"
    over_tcp = by_id(facts, wants_efa=False)["fsx.same_az"]
    assert over_tcp.status == "WARN"
    assert over_tcp.message.endswith(": cross-AZ latency and cost")


def test_a_live_node_is_taken_to_read_over_efa_when_the_file_system_has_it() -> None:
    facts = GOOD._replace(same_az=False, file_system_id=FS_ID)
    assert by_id(facts, wants_efa=None)["fsx.same_az"].status == "FAIL"
    assert by_id(facts._replace(efa_enabled=False), wants_efa=None)["fsx.same_az"].status == "WARN"


def test_same_az_passes_with_the_evidence_it_was_compared_on() -> None:
    facts = GOOD._replace(same_az_evidence="instance use1-az4, file system use1-az4")
    finding = by_id(facts)["fsx.same_az"]
    assert (finding.status, finding.evidence) == ("PASS", "instance use1-az4, file system use1-az4")


# --- fsx.s3_association -----------------------------------------------------------------------


def test_no_association_warns_with_infrastructure_code_or_a_cli_command() -> None:
    declared = by_id(SCRATCH)["fsx.s3_association"]
    assert declared.status == "WARN"
    assert "for export to T4" in declared.message
    assert declared.fix == (
        "aws_fsx_data_repository_association (Terraform) or"
        " AWS::FSx::DataRepositoryAssociation, export on demand"
    )
    live = by_id(SCRATCH._replace(file_system_id=FS_ID))["fsx.s3_association"]
    assert f"aws fsx create-data-repository-association --file-system-id {FS_ID}" in live.fix
    assert live.fix.startswith("set FSX_PATH to the KV folder's path on the file system")
    assert "<bucket>" not in live.fix  # the same line --emit and doctor print, variables set first
    # the command as the AWS CLI reads it, the variables filled in, held to FSx's model
    line = live.fix[live.fix.index("aws fsx create") :]
    line = line.replace('"$FSX_PATH"', "/kvcache").replace("$BUCKET", "kv-export-bucket")
    operation, params = aws_request(line)
    validate(operation, params)
    assert (operation, params["FileSystemPath"]) == ("CreateDataRepositoryAssociation", "/kvcache")
    assert params["S3"]["AutoExportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]


def test_a_broken_association_fails_before_auto_export_is_looked_at() -> None:
    facts = GOOD._replace(
        broken_associations=("dra-0a1b", "dra-2c3d"), auto_export_paths=("/kvcache",)
    )
    finding = by_id(facts)["fsx.s3_association"]
    assert finding.status == "FAIL"
    assert finding.message == "data repository association dra-0a1b, dra-2c3d is broken"
    assert finding.fix.startswith("recreate the association")


def association(facts: FsxFacts, t4: T4Release | None) -> Finding:
    return {f.id: f for f in fsx_settings(facts, wants_efa=True, t4=t4)}["fsx.s3_association"]


RELEASES = T4Release(True, "358 released to S3", "a session written is 589,824 chunk files")
NOTHING = T4Release(False, "no mean_idle: the plan releases no session", "589,824 chunk files")


def test_auto_export_is_what_the_t4_path_needs_where_the_plan_releases() -> None:
    """kvtool check, the plan releasing idle sessions through the association: PASS, the
    release and the export PUTs a written session costs as evidence (it WARNed before, while
    plan --emit turned auto-export on for the same path)."""
    on = association(GOOD._replace(auto_export=True), RELEASES)
    assert on.status == "PASS"
    assert on.message.startswith("auto-export is on: what the plan's T4 path needs")
    assert on.evidence.startswith("358 released to S3; a session written is 589,824 chunk files")
    off = association(GOOD._replace(auto_export=False), RELEASES)
    assert off.status == "WARN"
    assert "gc --release frees only files exported to S3" in off.message
    live = association(GOOD._replace(auto_export=False, file_system_id=FS_ID), RELEASES)
    params = validate_update(live.fix)
    assert params["S3"] == {"AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}


def test_auto_export_only_costs_puts_where_nothing_is_released() -> None:
    on = association(GOOD._replace(auto_export=True), NOTHING)
    assert on.status == "WARN"
    assert "the plan releases nothing to S3: every chunk file the engine writes" in on.message
    assert on.evidence.startswith("no mean_idle: the plan releases no session; 589,824")
    assert on.fix.startswith("an AutoExportPolicy with no events on the association")
    live = association(GOOD._replace(auto_export_paths=("/kvcache",), file_system_id=FS_ID),
                       NOTHING)  # fmt: skip
    assert live.message.startswith("auto-export is on for /kvcache but the plan releases nothing")
    assert validate_update(live.fix)["S3"] == {"AutoExportPolicy": {"Events": []}}
    off = association(GOOD._replace(auto_export=False), NOTHING)
    assert off.status == "PASS"


def test_doctor_with_no_plan_says_both_cases() -> None:
    """doctor (no plan, ``t4`` None): auto-export on is what the release path needs, and only
    costs PUTs where nothing is released; the same id as check's."""
    finding = by_id(GOOD._replace(auto_export_paths=("/kvcache", "/prefix")))["fsx.s3_association"]
    assert finding.status == "PASS"
    assert finding.message.startswith("auto-export is on for /kvcache, /prefix: what the AWS")
    assert "where idle sessions are released to S3" in finding.message
    assert "where nothing is released it only costs PUTs" in finding.message
    assert association(GOOD._replace(auto_export=False), None).status == "PASS"


def validate_update(fix: str) -> dict:
    """The fix as the AWS CLI reads it, the association id filled in, held to FSx's model."""
    operation, params = aws_request(fix.replace("<id>", "dra-0123456789abcdef0"))
    assert operation == "UpdateDataRepositoryAssociation"
    validate(operation, params)
    return params


# --- what is not known ------------------------------------------------------------------------


def test_facts_not_known_skip_with_a_default_reason() -> None:
    findings = fsx_settings(FsxFacts(), wants_efa=True)
    assert [f.status for f in findings] == ["SKIP"] * 6
    assert [f.message for f in findings] == [
        "deployment type not declared",
        "storage type not declared",
        "data compression not declared",
        "efa_enabled not declared",
        "same_az not declared (kvtool doctor checks it live)",
        "s3_association not declared",
    ]


def test_facts_not_known_skip_with_the_reason_given_in_unknown() -> None:
    reasons = {
        "deployment_type": "describe-file-systems was denied",
        "storage_type": "describe-file-systems was denied (storage)",
        "data_compression_type": "describe-file-systems was denied (compression)",
        "efa_enabled": "describe-file-systems was denied (efa)",
        "same_az": "cannot compare Availability Zones: IMDS timed out",
        "s3_association": "data repository associations not read: AccessDenied",
    }
    findings = fsx_settings(FsxFacts(unknown=reasons), wants_efa=None)
    assert [f.message for f in findings] == list(reasons.values())
    assert {f.status for f in findings} == {"SKIP"}


@given(
    deployment=st.sampled_from([None, "PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2", "SCRATCH_1"]),
    storage=st.sampled_from([None, "SSD", "HDD", "INTELLIGENT_TIERING"]),
    compression=st.sampled_from([None, "NONE", "LZ4"]),
    efa=st.sampled_from([None, True, False]),
    same_az=st.sampled_from([None, True, False]),
    s3=st.sampled_from([None, True, False]),
    gib=st.sampled_from([None, 1200, 2400, 48_000]),
    throughput=st.sampled_from([None, 125, 1000]),
    wants_efa=st.sampled_from([None, True, False]),
    live=st.booleans(),
)
def test_every_fact_combination_gives_six_findings_and_a_fix_for_every_failure(
    deployment: str | None,
    storage: str | None,
    compression: str | None,
    efa: bool | None,
    same_az: bool | None,
    s3: bool | None,
    gib: int | None,
    throughput: int | None,
    wants_efa: bool | None,
    live: bool,
) -> None:
    facts = FsxFacts(
        deployment_type=deployment,
        storage_type=storage,
        storage_capacity_gib=gib,
        per_unit_storage_throughput=throughput,
        efa_enabled=efa,
        data_compression_type=compression,
        same_az=same_az,
        s3_association=s3,
        file_system_id=FS_ID if live else None,
    )
    findings = fsx_settings(facts, wants_efa=wants_efa)
    assert [f.id for f in findings] == IDS
    for finding, fact in zip(
        findings, (deployment, storage, compression, efa, same_az, s3), strict=True
    ):
        assert (finding.status == "SKIP") is (fact is None), finding
        if finding.status == "FAIL":
            assert finding.fix, finding
        if finding.status == "PASS":
            assert not finding.fix, finding
