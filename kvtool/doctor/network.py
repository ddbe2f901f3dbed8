"""The doctor's network checks: EFA to the file system, LNet's health, GPUDirect Storage.
Pure, as every check (``doctor.checks`` says how they are written)."""

from __future__ import annotations

from kvtool.doctor.checks import (
    EFA_PROOF_FRACTION,
    TCP_PER_OSS_GBPS,
    DoctorOptions,
    _f,
    _is_lustre,
    _not_lustre,
    _object,
)
from kvtool.findings import Finding, Status
from kvtool.plan.fsx_rules import TCP_CLIENT_GBPS
from kvtool.probe.facts import NodeFacts
from kvtool.probe.parse import LNET_TROUBLE, sent_by_net

# --- network ------------------------------------------------------------------------------------


def check_efa(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """EFA present in LNet, and actually carrying the Lustre traffic: during the O_DIRECT probe
    the efa NIs' send_count should rise by about one per MiB while tcp barely moves (the proof
    wsi-cloud gates every boot on). Over TCP a client gets 100 Gbps in all and 5 Gbps per file
    server."""
    if not _is_lustre(facts):
        return _not_lustre("network.efa", facts)
    before, after = facts.net.nis_before, facts.net.nis_after
    nis = after or before
    if nis is None:
        return [_f("network.efa", "SKIP", "lnetctl did not run")]
    efa_up = [n for n in nis if n.net == "efa" and n.status == "up"]
    osts = sum(1 for t in facts.lustre.targets or [] if t.kind == "OST")
    tcp_cap = f"{TCP_CLIENT_GBPS} Gbps per client" + (
        f", {min(TCP_CLIENT_GBPS, TCP_PER_OSS_GBPS * osts)} Gbps with {osts} OSTs at"
        f" {TCP_PER_OSS_GBPS} Gbps each"
        if osts
        else f", {TCP_PER_OSS_GBPS} Gbps per file server"
    )
    fs_efa = bool((facts.aws.file_system or {}).get("LustreConfiguration", {}).get("EfaEnabled"))
    if not efa_up and facts.net.efa_provider:
        tcp_cap += "; libfabric sees EFA devices, so the node has EFA but LNet does not use it"
    if not efa_up:
        status: Status = "FAIL" if fs_efa else "WARN"
        return [
            _f(
                "network.efa",
                status,
                "no EFA network in LNet: Lustre runs over TCP"
                f" ({tcp_cap})" + (" although the file system is EFA-enabled" if fs_efa else ""),
                ", ".join(f"{n.nid} {n.status}" for n in nis),
                "run AWS's configure-efa-fsx-lustre-client script (lnetctl net add --net efa"
                " --if efa_0 ...) and remount",
            )
        ]
    out = [
        _f(
            "network.efa",
            "PASS",
            f"{len(efa_up)} EFA NI(s) up in LNet",
            ", ".join(n.nid for n in efa_up),
        )
    ]
    probe = facts.odirect or {}
    if before is None or after is None or not probe.get("ok"):
        out.append(
            _f(
                "network.efa_carries",
                "SKIP",
                "no before/after LNet counters around an O_DIRECT probe",
            )
        )
        return out
    b, a = sent_by_net(before), sent_by_net(after)
    efa = a.get("efa", 0) - b.get("efa", 0)
    tcp = a.get("tcp", 0) - b.get("tcp", 0)
    mib = probe.get("bytes", 0) / 2**20
    evidence = f"LNet send counts around {mib:,.0f} MiB of O_DIRECT I/O"
    measured = f"efa send_count +{efa}, tcp +{tcp}"
    if efa >= EFA_PROOF_FRACTION * mib and tcp <= efa / 10:
        out.append(
            _f(
                "network.efa_carries",
                "PASS",
                "EFA carries the Lustre traffic",
                evidence,
                measured=measured,
            )
        )
    else:
        out.append(
            _f(
                "network.efa_carries",
                "FAIL",
                f"EFA is up but the Lustre traffic went over TCP ({tcp_cap})",
                evidence,
                "check lnetctl udsp (efa priority 0), the"
                " security group's self-rule, and that the mount came after"
                " configure-efa-fsx-lustre-client.service",
                measured=measured,
            )
        )
    return out


# --- GPUDirect Storage ----------------------------------------------------------------------------


def check_gds(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """The GDS stack (nvidia-fs, gdscheck's Lustre row), cufile.json pitfalls, and whether a
    cuFile read went direct: only nvidia-fs counters prove it, not gdscheck's verdict."""
    if o.gds == "off":
        return [_f("gds.stack", "SKIP", "GDS not checked (--gds off)")]
    gds = facts.gds
    severe: Status = "FAIL" if o.gds == "required" else "WARN"
    if not gds.gpus:
        status: Status = "FAIL" if o.gds == "required" else "SKIP"
        return [
            _f(
                "gds.stack",
                status,
                "no NVIDIA GPU found (nvidia-smi -L)"
                + (" but --gds required" if o.gds == "required" else ": GDS checks skipped"),
            )
        ]
    out: list[Finding] = []
    loaded = facts.modules is not None and "nvidia_fs" in facts.modules
    check = gds.gdscheck
    if not loaded or check is None or not check.verified:
        why = (
            "nvidia_fs module not loaded"
            if not loaded
            else (
                "gdscheck -p did not run"
                if check is None
                else "gdscheck -p did not verify the platform"
            )
        )
        out.append(
            _f(
                "gds.stack",
                severe,
                why,
                fix="install the nvidia-fs driver and GDS tools"
                " (AWS's GDS sample: build nvidia-fs, write /etc/cufile.json, reboot)",
            )
        )
    else:
        out.append(
            _f(
                "gds.stack",
                "PASS",
                f"GDS stack verified; {check.gpus_supporting} of {check.gpus} GPUs support GDS",
            )
        )
    config = gds.cufile
    if config is None:
        out.append(
            _f(
                "gds.cufile_json",
                "WARN",
                f"{gds.cufile_path} not found or not JSON:"
                " cuFile runs on defaults (compat mode allowed)",
            )
        )
    else:
        props = _object(config.get("properties"))
        lustre = _object(_object(config.get("fs")).get("lustre"))
        problems = []
        if props.get("allow_compat_mode", True):
            problems.append("allow_compat_mode is true: cuFile falls back to POSIX I/O silently")
        min_kb = lustre.get("posix_gds_min_kb", 0)
        if o.chunk_bytes and isinstance(min_kb, int) and min_kb * 1024 >= o.chunk_bytes:
            problems.append(
                f"fs.lustre.posix_gds_min_kb {min_kb} sends KV chunks of"
                f" {o.chunk_bytes // 1024} KiB through POSIX"
            )
        if problems:
            out.append(
                _f(
                    "gds.cufile_json",
                    severe,
                    "; ".join(problems),
                    gds.cufile_path,
                    'set "properties": {"allow_compat_mode": false} and'
                    ' "fs": {"lustre": {"posix_gds_min_kb": 0}} in ' + gds.cufile_path,
                )
            )
        else:
            out.append(_f("gds.cufile_json", "PASS", "cufile.json forbids compat mode"))
    probe = gds.cufile_read or {}
    before, after = gds.nvfs_before, gds.nvfs_after
    if not probe.get("ran"):
        out.append(
            _f("gds.direct", "SKIP", "no cuFile read ran: " + str(probe.get("reason", "no probe")))
        )
    elif before is None or after is None or not after.io_stats_enabled:
        out.append(
            _f(
                "gds.direct",
                "SKIP",
                "nvidia-fs IO stats are disabled",
                fix="echo 1 | sudo tee /sys/module/nvidia_fs/parameters/rw_stats_enabled",
            )
        )
    else:
        read_mib = after.read_mib - before.read_mib
        share = read_mib / max(o.probe_mib, 1)
        evidence = f"nvidia-fs readMiB +{read_mib} during a {o.probe_mib} MiB cuFile read"
        if share >= 0.9:
            out.append(_f("gds.direct", "PASS", "cuFile reads go direct (GPUDirect)", evidence))
        elif read_mib > 0:
            out.append(
                _f(
                    "gds.direct",
                    "WARN",
                    f"only {share:.0%} of the read went direct",
                    evidence,
                    "check posix_gds_min_kb and I/O alignment",
                )
            )
        else:
            out.append(
                _f(
                    "gds.direct",
                    severe,
                    "cuFile ran in compat mode: no read went through nvidia-fs",
                    evidence,
                    "see cufile.log for 'running in"
                    " compatible mode'; check the nvidia-fs and EFA setup",
                )
            )
    return out


def check_lnet_health(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """LNet's drop, resend and timeout counters since the modules loaded: non-zero counts are
    the signature of the EFA instability wsi-cloud recorded (timeouts, lost connections)."""
    if not _is_lustre(facts):
        return _not_lustre("network.lnet_errors", facts)
    stats = facts.net.lnet_stats
    if stats is None:
        return [_f("network.lnet_errors", "SKIP", "lnetctl stats show did not run")]
    trouble = {k: stats[k] for k in LNET_TROUBLE if stats.get(k)}
    sent = stats.get("send_count", 0)
    if not trouble:
        return [
            _f(
                "network.lnet_errors",
                "PASS",
                f"no drops, resends or timeouts in {sent:,} LNet sends",
            )
        ]
    text = ", ".join(f"{k}={v:,}" for k, v in trouble.items())
    return [
        _f(
            "network.lnet_errors",
            "WARN",
            "LNet has dropped, resent or timed out messages",
            f"{text} of {sent:,} sends",
            "check dmesg for kefalnd / ptlrpc timeouts and the"
            " EFA hw_counters (retrans_timeout_events); a flapping link needs AWS support",
        )
    ]
