"""The doctor's AWS checks: the file system as FSx describes it (the settings rules shared with
``kvtool check``), its data repository, and the security group EFA needs. Pure, as every check
(``doctor.checks`` says how they are written)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from kvtool.doctor.checks import (
    DoctorOptions,
    _f,
    _grade,
)
from kvtool.errors import KvtoolError
from kvtool.findings import Finding, Status
from kvtool.plan.fsx_rules import TCP_CLIENT_GBPS, FsxFacts, fsx_settings
from kvtool.probe.facts import NodeFacts

# --- AWS ----------------------------------------------------------------------------------------


def check_aws(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """The FSx checklist with AWS access: deployment and storage type, compression, EFA, same
    AZ, the security group's self-rule, the S3 data repository association, lifecycle and
    throughput for the node count."""
    aws = facts.aws
    if not aws.asked:
        return [_f("aws.file_system", "SKIP", "AWS not asked (--no-aws)")]
    fs = aws.file_system
    if fs is None:
        return [
            _f(
                "aws.file_system",
                "SKIP",
                "no FSx description: " + aws.errors.get("fsx", "unknown reason"),
            )
        ]
    facts_ = described_facts(aws, fs)
    efa = bool(facts_.efa_enabled)
    settings = fsx_settings(facts_, wants_efa=None)
    out = [_lifecycle(fs), *settings[:5]]
    out.append(_security_group(aws, efa))
    out.append(settings[5])
    out.append(kv_export(facts))
    capacity = facts_.storage_capacity_gib or 0
    per_tib = facts_.per_unit_storage_throughput or 0
    gbytes_s = facts_.read_gbytes_per_s or 0.0
    if per_tib:
        share = gbytes_s / max(o.nodes, 1)
        link = (700 if efa else TCP_CLIENT_GBPS) / 8
        evidence = (
            f"{capacity:,} GiB x {per_tib} MB/s/TiB = {gbytes_s:,.1f} GB/s for {o.nodes} node(s)"
        )
        status: Status = "PASS" if share >= link else "WARN"
        out.append(
            _f(
                "aws.throughput",
                status,
                f"{share:,.1f} GB/s per node against a"
                f" {link:,.1f} GB/s client link"
                + ("" if status == "PASS" else ": the file system bounds T3 reads"),
                evidence,
                ""
                if status == "PASS"
                else "grow the file system or raise its"
                " throughput tier (kvtool plan ... names a size)",
            )
        )
    return out


def kv_export(facts: NodeFacts) -> Finding:
    """Which data repository association holds the KV folder, and its export policy: what
    ``gc --release`` can release (only files exported to S3) and whether they get there by
    themselves (auto-export) or by an export task. A report, PASS; WARN when no association
    holds the folder (nothing there reaches S3: --release releases nothing)."""
    from kvtool.folders.fsx_task import file_system_path

    assocs = facts.aws.associations
    if assocs is None:
        why = facts.aws.errors.get("dra", "not read")
        return _f("aws.kv_export", "SKIP", f"data repository associations not read: {why}")
    if facts.mount is None or facts.mount.fstype != "lustre":
        return _f("aws.kv_export", "SKIP", f"{facts.path} is not on the Lustre mount")
    real = str(facts.path_info.get("realpath") or facts.path)
    try:
        path = "/" + file_system_path(Path(real), facts.mount).strip("/")
    except KvtoolError as exc:
        return _f("aws.kv_export", "SKIP", str(exc))
    inside = path.rstrip("/") + "/"
    holding = [
        a for a in assocs if inside.startswith((a.get("FileSystemPath") or "/").rstrip("/") + "/")
    ]
    if not holding:
        return _f(
            "aws.kv_export",
            "WARN",
            f"no data repository association holds the KV folder ({path} on the file system):"
            " its files never reach S3, so gc --release has nothing to release there",
            fix="gc removes instead; or link the folder to S3 with automatic export, as"
            " kvtool plan --emit does: " + _association_fix(facts, path),
        )
    dra = max(holding, key=lambda a: len(a.get("FileSystemPath") or ""))
    events = ((dra.get("S3") or {}).get("AutoExportPolicy") or {}).get("Events") or []
    policy = (
        f"auto-export on ({', '.join(events)})"
        if events
        else "auto-export off: gc --release frees only what an export task put in S3"
        " (create-data-repository-task --type EXPORT_TO_REPOSITORY)"
    )
    return _f(
        "aws.kv_export",
        "PASS",
        f"KV folder {path}: {dra.get('AssociationId', '?')} ->"
        f" {dra.get('DataRepositoryPath', '?')}, {policy}",
        f"aws fsx describe-data-repository-associations: {dra.get('FileSystemPath', '?')} <->"
        f" {dra.get('DataRepositoryPath', '?')} ({len(assocs)} association(s))",
    )


def _association_fix(facts: NodeFacts, path: str) -> str:
    """The DRA line ``--emit`` prints (``plan/fsx_rules.py``'s ``create_association``), on one
    line for the KV folder at ``path`` on the file system: the file system's id where FSx
    described it, else ``$FSX_ID``; the bucket, which doctor cannot know, ``$BUCKET``."""
    from kvtool.plan.fsx_rules import FILL_IN, create_association, s3_prefix

    fs_id = (facts.aws.file_system or {}).get("FileSystemId")
    unknown = {"BUCKET": FILL_IN["BUCKET"][1]}
    if not fs_id:
        unknown = {"FSX_ID": FILL_IN["FSX_ID"][1], **unknown}
    line = " ".join(
        create_association(
            file_system_id=shlex.quote(fs_id) if fs_id else '"$FSX_ID"',
            path=shlex.quote(path),
            prefix=s3_prefix(path),
        )
    )
    return "set " + " and ".join(f"{k} to {what}" for k, what in unknown.items()) + ", then " + line


def _lifecycle(fs: dict[str, Any]) -> Finding:
    state = fs.get("Lifecycle", "?")
    status = _grade(state, {"AVAILABLE": "PASS", "UPDATING": "WARN"}, "FAIL")
    return _f("aws.lifecycle", status, f"file system {fs.get('FileSystemId')} is {state}")


def _security_group(aws: Any, efa: bool) -> Finding:
    groups = aws.security_groups
    if groups is None:
        return _f(
            "aws.security_group",
            "SKIP",
            "security groups not read: "
            + aws.errors.get("security_groups", "no network interface described"),
        )
    for group in groups:
        own = group.get("GroupId")
        for rule in group.get("IpPermissions", []):
            selves = {p.get("GroupId") for p in rule.get("UserIdGroupPairs", [])}
            if own in selves and rule.get("IpProtocol") == "-1":
                return _f("aws.security_group", "PASS", f"{own} allows all traffic from itself")
    ids = ", ".join(g.get("GroupId", "?") for g in groups)
    first = groups[0].get("GroupId", "sg-...") if groups else "sg-..."
    return _f(
        "aws.security_group",
        "FAIL" if efa else "WARN",
        f"no group on the file system"
        f" ({ids}) allows all traffic from itself"
        + (": EFA needs it" if efa else " (TCP needs 988 and 1018-1023)"),
        fix=f"aws ec2 authorize-security-group-ingress --group-id {first}"
        f" --ip-permissions IpProtocol=-1,UserIdGroupPairs=[{{GroupId={first}}}]",
    )


def described_facts(aws: Any, fs: dict[str, Any]) -> FsxFacts:
    """The FSx API's description of the mounted file system (and the AZ ids and data
    repository associations read beside it) as the settings checklist's facts."""
    lustre: dict[str, Any] = fs.get("LustreConfiguration") or {}
    unknown: dict[str, str] = {}
    same_az = None
    evidence = ""
    if aws.availability_zone_id is None or aws.subnet_az_id is None:
        why = aws.errors.get("imds") or aws.errors.get("subnet") or "AZ not known"
        unknown["same_az"] = f"cannot compare Availability Zones: {why}"
    else:
        same_az = aws.availability_zone_id == aws.subnet_az_id
        evidence = f"instance {aws.availability_zone_id}, file system {aws.subnet_az_id}"
    assocs = aws.associations
    if assocs is None:
        unknown["s3_association"] = "data repository associations not read: " + aws.errors.get(
            "dra", "unknown"
        )
    return FsxFacts(
        deployment_type=lustre.get("DeploymentType"),
        storage_type=fs.get("StorageType"),
        storage_capacity_gib=int(fs.get("StorageCapacity") or 0),
        per_unit_storage_throughput=int(lustre.get("PerUnitStorageThroughput") or 0) or None,
        efa_enabled=bool(lustre.get("EfaEnabled")),
        data_compression_type=lustre.get("DataCompressionType", "NONE"),
        same_az=same_az,
        same_az_evidence=evidence,
        s3_association=None if assocs is None else bool(assocs),
        broken_associations=tuple(
            a.get("AssociationId", "?")
            for a in assocs or ()
            if a.get("Lifecycle") in ("MISCONFIGURED", "FAILED")
        ),
        auto_export_paths=tuple(
            a.get("FileSystemPath", "?")
            for a in assocs or ()
            if (a.get("S3") or {}).get("AutoExportPolicy", {}).get("Events")
        ),
        auto_export=None
        if assocs is None
        else any((a.get("S3") or {}).get("AutoExportPolicy", {}).get("Events") for a in assocs),
        file_system_id=fs.get("FileSystemId", "?"),
        source=f"aws fsx describe-file-systems {fs.get('FileSystemId', '')}".strip(),
        unknown=unknown,
    )
