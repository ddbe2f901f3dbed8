"""Parse the text real tools print into plain records. Pure: text in, records out.

Every parser is tested on recorded real outputs (tests/fixtures/probe/, copied from
shared/reference/samples/ with their provenance) and tolerates what real captures contain:
collapsed whitespace, trailing state flags, inactive devices, older formats. A parser never
raises on odd input; what it cannot read it leaves out, and the checks then say SKIP.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

# --- /proc/mounts ---------------------------------------------------------------------------


class Mount(NamedTuple):
    """One /proc/mounts line: ``source mountpoint fstype options``."""

    source: str
    mountpoint: str
    fstype: str
    options: tuple[str, ...]


def _unescape(field: str) -> str:
    """/proc/mounts escapes space, tab, newline and backslash as octal (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_proc_mounts(text: str) -> list[Mount]:
    """Every well-formed line of /proc/mounts (or /proc/self/mounts)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mounts.append(
            Mount(
                _unescape(fields[0]),
                _unescape(fields[1]),
                fields[2],
                tuple(fields[3].split(",")),
            )
        )
    return mounts


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount that holds ``path`` (an absolute, resolved path): the longest mountpoint that
    is a prefix of it; the last one listed wins a tie (it is mounted on top)."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.mountpoint.rstrip("/") or "/"
        inside = path == point or path.startswith(point + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best.mountpoint.rstrip("/") or "/")):
            best = mount
    return best


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


def mount_kind(fstype: str, source: str = "") -> str:
    """What a file system is to a T3 folder: ``lustre``; ``shared`` (one every node can mount,
    not Lustre: NFS, GPFS, a FUSE client...); ``local`` (node-local, or a block device's);
    ``unknown``. The one rule doctor's ``mount.shared`` grades and bench and capacity say
    beside their figures."""
    if fstype == "lustre":
        return "lustre"
    if fstype in SHARED_FILE_SYSTEMS or fstype.startswith("fuse."):
        return "shared"
    if fstype in LOCAL_FILE_SYSTEMS or source.startswith("/dev/"):
        return "local"
    return "unknown"


LUSTRE_SOURCE = re.compile(
    r"^(?P<nids>[^:]+@(?:tcp|efa|o2ib)\d*(?::[^:]+@(?:tcp|efa|o2ib)\d*)*):/(?P<name>\S+)$"
)


def lustre_mount_name(source: str) -> str | None:
    """``10.1.1.154@tcp:/krvlrbev`` -> ``krvlrbev`` (the FSx MountName), else None."""
    match = LUSTRE_SOURCE.match(source)
    return match.group("name") if match else None


# --- lfs getstripe -d -------------------------------------------------------------------------


class StripeComponent(NamedTuple):
    """One layout component: files' byte range [start, end) and how it is striped.
    ``end`` None means EOF; ``stripe_count`` -1 means every OST."""

    start: int
    end: int | None
    stripe_count: int
    stripe_size: int


_STRIPE_LINE = re.compile(r"stripe_count:\s*(-?\d+)\s+stripe_size:\s*(\d+)", re.IGNORECASE)
_EXTENT_START = re.compile(r"lcme_extent\.e_start:\s*(\d+)")
_EXTENT_END = re.compile(r"lcme_extent\.e_end:\s*(\d+|EOF)")


def parse_lfs_getstripe_dir(text: str) -> list[StripeComponent]:
    """A directory's default layout from ``lfs getstripe -d DIR``: one component for a plain
    layout, one per ``lcme_extent`` for a progressive file layout (PFL). Empty when the
    directory has no default of its own (it inherits the file system's)."""
    components: list[StripeComponent] = []
    start: int | None = None
    end: int | None = None
    for line in text.splitlines():
        if m := _EXTENT_START.search(line):
            start = int(m.group(1))
        elif m := _EXTENT_END.search(line):
            end = None if m.group(1) == "EOF" else int(m.group(1))
        elif m := _STRIPE_LINE.search(line):
            components.append(
                StripeComponent(
                    start=start if start is not None else 0,
                    end=end if start is not None else None,
                    stripe_count=int(m.group(1)),
                    stripe_size=int(m.group(2)),
                )
            )
            start = end = None
    return components


def component_for(size_bytes: int, components: list[StripeComponent]) -> StripeComponent | None:
    """The component that lays out the last byte of a file of ``size_bytes`` (the widest one
    such a file reaches)."""
    last = max(size_bytes - 1, 0)
    for component in components:
        if component.start <= last and (component.end is None or last < component.end):
            return component
    return components[-1] if components else None


# --- lfs df [-i] ------------------------------------------------------------------------------


class Target(NamedTuple):
    """One MDT or OST row of ``lfs df`` (bytes or inodes), with its state flags."""

    kind: str  # "MDT" or "OST"
    number: int
    total: float
    used: float
    use_percent: int
    flags: str
    active: bool = True


_SIZE_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50, "E": 2**60}
_DF_ROW = re.compile(
    r"^\S+_UUID\s+(?P<total>[\d.]+[KMGTPE]?)\s+(?P<used>[\d.]+[KMGTPE]?)\s+"
    r"(?P<avail>[\d.]+[KMGTPE]?)\s+(?P<pct>\d+)%\s+\S*\[(?P<kind>MDT|OST):(?P<index>\d+)\]"
    r"\s*(?P<flags>[A-Za-z]*)\s*$"
)
_DF_INACTIVE = re.compile(r"^\S*(?P<kind>MDT|OST)(?P<index>[0-9a-fA-F]{4})\s*:\s*inactive device")


def _amount(text: str) -> float:
    suffix = text[-1] if text[-1] in _SIZE_SUFFIX and not text[-1].isdigit() else ""
    number = text[:-1] if suffix else text
    return float(number) * _SIZE_SUFFIX[suffix]


def parse_lfs_df(text: str) -> list[Target]:
    """MDT and OST rows of ``lfs df``, ``lfs df -h`` or ``lfs df -i``; inactive devices are
    kept as ``active=False`` with no figures."""
    targets: list[Target] = []
    for line in text.splitlines():
        line = line.strip()
        if m := _DF_ROW.match(line):
            targets.append(
                Target(
                    kind=m.group("kind"),
                    number=int(m.group("index")),
                    total=_amount(m.group("total")),
                    used=_amount(m.group("used")),
                    use_percent=int(m.group("pct")),
                    flags=m.group("flags"),
                )
            )
        elif m := _DF_INACTIVE.match(line):
            targets.append(
                Target(m.group("kind"), int(m.group("index"), 16), 0, 0, 0, "", active=False)
            )
    return targets


# --- lctl get_param ---------------------------------------------------------------------------


def parse_lctl_params(text: str) -> dict[str, str]:
    """``param.path=value`` lines of ``lctl get_param``; multi-line values keep their first
    line (``llite.*.max_cached_mb=`` prints its table on the following lines)."""
    params: dict[str, str] = {}
    for line in text.splitlines():
        if "=" not in line or line.startswith(" "):
            continue
        key, _, value = line.partition("=")
        if " " in key.strip():
            continue
        params[key.strip()] = value.strip()
    return params


def param_values(params: dict[str, str], suffix: str, prefix: str = "") -> list[str]:
    """Values of every ``prefix*.suffix`` parameter: ``param_values(p, "max_rpcs_in_flight",
    "osc.")`` gives one value per OST."""
    return [v for k, v in params.items() if k.startswith(prefix) and k.endswith("." + suffix)]


class OstConnection(NamedTuple):
    """``osc.*.ost_server_uuid``: the OST, its import state, whether it is deactivated."""

    target: str
    state: str
    deactivated: bool


def parse_ost_server_uuid(text: str) -> list[OstConnection]:
    """``osc.X.ost_server_uuid=<fs>-OST0000_UUID<TAB>FULL[<TAB>DEACTIVATED]`` per OST."""
    found = []
    for key, value in parse_lctl_params(text).items():
        if not key.endswith("ost_server_uuid"):
            continue
        parts = value.split()
        if len(parts) >= 2:
            found.append(OstConnection(parts[0], parts[1], "DEACTIVATED" in parts[2:]))
    return found


# --- modules and modprobe ---------------------------------------------------------------------


def parse_lsmod(text: str) -> set[str]:
    """Module names from ``lsmod`` (or /proc/modules)."""
    names = set()
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] != "Module":
            names.add(fields[0])
    return names


def parse_modprobe_options(text: str) -> dict[str, str]:
    """``options MODULE key=value ...`` lines as ``{"MODULE.key": "value"}``."""
    options: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 3 and fields[0] == "options":
            for pair in fields[2:]:
                key, _, value = pair.partition("=")
                options[f"{fields[1]}.{key}"] = value
    return options


# --- lnetctl net show -v ------------------------------------------------------------------------


class LnetNi(NamedTuple):
    """One LNet network interface: its net type (tcp, efa, o2ib), NID, status and counters."""

    net: str
    nid: str
    status: str
    send_count: int | None
    recv_count: int | None


def parse_lnetctl_net_show(text: str) -> list[LnetNi]:
    """NIs of ``lnetctl net show [-v]`` (YAML-like); counters are None without ``-v``.

    Also reads the abbreviated before/after excerpts people paste (``- net type: efa`` followed
    by ``send_count:`` lines without a ``nid:``)."""
    nis: list[LnetNi] = []
    net = ""
    current: dict[str, Any] | None = None

    def flush() -> None:
        if current is not None:
            nis.append(
                LnetNi(
                    net,
                    current.get("nid", f"?@{net}"),
                    current.get("status", "unknown"),
                    current.get("send_count"),
                    current.get("recv_count"),
                )
            )

    for raw in text.splitlines():
        line = raw.strip()
        if m := re.match(r"-?\s*net type:\s*(\S+)", line):
            flush()
            net, current = m.group(1), {}
        elif m := re.match(r"-\s*nid:\s*(\S+)", line):
            if current and "nid" in current:
                flush()
                current = {}
            if current is None:
                current = {}
            current["nid"] = m.group(1)
        elif current is not None and (m := re.match(r"status:\s*(\S+)", line)):
            current["status"] = m.group(1)
        elif current is not None and (m := re.match(r"(send_count|recv_count):\s*(\d+)", line)):
            current[m.group(1)] = int(m.group(2))
    flush()
    return [ni for ni in nis if ni.net != "lo"]


def sent_by_net(nis: list[LnetNi]) -> dict[str, int]:
    """Total ``send_count`` per net type (tcp, efa): the counters the EFA proof compares."""
    totals: dict[str, int] = {}
    for ni in nis:
        if ni.send_count is not None:
            totals[ni.net] = totals.get(ni.net, 0) + ni.send_count
    return totals


def parse_lnetctl_stats(text: str) -> dict[str, int]:
    """``lnetctl stats show``: every ``name: integer`` counter (send_count, drop_count,
    resend_count, *_timeout_count...)."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*(\w+):\s*(\d+)\s*$", text, re.M)}


LNET_TROUBLE = (
    "drop_count",
    "resend_count",
    "response_timeout_count",
    "network_timeout_count",
    "local_dropped_count",
    "local_timeout_count",
    "remote_dropped_count",
    "remote_timeout_count",
)


# --- GPUDirect Storage --------------------------------------------------------------------------


class NvfsStats(NamedTuple):
    """``/proc/driver/nvidia-fs/stats``: whether counting is on, and the read counters."""

    io_stats_enabled: bool
    reads: int
    read_mib: int
    ops_read: int


def parse_nvidia_fs_stats(text: str) -> NvfsStats | None:
    """The read side of the nvidia-fs statistics; None when the text is not that file."""
    if "NVFS" not in text and "nvidia-fs" not in text.lower():
        return None
    enabled = bool(re.search(r"IO stats:\s*Enabled", text))
    reads = re.search(r"^Reads\s*:\s*n=(\d+).*?readMiB=(\d+)", text, re.MULTILINE)
    ops = re.search(r"^Ops\s*:\s*Read=(\d+)", text, re.MULTILINE)
    return NvfsStats(
        io_stats_enabled=enabled,
        reads=int(reads.group(1)) if reads else 0,
        read_mib=int(reads.group(2)) if reads else 0,
        ops_read=int(ops.group(1)) if ops else 0,
    )


def parse_cufile_json(text: str) -> dict[str, Any] | None:
    """``/etc/cufile.json``, which allows ``//`` comments; None when it is not JSON."""
    stripped = re.sub(r"(?m)^\s*//.*$|(?<=[,{\[\s])//[^\n\"]*$", "", text)
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


class GdsCheck(NamedTuple):
    """``gdscheck -p``: the platform verdict, GPUs that support GDS, compat settings, and the
    Lustre row (``DDN EXAScaler`` in newer versions, ``LUSTRE`` in old ones)."""

    verified: bool
    gpus_supporting: int
    gpus: int
    use_compat_mode: bool | None
    force_compat_mode: bool | None
    lustre_supported: bool | None


def parse_gdscheck(text: str) -> GdsCheck:
    """Read ``gdscheck -p``; absent lines leave their fields None."""

    def flag(name: str) -> bool | None:
        m = re.search(rf"{re.escape(name)}\s*:\s*(true|false)", text)
        return None if m is None else m.group(1) == "true"

    lustre = re.search(r"^\s*(?:DDN EXAScaler|LUSTRE)\s*:\s*(\S+)", text, re.MULTILINE)
    gpu_lines = re.findall(r"^\s*GPU index \d+ .*$", text, re.MULTILINE)
    return GdsCheck(
        verified="Platform verification succeeded" in text,
        gpus_supporting=sum("supports GDS" in line for line in gpu_lines),
        gpus=len(gpu_lines),
        use_compat_mode=flag("properties.use_compat_mode"),
        force_compat_mode=flag("properties.force_compat_mode"),
        lustre_supported=None if lustre is None else lustre.group(1).startswith("Supported"),
    )


# --- /proc ----------------------------------------------------------------------------------------


def parse_meminfo_gib(text: str) -> float | None:
    """``MemTotal:`` of /proc/meminfo in GiB."""
    m = re.search(r"^MemTotal:\s*(\d+)\s*kB", text, re.MULTILINE)
    return None if m is None else int(m.group(1)) / 2**20


def parse_meminfo_available_bytes(text: str) -> int | None:
    """``MemAvailable:`` of /proc/meminfo in bytes (what can be allocated without swapping)."""
    m = re.search(r"^MemAvailable:\s*(\d+)\s*kB", text, re.MULTILINE)
    return None if m is None else int(m.group(1)) * 1024


def parse_cpu_count(text: str) -> int | None:
    """Logical CPUs in /proc/cpuinfo (``processor`` lines)."""
    count = len(re.findall(r"^processor\s*:", text, re.MULTILINE))
    return count or None


# --- GPUs: the driver, PCI links and NUMA placement in sysfs -------------------------------------

# PCIe generations by their transfer rate per lane, as sysfs names it (``32.0 GT/s PCIe``)
PCIE_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def parse_nvidia_driver_version(text: str) -> str | None:
    """The kernel module's version in ``/proc/driver/nvidia/version`` (``580.95.05``), from the
    proprietary (``NVIDIA UNIX x86_64 Kernel Module  550.135``) and the open
    (``NVIDIA UNIX Open Kernel Module for x86_64  580.95.05``) modules' lines alike."""
    m = re.search(r"^NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)\b", text,
                  re.MULTILINE)  # fmt: skip
    return None if m is None else m.group(1)


def parse_pcie_speed(text: str) -> int | None:
    """The PCIe generation of a sysfs ``current_link_speed``/``max_link_speed``
    (``32.0 GT/s PCIe`` on newer kernels, ``8 GT/s`` on older ones); None for ``Unknown``."""
    m = re.match(r"\s*([\d.]+)\s*GT/s", text)
    if m is None:
        return None
    try:
        return PCIE_GENERATIONS.get(float(m.group(1)))
    except ValueError:
        return None


def parse_whole(text: str) -> int | None:
    """A sysfs number (``16``, ``-1``); None when it is not one."""
    try:
        return int(text.strip())
    except ValueError:
        return None


def parse_cpulist(text: str) -> frozenset[int]:
    """A kernel CPU list (``0-47,96-143``, as in ``local_cpulist``) as CPU numbers; empty when
    the text is not one."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            return frozenset()
        cpus.update(range(int(low), int(high if dash else low) + 1))
    return frozenset(cpus)


# --- Lustre HSM: lfs hsm_state, lfs path2fid ------------------------------------------------------

# the HSM flags (lustre_user.h enum hsm_states)
HS_EXISTS, HS_DIRTY, HS_RELEASED, HS_ARCHIVED = 0x1, 0x2, 0x4, 0x8
HS_NORELEASE, HS_NOARCHIVE, HS_LOST = 0x10, 0x20, 0x40


class HsmState(NamedTuple):
    """A file's HSM flags as ``lfs hsm_state`` prints them, and its archive id (0: none)."""

    flags: int
    archive_id: int = 0

    @property
    def kind(self) -> str:
        """What the flags mean for a copy in S3: ``released`` (its data is only in S3),
        ``dirty`` (changed since its export: the S3 copy is stale), ``archived`` (an up-to-date
        copy is in S3: it may be released), ``lost`` (the copy is unusable), ``none`` (never
        exported)."""
        if self.flags & HS_RELEASED:
            return "released"
        if self.flags & HS_LOST:
            return "lost"
        if self.flags & HS_DIRTY:
            return "dirty"
        if self.flags & HS_ARCHIVED:
            return "archived"
        return "none"

    @property
    def releasable(self) -> bool:
        """What the MDT lets ``lfs hsm_release`` release (mdt_open.c ``mdt_hsm_release_allow``):
        archived, and neither dirty, never_release nor lost; and not released already."""
        no = HS_DIRTY | HS_NORELEASE | HS_LOST | HS_RELEASED
        return bool(self.flags & HS_ARCHIVED) and not self.flags & no


_HSM_LINE = re.compile(
    r"^(?P<path>.+): \((?P<flags>0x[0-9a-fA-F]{1,8})\)(?P<names>(?: [a-z_]+)*)"
    r"(?:, archive_id: ?(?P<id>\d+))?,?\s*$"
)


def parse_lfs_hsm_state(text: str) -> dict[str, HsmState]:
    """``lfs hsm_state FILE...``: each file as given -> its state (lfs.c ``lfs_hsm_state``
    prints ``path: (0x%08x)`` then the flags' names, then ``, archive_id:N``). The flags are
    read from the hex value, not the names. A file lfs could not read is on stderr, not here."""
    states: dict[str, HsmState] = {}
    for line in text.splitlines():
        m = _HSM_LINE.match(line)
        if m is not None:
            states[m.group("path")] = HsmState(int(m.group("flags"), 16), int(m.group("id") or 0))
    return states


_FID = r"\[0x[0-9a-fA-F]+:0x[0-9a-fA-F]+:0x[0-9a-fA-F]+\]"
_FID_LINE = re.compile(rf"^(?:(?P<path>.+): )?(?P<fid>{_FID})\s*$")


def parse_lfs_path2fid(text: str, paths: list[str]) -> dict[str, str]:
    """``lfs path2fid FILE...``: each file -> its FID (``[0x200000403:0x11f:0x0]``). One file
    gets the FID alone on its line; several get ``path: FID`` each (lfs.c ``lfs_path2fid``)."""
    fids: dict[str, str] = {}
    for line in text.splitlines():
        m = _FID_LINE.match(line)
        if m is None:
            continue
        path = m.group("path")
        if path is None:
            if len(paths) != 1:
                continue
            path = paths[0]
        fids[path] = m.group("fid")
    return fids
