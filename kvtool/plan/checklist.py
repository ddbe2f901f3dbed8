"""The pre-deployment checklist (``kvtool check PLAN.yaml``): a plan file's rules, pure.

Rules, each a finding with its fix:

* ``plan.fsx_size``: the declared capacity is one FSx can provision (``plan/fsx.py``).
* ``plan.capacity``: at peak concurrency (mean sessions x peak-to-mean, the mean session size
  over the context mix) the tiers the plan deploys hold every session; nothing the plan did
  not deploy (S3) has to take the overflow.
* ``plan.tiers`` and ``plan.posture``: the tiers deployed match what the AWS article's criteria
  recommend (``plan/advise.py``), and disaggregated serving writes eagerly.
* the FSx checklist of the AWS article: ``fsx.deployment`` (PERSISTENT_2), ``fsx.storage_type``
  (SSD), ``fsx.compression`` (NONE), ``fsx.efa`` (EFA enabled for an EFA client path),
  ``fsx.same_az``, ``fsx.s3_association``, ``fsx.mount_options`` (flock, noatime/relatime),
  ``fsx.stripe`` (stripe count >= nodes, -1 = every OST), ``client.odirect``,
  ``client.io_threads`` (32 or more per node).
* ``plan.bandwidth``: the file system's throughput per node against the client link, and the
  cache-hit sessions per second it gives at the longest context (the plan's fan-in).
* ``measured.bandwidth``: a measured T3 read bandwidth (``kvtool bench --json`` or stated)
  within ``tolerance`` of what the plan assumes per node; ``measured.doctor``: no node's doctor
  report FAILs.
* ``folder.contents``, ``folder.orphans``, ``folder.cap``, ``folder.files_per_dir``: with
  ``t3_dir``, what the shared KV folder holds against the plan's model, tp and ``max_size``
  (``plan/folder_rules.py``, the rules doctor applies too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from kvtool.errors import InputError
from kvtool.findings import Finding, Report, Status
from kvtool.model.shape import KvShape
from kvtool.plan.advise import advise, capacity_of, workload_t3
from kvtool.plan.deployment import (
    Hardware,
    WorkloadPlan,
    engine_hosts,
    offload_divisors,
    plan_workload,
    serve,
    workers_storing,
)
from kvtool.plan.folder_rules import FolderFacts, folder_findings
from kvtool.plan.fsx import file_system
from kvtool.plan.fsx_rules import FsxFacts, T4Release, fsx_settings
from kvtool.plan.measured import MeasuredTier
from kvtool.plan.offload import LAYOUTS
from kvtool.plan.reload import DEFAULT_CHUNK_TOKENS, t3_client_gbps
from kvtool.plan.striping import DEFAULT_STRIPE_SIZE, judge_stripes
from kvtool.plan.t3_size import T3Size, sized_why
from kvtool.plan.workload import FsxSettings, PlanFile
from kvtool.units import format_bytes, plural

MIN_IO_THREADS = 32  # the AWS article's checklist: 32 or more I/O threads per node


class Evidence(NamedTuple):
    """What was measured beside the plan, already read (``kvtool.inputs.evidence``): the
    measured tiers of a ``kvtool bench --json`` report and the ``kvtool doctor --json``
    reports."""

    measured: tuple[MeasuredTier, ...] = ()
    doctor: tuple[Report, ...] = ()
    folder: FolderFacts | None = None  # the plan's t3_dir, read (plan/folder_rules.py)
    folder_skipped: str = ""  # why it could not be read


def _gb(bytes_per_s: float) -> str:
    """GB/s with enough digits to tell small file systems apart: 0.059, 5.86, 87.5."""
    value = bytes_per_s / 1e9
    return f"{value:,.3g}" if value < 100 else f"{value:,.0f}"


def _f(id_: str, status: Status, message: str, evidence: str = "", fix: str = "") -> Finding:
    return Finding(id_, id_.split(".")[0], status, message, evidence, fix)


def check_plan(
    plan: PlanFile,
    shape: KvShape,
    hardware: Hardware,
    *,
    evidence: Evidence | None = None,
) -> list[Finding]:
    """Every rule of the module docstring, in order. ``hardware`` is the plan's cluster with
    the T3 profile of the declared deployment type (``t3_profile_for``) and no file system
    yet: the declared size is checked here, a finding when FSx cannot provision it. The tiers
    come from ``plan_workload``, the pipeline ``kvtool plan`` and ``advise`` use.
    Raises InputError only for a layout the engine cannot run (an invalid tp)."""
    w = plan.workload
    fsx = plan.fsx
    t3 = hardware.t3
    findings: list[Finding] = []
    efa = plan.t3_path in ("efa", "efa_gds") and hardware.node.efa_gbps > 0  # the nodes want EFA

    capacity_bytes = None
    fs = None
    if fsx is not None and fsx.storage_capacity_gib is not None:
        try:
            fs = file_system(
                t3,
                capacity_bytes=fsx.storage_capacity_gib * 2**30,
                throughput_mbps_per_tib=fsx.per_unit_storage_throughput,
                efa=bool(fsx.efa_enabled),
                what="storage_capacity_gib",
                throughput_what="per_unit_storage_throughput",
            )
            capacity_bytes = fs.capacity_bytes
            findings.append(
                _f(
                    "plan.fsx_size",
                    "PASS",
                    f"{fsx.storage_capacity_gib:,} GiB is a size FSx provisions",
                    fsx.source,
                )
            )
        except InputError as exc:
            findings.append(_f("plan.fsx_size", "FAIL", exc.message, fsx.source, exc.hint))
    elif fsx is not None:
        findings.append(_f("plan.fsx_size", "SKIP", "no storage_capacity_gib declared"))

    # no fsx: the plan deploys no T3 (0); a declared size FSx cannot provision: sized to fit
    cluster = replace(
        hardware,
        fsx_capacity_bytes=capacity_bytes if fsx is not None else 0,
        fsx_throughput_mbps_per_tib=fs.throughput_mbps_per_tib if fs is not None else None,
    )
    serve(shape, cluster, weights_dtype=w.weights_dtype)  # an invalid tp or dtype: exit 2
    try:
        planned = plan_workload(shape, w, cluster, idle_from="the plan's mean_idle",
                                dra=fsx is not None and bool(fsx.s3_association))  # fmt: skip
    except InputError as exc:  # the weights or one session do not fit a node at all
        return [*findings, _f("plan.capacity", "FAIL", exc.message, fix=exc.hint)]
    session_bytes = planned.session_bytes
    divisor = offload_divisors(
        LAYOUTS[shape.rules.offload_stack], is_mla=shape.spec.is_mla, tp=planned.serving.kv_tp,
        pp=planned.serving.pp, hosts=engine_hosts(planned.serving, hardware.node),
    )  # fmt: skip
    unsized = replace(cluster, fsx_capacity_bytes=None)
    findings.append(_capacity(plan, planned, lambda: workload_t3(shape, planned, unsized)))
    findings += _tiers(plan, planned)
    chunk_file = (
        shape.block_bytes(DEFAULT_CHUNK_TOKENS)
        // divisor["T3"]
        // workers_storing(planned.serving, divisor["T3"])
    )
    findings += _fsx_checklist(
        plan, fsx, wants_efa=efa, nodes=w.nodes, chunk_file=chunk_file,
        fan_in=w.shared_prefix > 0, t4=t4_release(plan, planned),
    )  # fmt: skip
    share = None
    if fs is not None:
        share = fs.read_bytes_per_s / w.nodes
        findings.append(
            _bandwidth(cluster, plan, share, max(session_bytes.values()) // divisor["T3"])
        )
    evidence = evidence or Evidence()
    findings += _measured(plan, evidence, share)
    if plan.t3_dir is not None:
        findings += folder_findings(
            evidence.folder, cap=plan.max_size, skipped=evidence.folder_skipped
        )
    return findings


def _capacity(plan: PlanFile, planned: WorkloadPlan, sized: Callable[[], T3Size]) -> Finding:
    """The peak working set in the deployed tiers: sessions released to S3 through the plan's
    data repository association (``plan/release.py``) are held, the rest of T4 overflows;
    ``sized`` names the FSx ``kvtool plan`` would size for what stays on T3 (``workload_t3``:
    the larger of holding it and restoring from it in time), and which need decided."""
    tiers, release = planned.tiers, planned.release
    t3 = tiers.tiers[2]
    released = release.released_sessions if release is not None else 0
    spill = tiers.tiers[3]
    if release is not None and released:
        over = spill.sessions - released
        spill = replace(spill, sessions=over, used_bytes=over * release.session_bytes)
    evidence = (
        f"{planned.peak_sessions:,} sessions at peak x {format_bytes(planned.mean_session_bytes)}"
        f" mean: T1 {tiers.tiers[0].sessions:,}, T2 {tiers.tiers[1].sessions:,}, T3"
        f" {t3.sessions:,}"
        + (f", released to S3 {released:,}" if released else "")
        + f", overflow {spill.sessions:,}"
    )
    if release is not None and release.spilled_sessions and plan.fsx is not None:
        if not plan.fsx.s3_association and plan.workload.mean_idle_s:
            evidence += (
                "; none released to S3: the plan declares no S3 data repository association"
                " (fsx.s3_association: true)"
            )
        elif release.mean_idle_s is not None:
            evidence += f"; {release.split(sessions=planned.peak_sessions)}"
    if not spill.sessions:
        if released:
            fsx = sized()
            evidence += (
                f"; {fsx.file_system.capacity_gib:,} GiB of FSx holds the hot share"
                f" ({sized_why(fsx)})"
            )
        return _f("plan.capacity", "PASS", "the deployed tiers hold the peak working set", evidence)
    if plan.fsx is None:
        need = spill.used_bytes
        return _f(
            "plan.capacity",
            "FAIL",
            f"the peak working set does not fit HBM and host memory:"
            f" {format_bytes(need)} has nowhere to go",
            evidence,
            f"add an FSx for Lustre T3 of at least {format_bytes(need)} (fsx: in the plan)",
        )
    fsx = sized()
    return _f(
        "plan.capacity",
        "FAIL",
        f"{format_bytes(spill.used_bytes)} of the peak working set overflows the file system",
        evidence,
        f"grow storage_capacity_gib to {fsx.file_system.capacity_gib:,} GiB for what stays on T3"
        f" at peak ({sized_why(fsx)})",
    )


def _tiers(plan: PlanFile, planned: WorkloadPlan) -> list[Finding]:
    w = plan.workload
    advice = advise(w, capacity_of(planned, w.nodes))
    met = sum(c.met for c in advice.criteria)
    out = []
    deployed_t3 = plan.fsx is not None
    if "T3" in advice.tiers and not deployed_t3:
        out.append(
            _f(
                "plan.tiers",
                "FAIL",
                f"the article's criteria call for a shared T3 ({met} of 6"
                " hold, any one enough, or the peak exceeds T1 + T2) and the plan deploys none",
                "; ".join(advice.reasons),
                "add fsx: to the plan",
            )
        )
    elif deployed_t3 and "T3" not in advice.tiers:
        out.append(
            _f(
                "plan.tiers",
                "WARN",
                "a T3 is deployed but none of the article's 6 criteria holds: it may not pay"
                " for itself",
                "; ".join(advice.reasons),
            )
        )
    else:
        out.append(
            _f(
                "plan.tiers",
                "PASS",
                f"tiers match the article's criteria ({met} of 6 hold): {' + '.join(advice.tiers)}",
            )
        )
    if plan.posture is None:
        out.append(
            _f("plan.posture", "SKIP", f"no posture declared; kvtool recommends {advice.posture}")
        )
    elif plan.posture != advice.posture and w.disaggregated and plan.posture == "lazy":
        out.append(
            _f(
                "plan.posture",
                "FAIL",
                "disaggregated prefill and decode need an eager"
                " posture: the decode node never ran the prefill",
                fix="posture: eager",
            )
        )
    elif plan.posture != advice.posture:
        out.append(
            _f(
                "plan.posture",
                "WARN",
                f"posture {plan.posture}; kvtool recommends {advice.posture}",
                advice.reasons[-1],
            )
        )
    else:
        out.append(_f("plan.posture", "PASS", f"posture {plan.posture}"))
    return out


def t4_release(plan: PlanFile, planned: WorkloadPlan) -> T4Release:
    """What the plan does with its S3 association, for ``fsx.s3_association``: whether it
    releases idle sessions to S3 through it (the AWS article's T4, ``plan/release.py``), why
    or why not, and the export PUTs one written session costs (one object per chunk file:
    chunks of the mean context x the workers that store a chunk)."""
    w, release = plan.workload, planned.release
    chunks = sum(share * -(-ctx // DEFAULT_CHUNK_TOKENS) for ctx, share in w.contexts.items())
    objects = planned.t4_objects_per_chunk
    puts = (
        f"a session written is {chunks * objects:,.0f} chunk files ({chunks:,.0f}"
        f" {DEFAULT_CHUNK_TOKENS}-token chunks x {objects:,} worker{'s' if objects > 1 else ''}),"
        " one export PUT each at least (kvtool has not read how FSx uploads a large file)"
    )
    if release is not None and release.released_sessions:
        return T4Release(True, release.split(sessions=planned.peak_sessions), puts)
    if plan.fsx is None or not plan.fsx.s3_association:
        why = "no S3 data repository association declared"
    elif release is None or not release.planned:
        why = release.summary(sessions=planned.peak_sessions) if release else "no T4 release"
    elif release.mean_idle_s is None:
        why = "no mean_idle: the plan releases no session (the AWS article's T4 needs one)"
    elif not release.spilled_sessions:
        why = "no session spills past T1 and T2 at peak: nothing to release"
    else:
        why = release.split(sessions=planned.peak_sessions)
    return T4Release(False, why, puts)


def declared_facts(fsx: FsxSettings) -> FsxFacts:
    """The file system as the plan declares it; an S3 association not declared is none."""
    return FsxFacts(
        deployment_type=fsx.deployment_type,
        storage_type=fsx.storage_type,
        storage_capacity_gib=fsx.storage_capacity_gib,
        per_unit_storage_throughput=fsx.per_unit_storage_throughput,
        efa_enabled=fsx.efa_enabled,
        data_compression_type=fsx.data_compression_type,
        same_az=fsx.same_az,
        s3_association=bool(fsx.s3_association),
        auto_export=fsx.auto_export,
        source=fsx.source,
    )


def _fsx_checklist(
    plan: PlanFile,
    fsx: FsxSettings | None,
    *,
    wants_efa: bool,
    nodes: int,
    chunk_file: int,
    fan_in: bool,
    t4: T4Release | None = None,
) -> list[Finding]:
    """The file system's settings (``plan/fsx_rules.py``, shared with kvtool doctor), then how
    the nodes mount and use it; the stripe count for a ``chunk_file``-byte chunk file
    (``plan/striping.py``, shared with doctor), held to "stripe count >= nodes" where
    ``fan_in`` (a prefix shared across nodes)."""
    if fsx is None:
        return [_f("fsx.checklist", "SKIP", "the plan deploys no FSx file system")]
    out = fsx_settings(declared_facts(fsx), wants_efa=wants_efa, t4=t4)
    options = fsx.mount_options
    if options is None:
        out.append(_f("fsx.mount_options", "SKIP", "mount_options not declared"))
    else:
        missing = [o for o in ("flock",) if o not in options]
        atime = bool({"noatime", "relatime"} & set(options))
        status: Status = "FAIL" if missing else ("PASS" if atime else "WARN")
        out.append(
            _f(
                "fsx.mount_options",
                status,
                f"mount options {','.join(options)}",
                fix="" if status == "PASS" else "mount -o relatime,flock (or noatime,flock)",
            )
        )
    if fsx.stripe_count is None:
        out.append(_f("fsx.stripe", "SKIP", "stripe_count of the KV folder not declared"))
    else:
        judged = judge_stripes(
            chunk_file, stripe_count=fsx.stripe_count, stripe_size=DEFAULT_STRIPE_SIZE,
            osts=None, nodes=nodes, fan_in=fan_in, path="<KV folder>",
        )  # fmt: skip
        evidence = (
            f"{DEFAULT_CHUNK_TOKENS}-token chunk files of {chunk_file:,} B (one per worker);"
            f" stripe size 1 MiB (FSx's default; the plan declares none); OSTs not known;"
            f" {plural(nodes, 'node')}; {judged.rules}"
        )
        out.append(_f("fsx.stripe", judged.status, judged.message, evidence, judged.fix))
    if plan.odirect is None:
        out.append(_f("client.odirect", "SKIP", "odirect not declared"))
    else:
        out.append(
            _f(
                "client.odirect",
                "PASS" if plan.odirect else "WARN",
                "O_DIRECT on" if plan.odirect else "O_DIRECT off: KV goes through the page cache",
                fix=""
                if plan.odirect
                else "odirect: true (LMCache:"
                " save_chunk_meta false + fs_connector_use_odirect true)",
            )
        )
    if plan.io_threads is None:
        out.append(_f("client.io_threads", "SKIP", "io_threads not declared"))
    else:
        ok = plan.io_threads >= MIN_IO_THREADS
        out.append(
            _f(
                "client.io_threads",
                "PASS" if ok else "WARN",
                f"{plan.io_threads} I/O threads per node"
                + ("" if ok else f", below {MIN_IO_THREADS}"),
            )
        )
    return out


def _bandwidth(hardware: Hardware, plan: PlanFile, share: float, session_bytes: int) -> Finding:
    path, gbps = t3_client_gbps(hardware.node, hardware.t3, plan.t3_path)
    link = gbps * 1e9 / 8
    rate = min(link, share) / session_bytes
    evidence = (
        f"file system {_gb(share)} GB/s per node, {path} link {_gb(link)}"
        f" GB/s: {rate:,.3g} cache-hit sessions/s per node at the longest context"
    )
    if share >= link:
        return _f(
            "plan.bandwidth",
            "PASS",
            "the file system's throughput covers the client link",
            evidence,
        )
    return _f(
        "plan.bandwidth",
        "WARN",
        "the file system, not the link, bounds T3 reads: fan-in"
        f" is {rate:,.3g} sessions/s per node instead of {link / session_bytes:,.3g}",
        evidence,
        "raise storage_capacity_gib or per_unit_storage_throughput",
    )


def _measured(plan: PlanFile, evidence: Evidence, share: float | None) -> list[Finding]:
    out = []
    measured = plan.measured.t3_read_gbytes_per_s
    measured_bps = None if measured is None else measured * 1e9
    t3 = next((m for m in evidence.measured if m.tier == "T3"), None)
    if t3 is not None:
        measured_bps = t3.bytes_per_s
    if measured_bps is None:
        out.append(
            _f(
                "measured.bandwidth",
                "SKIP",
                "no measured T3 bandwidth (measured.bench or measured.t3_read_gbytes_per_s)",
            )
        )
    elif share is None:
        out.append(_f("measured.bandwidth", "SKIP", "the plan declares no file system to compare"))
    else:
        floor = share * (1 - plan.tolerance)
        evidence_text = (
            f"measured {_gb(measured_bps)} GB/s, plan {_gb(share)} GB/s per"
            f" node, tolerance {plan.tolerance:.0%}"
        )
        # the plan's per-node share is an upper bound; one node measuring more is fine
        status: Status = "PASS" if measured_bps >= floor else "FAIL"
        out.append(
            _f(
                "measured.bandwidth",
                status,
                "measured T3 reads are within tolerance of the plan"
                if status == "PASS"
                else "measured T3 reads fall short of the plan",
                evidence_text,
                ""
                if status == "PASS"
                else "run kvtool doctor on the nodes"
                " (EFA use, stripe layout, tunings) and kvtool bench again",
            )
        )
    if not plan.measured.doctor:
        out.append(_f("measured.doctor", "SKIP", "no kvtool doctor reports given"))
    else:
        failing = [
            (r.node, tuple(f.id for f in r.findings if f.status == "FAIL"))
            for r in evidence.doctor
            if r.failed
        ]
        if failing:
            text = "; ".join(f"{n}: {', '.join(ids)}" for n, ids in failing)
            out.append(
                _f(
                    "measured.doctor",
                    "FAIL",
                    f"{len(failing)} node(s) fail kvtool doctor",
                    text,
                    "fix what kvtool doctor prints on those nodes",
                )
            )
        else:
            out.append(
                _f(
                    "measured.doctor",
                    "PASS",
                    f"{len(evidence.doctor)} doctor report(s) without failures",
                )
            )
    return out


T3_PROFILES = {
    "PERSISTENT_2": "fsx-lustre-persistent2",
    "PERSISTENT_1": "fsx-lustre-persistent1",
    "SCRATCH_2": "fsx-lustre-scratch2",
}


def t3_profile_for(fsx: FsxSettings | None) -> str:
    """The bundled storage profile for the declared deployment type (PERSISTENT_2 when none
    is declared or the type has no profile)."""
    declared = fsx.deployment_type if fsx is not None else None
    return T3_PROFILES.get(declared or "", "fsx-lustre-persistent2")
