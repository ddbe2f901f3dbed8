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
from kvtool.plan.striping import judge_stripes
from kvtool.probe.facts import NodeFacts
from kvtool.probe.parse import (
    component_for,
    lustre_mount_name,
    mount_kind,
    param_values,
)

GdsMode = Literal["required", "optional", "off"]

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


def _object(value: Any) -> dict[str, Any]:
    """A JSON object of cufile.json (a file on the node, any shape); anything else as empty."""
    return value if isinstance(value, dict) else {}


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
    kind = mount_kind(mount.fstype, mount.source)
    if kind == "lustre":
        name = lustre_mount_name(mount.source)
        return [_f("mount.shared", "PASS", f"Lustre mount (mount name {name})", evidence)]
    if kind == "shared":
        return [
            _f(
                "mount.shared",
                "WARN",
                f"a shared {mount.fstype} mount, not Lustre: generic checks only, the Lustre"
                " ones are skipped",
                evidence,
            )
        ]
    local = kind == "local"
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
    """``noatime`` (the article's) or ``relatime`` (AWS's current mount line: an access time at
    most once a day per file, which age-based clean-up needs) avoid a metadata write per read."""
    if facts.mount is None:
        return [_f("mount.atime", "SKIP", "the mount table was not captured")]
    options = set(facts.mount.options)
    if "noatime" in options:
        text = (
            "noatime: reads never write access times (the AWS article's setting; clean-up by last"
            " access then sees none)"
        )
        return [_f("mount.atime", "PASS", text)]
    if "relatime" in options:
        text = (
            "relatime: a read writes a file's access time at most once a day (when it is older"
            " than the last change or a day old), not on every read; AWS's own FSx mount line,"
            " accepted where the AWS article says noatime because clean-up by last access"
            " (find -amin, as --emit suggests) needs it"
        )
        return [_f("mount.atime", "PASS", text)]
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
    """The folder's layout for files of the engine's chunk size (``plan/striping.py``, shared
    with kvtool check): the OSTs one chunk file really spans, min(count or OSTs,
    ceil(size / stripe size), OSTs), against what it fills and against the AWS article's
    "stripe count >= nodes" for chunks every node reads (doctor cannot tell shared prefixes
    from one session's chunks, so it holds the folder to both). FSx's default PFL puts files
    under 100 MiB on one OST."""
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
    component = component_for(o.chunk_bytes or 1, layout)
    assert component is not None
    count = component.stripe_count
    evidence = (
        f"component [{component.start}, {component.end or 'EOF'}) stripe_count {count},"
        f" stripe_size {component.stripe_size}; {osts or '?'} OSTs; {o.nodes} node(s)"
    )
    if not o.chunk_bytes:
        return [
            _f(
                "layout.stripe",
                "SKIP",
                "the chunk file's size is not known (pass --model): a file spans at most"
                " ceil(size / stripe size) OSTs, whatever the stripe count",
                evidence,
            )
        ]
    judged = judge_stripes(
        o.chunk_bytes, stripe_count=count, stripe_size=component.stripe_size, osts=osts,
        nodes=o.nodes, fan_in=True, path=facts.path,
    )  # fmt: skip
    return [
        _f(
            "layout.stripe",
            judged.status,
            judged.message,
            f"{evidence}; {judged.rules}",
            judged.fix,
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
