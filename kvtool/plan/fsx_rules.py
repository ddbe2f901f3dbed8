"""The AWS article's FSx for Lustre settings checklist, once, over typed facts. Pure.

``kvtool check`` grades what the infrastructure code declares (a plan's ``fsx:``, a Terraform
plan, a CloudFormation template); ``kvtool doctor`` grades what the FSx API describes for the
mounted file system. Both turn their source into ``FsxFacts`` and call ``fsx_settings``, so a
setting gets the same id, status and threshold from either:

* ``fsx.deployment``: PERSISTENT_2 PASS; PERSISTENT_1 WARN (no EFA or GDS); SCRATCH FAIL (not
  replicated: data is lost when a file server fails).
* ``fsx.storage_type``: SSD PASS; INTELLIGENT_TIERING WARN; HDD FAIL.
* ``fsx.compression``: NONE PASS; LZ4 WARN (KV tensors compress poorly and cost server CPU).
* ``fsx.efa``: EFA-enabled PASS; not enabled FAIL when the clients mean to read over EFA, WARN
  when the file system is above 10 GB/s (AWS recommends EFA there), else PASS.
* ``fsx.same_az``: the nodes' Availability Zone; another one FAIL over EFA (EFA does not cross
  AZs), WARN over TCP (latency and data-transfer cost).
* ``fsx.s3_association``: an S3 data repository association for export to T4 (WARN without);
  a broken one FAIL. Its automatic export is judged by the plan's T4 (``T4Release``): where the
  plan releases idle sessions to S3 through the association (the AWS article's T4 path,
  ``plan/release.py``), auto-export is what that path needs (PASS; off WARN: gc --release frees
  only exported files); where nothing is released, auto-export only costs S3 PUTs, one per chunk
  file written (WARN). Without a plan (doctor) the finding says both cases (PASS).

A fact that is None is not known: SKIP, with ``unknown[key]`` as the reason where one is given.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from typing import NamedTuple

from kvtool.findings import Finding, Status

EFA_RECOMMENDED_GBYTES_S = 10.0  # FSx User Guide: EFA for file systems above 10 GB/s
TCP_CLIENT_GBPS = 100  # FSx for Lustre per-client ceiling over ENA/TCP
# the DRA's automatic export the article's T4 path needs (plan/release.py emits it): every
# file the engine writes, changes or deletes reaches the bucket (FSx's EventType enum)
AUTO_EXPORT = "AutoExportPolicy={Events=[NEW,CHANGED,DELETED]}"


FILL_IN = {
    "FSX_ID": ("fs-...", "the file system's id (aws fsx describe-file-systems)"),
    "BUCKET": ("...", "an S3 general purpose bucket in the file system's Region"),
}


def s3_prefix(folder: str) -> str:
    """The bucket prefix for a KV folder: its name, or ``kvcache`` where the name is not a
    plain S3 key part."""
    name = posixpath.basename(posixpath.normpath(folder))
    return name if re.fullmatch(r"[A-Za-z0-9._-]+", name) else "kvcache"


def create_association(*, file_system_id: str, path: str, prefix: str) -> tuple[str, str, str]:
    """``aws fsx create-data-repository-association`` with the T4 path's automatic export, as
    three pieces of shell text (``--emit`` puts them on three lines, doctor's fix on one).
    ``file_system_id`` and ``path`` (the folder from the file system's root) are shell text
    already: a quoted value, or a variable in double quotes; the bucket is always ``$BUCKET``
    (kvtool never knows it), the prefix ``s3_prefix``'s."""
    return (
        f"aws fsx create-data-repository-association --file-system-id {file_system_id}",
        f'--file-system-path {path} --data-repository-path "s3://$BUCKET/{prefix}/"',
        f"--s3 {shlex.quote(AUTO_EXPORT)}",
    )


class FsxFacts(NamedTuple):
    """An FSx for Lustre file system's settings, declared or described; None: not known.
    ``file_system_id`` is set for a live file system (fixes are then AWS CLI commands, else
    infrastructure-code keys); ``source`` is where the facts came from, for evidence."""

    deployment_type: str | None = None
    storage_type: str | None = None
    storage_capacity_gib: int | None = None
    per_unit_storage_throughput: int | None = None
    efa_enabled: bool | None = None
    data_compression_type: str | None = None
    same_az: bool | None = None
    same_az_evidence: str = ""
    s3_association: bool | None = None
    broken_associations: tuple[str, ...] = ()
    auto_export_paths: tuple[str, ...] = ()
    auto_export: bool | None = None  # an association exports automatically; None: not known
    file_system_id: str | None = None
    source: str = ""
    unknown: Mapping[str, str] = {}

    @property
    def read_gbytes_per_s(self) -> float | None:
        """Capacity x per-unit throughput, in GB/s, when both are known."""
        if self.storage_capacity_gib is None or not self.per_unit_storage_throughput:
            return None
        return self.storage_capacity_gib / 1024 * self.per_unit_storage_throughput / 1000


class T4Release(NamedTuple):
    """What a plan does with the association (``kvtool check`` knows; doctor has no plan):
    ``released`` the plan releases idle sessions to S3 through it; ``why`` the release split,
    or why nothing is released; ``puts`` the export PUTs one written session costs."""

    released: bool
    why: str
    puts: str = ""


def _f(id_: str, status: Status, message: str, evidence: str = "", fix: str = "") -> Finding:
    return Finding(id_, "fsx", status, message, evidence, fix)


def _skip(facts: FsxFacts, id_: str, key: str, what: str) -> Finding:
    return _f(id_, "SKIP", facts.unknown.get(key) or f"{what} not declared")


def fsx_settings(
    facts: FsxFacts, *, wants_efa: bool | None, t4: T4Release | None = None
) -> list[Finding]:
    """Every rule of the module docstring, in order. ``wants_efa``: the clients mean to read
    T3 over EFA (a plan's efa or efa-gds path on a node with EFA); None when that is not known
    (a live node), and then an EFA-enabled file system is taken to be read over EFA. ``t4``:
    the plan's release to S3, None without a plan."""
    over_efa = bool(facts.efa_enabled) if wants_efa is None else wants_efa
    return [
        _deployment(facts),
        _storage_type(facts),
        _compression(facts),
        _efa(facts, bool(wants_efa)),
        _same_az(facts, over_efa),
        _association(facts, t4),
    ]


def _deployment(facts: FsxFacts) -> Finding:
    kind = facts.deployment_type
    if kind is None:
        return _skip(facts, "fsx.deployment", "deployment_type", "deployment type")
    if kind == "PERSISTENT_2":
        return _f("fsx.deployment", "PASS", f"deployment type {kind}")
    warn = kind == "PERSISTENT_1"
    return _f(
        "fsx.deployment",
        "WARN" if warn else "FAIL",
        f"deployment type {kind}: "
        + (
            "no EFA or GDS (PERSISTENT_2 only)"
            if warn
            else "SCRATCH data is not replicated and is lost if a file server fails"
        ),
        facts.source,
        "create a PERSISTENT_2 file system (the type cannot be changed) and move the KV folder"
        " to it"
        if facts.file_system_id
        else "deployment_type = PERSISTENT_2 (SCRATCH is not replicated; PERSISTENT_1 has no"
        " EFA or GDS)",
    )


def _storage_type(facts: FsxFacts) -> Finding:
    kind = facts.storage_type
    if kind is None:
        return _skip(facts, "fsx.storage_type", "storage_type", "storage type")
    if kind == "SSD":
        return _f("fsx.storage_type", "PASS", f"storage type {kind}")
    return _f(
        "fsx.storage_type",
        "WARN" if kind == "INTELLIGENT_TIERING" else "FAIL",
        f"storage type {kind}: KV reads need SSD latency",
        facts.source,
        "create an SSD file system (the storage type cannot be changed)"
        if facts.file_system_id
        else "storage_type = SSD",
    )


def _compression(facts: FsxFacts) -> Finding:
    kind = facts.data_compression_type
    if kind is None:
        return _skip(facts, "fsx.compression", "data_compression_type", "data compression")
    if kind == "NONE":
        return _f("fsx.compression", "PASS", "data compression off")
    return _f(
        "fsx.compression",
        "WARN",
        f"data compression {kind}: KV tensors compress poorly and cost server CPU",
        facts.source,
        f"aws fsx update-file-system --file-system-id {facts.file_system_id}"
        " --lustre-configuration DataCompressionType=NONE"
        if facts.file_system_id
        else "data_compression_type = NONE",
    )


def _efa(facts: FsxFacts, wants_efa: bool) -> Finding:
    if facts.efa_enabled is None:
        return _skip(facts, "fsx.efa", "efa_enabled", "efa_enabled")
    if facts.efa_enabled:
        return _f("fsx.efa", "PASS", "EFA enabled on the file system")
    fix = (
        "efa_enabled = true (set at creation; needs PERSISTENT_2 and a security group that"
        " allows all traffic to itself)"
    )
    if wants_efa:
        cannot = facts.deployment_type not in (None, "PERSISTENT_2")
        return _f(
            "fsx.efa",
            "FAIL",
            "the nodes read T3 over EFA but the file system is not EFA-enabled"
            + (f" ({facts.deployment_type} cannot be: EFA needs PERSISTENT_2)" if cannot else "")
            + f": {TCP_CLIENT_GBPS} Gbps per client over TCP",
            facts.source,
            fix,
        )
    rate = facts.read_gbytes_per_s
    big = rate is not None and rate > EFA_RECOMMENDED_GBYTES_S
    shown = f" ({rate:,.1f} GB/s file system)" if rate is not None else ""
    return _f(
        "fsx.efa",
        "WARN" if big else "PASS",
        f"EFA not enabled{shown}: clients are held to {TCP_CLIENT_GBPS} Gbps over TCP"
        + (f" (AWS recommends EFA above {EFA_RECOMMENDED_GBYTES_S:g} GB/s)" if big else ""),
        facts.source if big else "",
        fix if big else "",
    )


def _same_az(facts: FsxFacts, wants_efa: bool) -> Finding:
    if facts.same_az is None:
        return _f(
            "fsx.same_az",
            "SKIP",
            facts.unknown.get("same_az") or "same_az not declared (kvtool doctor checks it live)",
        )
    if facts.same_az:
        return _f(
            "fsx.same_az",
            "PASS",
            "same Availability Zone as the file system",
            facts.same_az_evidence,
        )
    return _f(
        "fsx.same_az",
        "FAIL" if wants_efa else "WARN",
        "the file system is in another Availability Zone"
        + (": EFA does not work across AZs" if wants_efa else ": cross-AZ latency and cost"),
        facts.same_az_evidence,
        "run the serving nodes in the file system's AZ (or create one in theirs)",
    )


def _create_association(file_system_id: str) -> str:
    """The DRA line ``--emit`` and doctor print (``plan/release.py``'s ``create_association``)
    for the file system ``file_system_id``, on one line: the KV folder's path on the file
    system and the bucket, which a plan file does not give, are variables to set first."""
    line = " ".join(
        create_association(
            file_system_id=shlex.quote(file_system_id), path='"$FSX_PATH"', prefix="kvcache"
        )
    )
    return (
        "set FSX_PATH to the KV folder's path on the file system (from its root: /kvcache for"
        f" /fsx/kvcache) and BUCKET to {FILL_IN['BUCKET'][1]}, then {line}"
    )


def _association(facts: FsxFacts, t4: T4Release | None) -> Finding:
    if facts.s3_association is None:
        return _f(
            "fsx.s3_association",
            "SKIP",
            facts.unknown.get("s3_association") or "s3_association not declared",
        )
    if not facts.s3_association:
        return _f(
            "fsx.s3_association",
            "WARN",
            "no S3 data repository association: the AWS article's checklist wants one for export"
            " to T4",
            facts.source,
            _create_association(facts.file_system_id)
            if facts.file_system_id
            else "aws_fsx_data_repository_association (Terraform) or"
            " AWS::FSx::DataRepositoryAssociation, export on demand",
        )
    if facts.broken_associations:
        return _f(
            "fsx.s3_association",
            "FAIL",
            "data repository association " + ", ".join(facts.broken_associations) + " is broken",
            facts.source,
            "recreate the association (aws fsx delete-data-repository-association, then create)",
        )
    return _auto_export(facts, t4)


# what auto-export does, and what turns it off, for the messages and fixes below
EXPORTS = "every chunk file the engine writes becomes an S3 PUT"
RELEASE_NEEDS = "gc --release frees only files exported to S3"


def _auto_export(facts: FsxFacts, t4: T4Release | None) -> Finding:
    """An association in place, judged by its automatic export against the plan's T4."""
    on = bool(facts.auto_export_paths) or bool(facts.auto_export)
    where = f" for {', '.join(facts.auto_export_paths)}" if facts.auto_export_paths else ""
    if facts.auto_export is None and not on:
        return _f(
            "fsx.s3_association",
            "PASS",
            "S3 data repository association in place"
            + ("" if t4 is None or not t4.released else f" ({t4.why}; auto_export not declared)"),
            facts.source,
        )
    if t4 is None:  # doctor: no plan says whether idle sessions are released
        if not on:
            return _f("fsx.s3_association", "PASS", "S3 data repository association in place")
        return _f(
            "fsx.s3_association",
            "PASS",
            f"auto-export is on{where}: what the AWS article's T4 path needs where idle"
            f" sessions are released to S3 (kvtool plan with a mean idle time; {RELEASE_NEEDS});"
            f" where nothing is released it only costs PUTs ({EXPORTS}): turn it off then",
            facts.source,
        )
    evidence = "; ".join(x for x in (t4.why, t4.puts, facts.source) if x)
    if t4.released and on:
        return _f(
            "fsx.s3_association",
            "PASS",
            f"auto-export is on{where}: what the plan's T4 path needs (its release to S3)",
            f"{evidence}; the AWS article's T4: idle sessions released through the association,"
            f" and {RELEASE_NEEDS}",
        )
    if t4.released:
        return _f(
            "fsx.s3_association",
            "WARN",
            f"auto-export is off but the plan releases idle sessions to S3 through the"
            f" association: {RELEASE_NEEDS}, so only what an export task put there is released",
            evidence,
            "aws fsx update-data-repository-association --association-id <id>"
            f" --s3 {shlex.quote(AUTO_EXPORT)}"
            if facts.file_system_id
            else "an AutoExportPolicy with events NEW, CHANGED, DELETED on the association, as"
            " kvtool plan --emit prints it",
        )
    if on:
        return _f(
            "fsx.s3_association",
            "WARN",
            f"auto-export is on{where} but the plan releases nothing to S3: {EXPORTS} (cost)"
            " with no release to use it; export on demand instead",
            evidence,
            "aws fsx update-data-repository-association --association-id <id>"
            " --s3 AutoExportPolicy={Events=[]}"
            if facts.file_system_id
            else "an AutoExportPolicy with no events on the association (export on demand), or"
            " plan the release: mean_idle (the AWS article's T4)",
        )
    return _f("fsx.s3_association", "PASS", "S3 data repository association in place, auto-export"
              " off (nothing released)", evidence)  # fmt: skip
