"""The doctor's checks: pure functions from a node's facts to findings, each with the exact fix.

Thresholds and recommended values come from AWS's FSx for Lustre documentation as collected, with
sources, in shared/reference/fsx-lustre-gds-facts.md (cited per check below); thresholds that
are kvtool's own judgement say so in the finding. A check that lacks the facts it needs returns
SKIP with the reason, never PASS. ``CHECKS`` lists them in report order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from kvtool.findings import Finding, Status
from kvtool.plan.folder_rules import FILES_PER_FOLDER
from kvtool.plan.fsx_rules import TCP_CLIENT_GBPS, FsxFacts, fsx_settings
from kvtool.probe.facts import NodeFacts
from kvtool.probe.parse import (
    LNET_TROUBLE,
    component_for,
    lustre_mount_name,
    param_values,
    sent_by_net,
)

GdsMode = Literal["required", "optional", "off"]

LOCAL_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs", "vfat"}
)
SHARED_FILE_SYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "gpfs",
        "wekafs",
        "beegfs",
        "ceph",
        "cephfs",
        "glusterfs",
        "fuse.s3fs",
        "fuse.mountpoint-s3",
        "fuse.juicefs",
        "fuse.weka",
        "efs",
    }
)
TCP_PER_OSS_GBPS = 5  # same page: per client and file-server pair over TCP
EFA_PROOF_FRACTION = 0.5  # kvtool's judgement: at least half the probe's MiB as EFA sends
LARGE_MEMORY_GIB = 64  # performance tips: lru tunings for clients with more than 64 GiB
LARGE_CPU_COUNT = 64  # performance tips: modprobe tunings for clients with more than 64 vCPUs


class DoctorOptions(NamedTuple):
    """What the user told the doctor: the node count and KV chunk size the folder must serve,
    the chunk files a plan would write, whether GDS is required, the probe size."""

    nodes: int = 1
    chunk_bytes: int | None = None
    planned_chunk_files: int | None = None
    gds: GdsMode = "optional"
    probe_mib: int = 64


Check = Callable[[NodeFacts, DoctorOptions], list[Finding]]


def _f(
    id_: str, status: Status, message: str, evidence: str = "", fix: str = "", measured: str = ""
) -> Finding:
    return Finding(id_, id_.split(".")[0], status, message, evidence, fix, measured)


def _grade(value: str, table: dict[str, Status], otherwise: Status) -> Status:
    return table.get(value, otherwise)


def _is_lustre(facts: NodeFacts) -> bool:
    return facts.mount is not None and facts.mount.fstype == "lustre"


def _not_lustre(id_: str, facts: NodeFacts) -> list[Finding]:
    kind = facts.mount.fstype if facts.mount else "unknown"
    return [_f(id_, "SKIP", f"not a Lustre mount ({kind}): Lustre check skipped")]


# --- path and mount ---------------------------------------------------------------------------


def check_path(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """The folder exists and this node can write to it."""
    info = facts.path_info
    if info.get("captured") is False:
        return [_f("path.writable", "SKIP", "the path's state was not captured")]
    if info.get("writable"):
        return [_f("path.writable", "PASS", f"{facts.path} is a writable folder")]
    mount = facts.mount
    if mount is not None and "ro" in mount.options:  # no owner change makes this writable
        return [
            _f(
                "path.writable",
                "FAIL",
                f"{facts.path} is on a read-only mount: the KV tier cannot store here",
                evidence=f"{mount.source} on {mount.mountpoint} ({','.join(mount.options)})",
                fix=f"sudo mount -o remount,rw {mount.mountpoint}  # and drop ro from its"
                " fstab or PersistentVolume",
            )
        ]
    return [
        _f(
            "path.writable",
            "FAIL",
            f"{facts.path} is not writable by this user: the KV tier cannot store here",
            evidence=f"realpath {info.get('realpath')}",
            fix=f"sudo chown <serving-user> {facts.path}  # or run the engine as its owner",
        )
    ]


def check_mount(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """A shared T3 must be a file system every node mounts: Lustre best, other shared file
    systems get the generic checks, a node-local one fails."""
    mount = facts.mount
    if mount is None:
        return [_f("mount.shared", "SKIP", "the mount table was not captured")]
    evidence = f"{mount.source} on {mount.mountpoint} type {mount.fstype}"
    if mount.fstype == "lustre":
        name = lustre_mount_name(mount.source)
        return [_f("mount.shared", "PASS", f"Lustre mount (mount name {name})", evidence)]
    if mount.fstype in SHARED_FILE_SYSTEMS or mount.fstype.startswith("fuse."):
        return [
            _f(
                "mount.shared",
                "WARN",
                f"a shared {mount.fstype} mount, not Lustre: generic checks only, the Lustre"
                " ones are skipped",
                evidence,
            )
        ]
    local = mount.fstype in LOCAL_FILE_SYSTEMS or mount.source.startswith("/dev/")
    return [
        _f(
            "mount.shared",
            "FAIL" if local else "WARN",
            f"{facts.path} is on a node-local {mount.fstype} file system: a T3 must be visible to"
            " every node (shared prefixes, recovery after a node loss)"
            if local
            else f"{mount.fstype} is not a file system kvtool knows to be shared",
            evidence,
            "mount the FSx for Lustre file system and point the KV folder at it, e.g."
            " sudo mount -t lustre -o relatime,flock <fs-dns>@tcp:/<mountname> /fsx",
        )
    ]


def check_flock(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """``flock`` gives cluster-coherent locks (AWS mounts with ``-o relatime,flock``);
    ``localflock`` only locks on this node."""
    if not _is_lustre(facts):
        return _not_lustre("mount.flock", facts)
    assert facts.mount is not None
    options = set(facts.mount.options)
    fix = (
        f"sudo umount {facts.mount.mountpoint} && sudo mount -t lustre -o relatime,flock"
        f" {facts.mount.source} {facts.mount.mountpoint}  (and add flock to /etc/fstab)"
    )
    if "flock" in options:
        return [_f("mount.flock", "PASS", "mounted with flock (cluster-coherent locks)")]
    if "localflock" in options:
        return [
            _f(
                "mount.flock",
                "WARN",
                "localflock locks on this node only: engines on other"
                " nodes do not see each other's locks",
                ",".join(sorted(options)),
                fix,
            )
        ]
    return [
        _f(
            "mount.flock",
            "FAIL",
            "mounted without flock: file locks are not coherent across nodes",
            ",".join(sorted(options)),
            fix,
        )
    ]


def check_atime(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """``noatime`` or ``relatime`` (AWS's current mount line) avoid a metadata write per read."""
    if facts.mount is None:
        return [_f("mount.atime", "SKIP", "the mount table was not captured")]
    options = set(facts.mount.options)
    if options & {"noatime", "relatime"}:
        mode = "noatime" if "noatime" in options else "relatime"
        return [_f("mount.atime", "PASS", f"{mode}: reads do not write access times")]
    return [
        _f(
            "mount.atime",
            "WARN",
            "access times are updated on every read: a metadata write per KV chunk read",
            ",".join(sorted(options)),
            "remount with -o relatime (AWS's mount line) or noatime",
        )
    ]


# --- layout, targets, directories ---------------------------------------------------------------


def check_layout(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """The folder's stripe count for files of the engine's chunk size, against the node count
    (the brief's checklist: stripe count >= nodes). FSx's default PFL puts files under 100 MiB on
    one OST, so typical KV chunk files are single-stripe unless the folder has its own layout."""
    if not _is_lustre(facts):
        return _not_lustre("layout.stripe", facts)
    layout, targets = facts.lustre.layout, facts.lustre.targets
    if layout is None:
        return [_f("layout.stripe", "SKIP", "lfs getstripe -d did not run (is lfs installed?)")]
    if not layout:
        return [
            _f(
                "layout.stripe",
                "SKIP",
                "the folder has no default layout of its own and"
                " the file system's default was not read",
            )
        ]
    osts = sum(1 for t in targets or [] if t.kind == "OST") or None
    size = o.chunk_bytes or 1
    component = component_for(size, layout)
    assert component is not None
    count = component.stripe_count
    effective = (osts or count) if count == -1 else min(count, osts or count)
    wanted = min(o.nodes, osts) if osts else o.nodes
    what = (
        f"files of {size / 2**20:,.0f} MiB (one KV chunk)"
        if o.chunk_bytes
        else "small files (chunk size unknown: pass --model)"
    )
    evidence = (
        f"component [{component.start}, {component.end or 'EOF'}) stripe_count {count},"
        f" stripe_size {component.stripe_size}; {osts or '?'} OSTs; {o.nodes} node(s)"
    )
    if effective >= wanted:
        return [
            _f(
                "layout.stripe",
                "PASS",
                f"{what} are striped over {effective} OST(s), at least min(nodes, OSTs) = {wanted}",
                evidence,
            )
        ]
    return [
        _f(
            "layout.stripe",
            "WARN",
            f"{what} land on {effective} OST(s), fewer than min(nodes, OSTs) = {wanted}: each"
            " chunk is read from one server (parallelism comes only from many files)",
            evidence,
            f"lfs setstripe -c {wanted} -S 1M {facts.path}  # new files only; lfs migrate"
            " re-lays existing ones",
        )
    ]


def check_targets(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """OSTs connected (``ost_server_uuid`` FULL or IDLE), none inactive, read-only or full, and
    balanced (a near-full OST can hang I/O: AWS re:Post). 80%/95% and a 20-point spread are
    kvtool's thresholds."""
    if not _is_lustre(facts):
        return _not_lustre("targets.state", facts)
    out: list[Finding] = []
    conns = facts.lustre.ost_connections
    targets = facts.lustre.targets
    if conns is None and targets is None:
        return [_f("targets.state", "SKIP", "neither lctl nor lfs df ran")]
    bad = [c for c in conns or [] if c.state not in ("FULL", "IDLE")]
    off = [c for c in conns or [] if c.deactivated]
    inactive = [t for t in targets or [] if not t.active]
    readonly = [t for t in targets or [] if "R" in t.flags]
    if bad or inactive or readonly:
        names = [c.target for c in bad] + [f"{t.kind}{t.number:04x}" for t in inactive + readonly]
        out.append(
            _f(
                "targets.state",
                "FAIL",
                "targets are disconnected, inactive or read-only: " + ", ".join(names),
                fix="check dmesg for LustreError and the FSx"
                " console; remount once the file system is AVAILABLE",
            )
        )
    elif off:
        out.append(
            _f("targets.state", "WARN", "deactivated OSTs: " + ", ".join(c.target for c in off))
        )
    else:
        n = len(conns or []) or sum(1 for t in targets or [] if t.kind == "OST")
        out.append(_f("targets.state", "PASS", f"all {n} OSTs connected"))
    osts = [t for t in targets or [] if t.kind == "OST" and t.active]
    if osts:
        high, low = max(t.use_percent for t in osts), min(t.use_percent for t in osts)
        evidence = f"OST use {low}%..{high}%"
        full = any("S" in t.flags for t in osts)
        if high >= 95 or full:
            out.append(
                _f(
                    "targets.fill",
                    "FAIL",
                    f"an OST is {high}% full: writes will fail or hang",
                    evidence,
                    "grow the file system (aws fsx update-file-system"
                    " --storage-capacity ...) or remove old KV chunks",
                )
            )
        elif high >= 80 or high - low > 20:
            out.append(
                _f(
                    "targets.fill",
                    "WARN",
                    f"OSTs are {low}%..{high}% full (kvtool warns at 80% or a 20-point spread)",
                    evidence,
                    "remove old KV chunks or grow the file system; lfs migrate rebalances",
                )
            )
        else:
            out.append(_f("targets.fill", "PASS", f"OSTs {low}%..{high}% full", evidence))
    inodes = [t for t in facts.lustre.inodes or [] if t.active]
    if inodes:
        high = max(t.use_percent for t in inodes)
        status: Status = "FAIL" if high >= 95 else "WARN" if high >= 80 else "PASS"
        out.append(
            _f(
                "targets.inodes",
                status,
                f"inodes at most {high}% used on any target",
                fix=""
                if status == "PASS"
                else "remove old chunk files or grow the file system (and raise metadata IOPS)",
            )
        )
    return out


def check_directory(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """AWS advises keeping each directory on PERSISTENT_2 under about 100K files. A KV tier
    writing one file per chunk passes that fast (Llama 70B at 128K is ~512 chunks a session)."""
    entries = facts.path_info.get("entries")
    planned = o.planned_chunk_files
    if entries is None and planned is None:
        return [_f("layout.files_per_dir", "SKIP", "the folder was not listed")]
    fix = (
        "fan chunk files out over sub-directories by a hash prefix (two hex levels make"
        " 65,536 directories; LMCache and SGLang name files by hash)"
    )
    if entries is not None and entries >= FILES_PER_FOLDER:
        return [
            _f(
                "layout.files_per_dir",
                "WARN",
                f"{entries:,}+ entries directly in"
                f" {facts.path}: past the ~100K per directory AWS advises",
                fix=fix,
            )
        ]
    if planned is not None and planned > FILES_PER_FOLDER:
        return [
            _f(
                "layout.files_per_dir",
                "WARN",
                f"the plan writes {planned:,} chunk files:"
                " in one directory that passes the ~100K AWS advises",
                fix=fix,
            )
        ]
    detail = f"{entries:,} entries now" if entries is not None else ""
    if planned is not None:
        detail += (", " if detail else "") + f"{planned:,} planned chunk files"
    return [_f("layout.files_per_dir", "PASS", f"under 100K files per directory ({detail})")]


# --- client -------------------------------------------------------------------------------------


def check_tunings(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """AWS's client tunings (FSx performance tips): lru_max_age=600000 and lru_size=100 x CPUs
    on clients with more than 64 GiB; max_rpcs_in_flight 32 (osc) and 64 (mdc),
    max_mod_rpcs_in_flight 50; ptlrpcd_per_cpt_max=32 and ksocklnd credits=2560 on clients with
    more than 64 vCPUs. lctl settings do not survive a reboot: reapply them from a boot job."""
    if not _is_lustre(facts):
        return _not_lustre("client.tunings", facts)
    params = facts.lustre.tunables
    if params is None:
        return [_f("client.tunings", "SKIP", "lctl get_param did not run")]
    fixes: list[str] = []
    evidence: list[str] = []

    def at_least(name: str, prefix: str, wanted: int) -> None:
        values = [int(v) for v in param_values(params, name, prefix) if v.isdigit()]
        low = min(values) if values else None
        evidence.append(f"{prefix}*.{name}={low if low is not None else '?'}")
        if low is None or low < wanted:
            fixes.append(f"lctl set_param {prefix}*.{name}={wanted}")

    at_least("max_rpcs_in_flight", "osc.", 32)
    at_least("max_rpcs_in_flight", "mdc.", 64)
    at_least("max_mod_rpcs_in_flight", "mdc.", 50)
    if facts.memory_gib is not None and facts.memory_gib > LARGE_MEMORY_GIB:
        at_least("lru_max_age", "ldlm.namespaces.", 600_000)
        if facts.cpus:
            at_least("lru_size", "ldlm.namespaces.", 100 * facts.cpus)
    if fixes:
        return [
            _f(
                "client.tunings",
                "WARN",
                "below AWS's recommended client tunings",
                "; ".join(evidence),
                " && ".join(f"sudo {x}" for x in fixes) + "  (reapply at boot)",
            )
        ]
    return [
        _f("client.tunings", "PASS", "AWS's recommended lctl tunings are set", "; ".join(evidence))
    ]


def check_modprobe(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """On clients with more than 64 vCPUs AWS sets ``options ptlrpc ptlrpcd_per_cpt_max=32`` and
    ``options ksocklnd credits=2560`` in /etc/modprobe.d/modprobe.conf (its configure-efa script
    writes the same block)."""
    if not _is_lustre(facts):
        return _not_lustre("client.modprobe", facts)
    if facts.cpus is None:
        return [_f("client.modprobe", "SKIP", "the CPU count was not read")]
    if facts.cpus <= LARGE_CPU_COUNT:
        return [_f("client.modprobe", "PASS", f"{facts.cpus} vCPUs: no module tuning needed")]
    if facts.modprobe is None:
        return [_f("client.modprobe", "SKIP", "/etc/modprobe.d/modprobe.conf was not read")]
    want = {"ptlrpc.ptlrpcd_per_cpt_max": 32, "ksocklnd.credits": 2560}
    missing = [
        k
        for k, v in want.items()
        if not facts.modprobe.get(k, "").isdigit() or int(facts.modprobe[k]) < v
    ]
    if not missing:
        return [_f("client.modprobe", "PASS", "ptlrpcd_per_cpt_max and ksocklnd credits set")]
    lines = [f"options {k.split('.')[0]} {k.split('.')[1]}={want[k]}" for k in missing]
    return [
        _f(
            "client.modprobe",
            "WARN",
            f"{facts.cpus} vCPUs without AWS's module tunings",
            ", ".join(missing),
            "add to /etc/modprobe.d/modprobe.conf: "
            + "; ".join(lines)
            + " (takes effect after the modules reload or a reboot)",
        )
    ]


def check_modules(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """The Lustre client modules are loaded (a kernel update without matching modules breaks
    the mount)."""
    if not _is_lustre(facts):
        return _not_lustre("client.modules", facts)
    if facts.modules is None:
        return [_f("client.modules", "SKIP", "/proc/modules was not read")]
    missing = sorted({"lustre", "lnet"} - facts.modules)
    if missing:
        return [
            _f(
                "client.modules",
                "FAIL",
                "Lustre modules not loaded: " + ", ".join(missing),
                fix="sudo modprobe lustre  # or reinstall the lustre-client matching uname -r",
            )
        ]
    return [_f("client.modules", "PASS", "lustre and lnet modules loaded")]


def check_odirect(facts: NodeFacts, o: DoctorOptions) -> list[Finding]:
    """O_DIRECT works on the folder (engines write KV with it; LMCache's fs and GDS paths)."""
    probe = facts.odirect
    if probe is None:
        return [
            _f(
                "client.odirect",
                "SKIP",
                "no O_DIRECT probe ran (--no-write, or the folder is not writable)",
            )
        ]
    if probe.get("ok"):
        size = probe.get("bytes", 0) / 2**20
        rates = []
        for what in ("write", "read"):
            seconds = probe.get(f"{what}_s")
            if seconds:
                rates.append(f"{what} {size / seconds:,.0f} MiB/s")
        return [
            _f(
                "client.odirect",
                "PASS",
                f"O_DIRECT write and read of {size:,.0f} MiB worked",
                "single-threaded probe, 1 MiB blocks (not a benchmark: kvtool bench measures)",
                measured=", ".join(rates),
            )
        ]
    return [
        _f(
            "client.odirect",
            "FAIL",
            f"O_DIRECT failed: {probe.get('error')} (errno {probe.get('errno')})",
            fix="use a file system that supports O_DIRECT"
            " (FSx for Lustre does), or turn O_DIRECT off in the engine",
        )
    ]


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


def _object(value: Any) -> dict[str, Any]:
    """A JSON object of cufile.json (a file on the node, any shape); anything else as empty."""
    return value if isinstance(value, dict) else {}


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
        file_system_id=fs.get("FileSystemId", "?"),
        source=f"aws fsx describe-file-systems {fs.get('FileSystemId', '')}".strip(),
        unknown=unknown,
    )


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


CHECKS: tuple[Check, ...] = (
    check_path,
    check_mount,
    check_flock,
    check_atime,
    check_layout,
    check_directory,
    check_targets,
    check_modules,
    check_tunings,
    check_modprobe,
    check_odirect,
    check_efa,
    check_lnet_health,
    check_gds,
    check_aws,
)


def run_checks(facts: NodeFacts, options: DoctorOptions) -> list[Finding]:
    """Every check, in report order."""
    return [finding for check in CHECKS for finding in check(facts, options)]
