"""FSx for Lustre sizes and throughput: which capacities can be provisioned, what they give. Pure.

AWS provisions SSD file systems (SCRATCH_2, PERSISTENT_1, PERSISTENT_2) at 1,200 GiB, 2,400 GiB
or a multiple of 2,400 GiB (``StorageCapacity`` in the FSx API); an EFA-enabled PERSISTENT_2
file system comes in multiples of 38,400 / 19,200 / 9,600 / 4,800 GiB at 125 / 250 / 500 /
1,000 MB/s per TiB (FSx User Guide, increase-storage-capacity). The steps live in the storage
profile; this module applies them. Aggregate throughput is capacity (TiB) x the per-unit
throughput: 48,000 GiB at 1,000 MB/s/TiB is 46.9 TiB x 1,000 MB/s = 46.9 GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvtool.errors import InputError
from kvtool.profiles.hardware import StorageProfile

GIB = 2**30


@dataclass(frozen=True)
class FileSystem:
    """A file system of one valid size: capacity, per-unit throughput, and whether it was
    assumed (sized by kvtool) rather than given with ``--fsx-capacity``."""

    profile: StorageProfile
    capacity_gib: int
    throughput_mbps_per_tib: int
    efa: bool
    assumed: bool

    @property
    def capacity_bytes(self) -> int:
        """Capacity in bytes."""
        return self.capacity_gib * GIB

    @property
    def read_bytes_per_s(self) -> float:
        """Aggregate read throughput: capacity (TiB) x per-unit throughput (MB/s/TiB)."""
        return self.capacity_gib / 1024 * self.throughput_mbps_per_tib * 1e6

    @property
    def write_bytes_per_s(self) -> float:
        """Aggregate write throughput (SCRATCH_2 writes at half its read rate)."""
        per_tib = self.profile.write_throughput_mbps_per_tib or self.throughput_mbps_per_tib
        return self.capacity_gib / 1024 * per_tib * 1e6


def valid_step_gib(profile: StorageProfile, throughput: int, *, efa: bool) -> int:
    """The capacity increment for this deployment type, throughput tier and EFA setting."""
    if efa and profile.efa_capacity_step_gib:
        return profile.efa_capacity_step_gib.get(throughput, 0) or profile.capacity_step_gib
    return profile.capacity_step_gib


def is_valid_size(
    profile: StorageProfile, capacity_gib: int, throughput: int, *, efa: bool
) -> bool:
    """True when FSx can provision ``capacity_gib`` for this profile and setting."""
    step = valid_step_gib(profile, throughput, efa=efa)
    if not step:
        return True  # a profile without steps (a user's own) constrains nothing
    if efa and profile.efa_capacity_step_gib:
        return capacity_gib > 0 and capacity_gib % step == 0
    return capacity_gib in profile.capacity_sizes_gib or (
        capacity_gib > 0 and capacity_gib % step == 0
    )


def smallest_size_at_least(
    profile: StorageProfile, need_gib: float, throughput: int, *, efa: bool
) -> int:
    """The smallest valid capacity (GiB) that holds ``need_gib``."""
    step = valid_step_gib(profile, throughput, efa=efa)
    if not step:
        return max(1, int(-(-need_gib // 1)))
    if not efa or not profile.efa_capacity_step_gib:
        for size in sorted(profile.capacity_sizes_gib):
            if size >= need_gib:
                return size
    return max(step, int(-(-need_gib // step)) * step)


def nearest_sizes(
    profile: StorageProfile, capacity_gib: float, throughput: int, *, efa: bool
) -> tuple[int, int | None]:
    """The valid capacities just below (None if there is none) and just above ``capacity_gib``."""
    above = smallest_size_at_least(profile, capacity_gib, throughput, efa=efa)
    step = valid_step_gib(profile, throughput, efa=efa) or 1
    below_candidates = (
        [s for s in profile.capacity_sizes_gib if s < capacity_gib]
        if not (efa and profile.efa_capacity_step_gib)
        else []
    )
    multiple = int(capacity_gib // step) * step
    if multiple and multiple < capacity_gib:
        below_candidates.append(multiple)
    return above, max(below_candidates) if below_candidates else None


def file_system(
    profile: StorageProfile,
    *,
    capacity_bytes: int | None,
    throughput_mbps_per_tib: int | None,
    efa: bool,
    need_bytes: int = 0,
    what: str = "--fsx-capacity",
    throughput_what: str = "--fsx-throughput",
) -> FileSystem:
    """The file system a plan uses: the given capacity, checked against the valid sizes, or
    (without one) the smallest valid size that holds ``need_bytes``; the per-unit throughput
    checked against the options the deployment type offers.

    Raises InputError naming ``throughput_what`` and the options for a throughput FSx does not
    offer, and naming ``what`` and the nearest valid sizes for a capacity it cannot provision.
    """
    given = throughput_mbps_per_tib
    if given is not None and given not in profile.throughput_mbps_per_tib_options:
        options = ", ".join(str(o) for o in profile.throughput_mbps_per_tib_options)
        raise InputError(
            f"{throughput_what} {given} is not an FSx option",
            f"{profile.name} offers {options} MB/s per TiB",
        )
    throughput = throughput_mbps_per_tib or profile.default_throughput_mbps_per_tib
    if capacity_bytes is None:
        size = smallest_size_at_least(profile, need_bytes / GIB, throughput, efa=efa)
        return FileSystem(profile, size, throughput, efa, assumed=True)
    gib = capacity_bytes / GIB
    whole = int(gib) if gib == int(gib) else None
    if whole is None or not is_valid_size(profile, whole, throughput, efa=efa):
        above, below = nearest_sizes(profile, gib, throughput, efa=efa)
        sizes = " or ".join(f"{s:,} GiB" for s in (below, above) if s)
        step = valid_step_gib(profile, throughput, efa=efa)
        kind = (
            f"an EFA-enabled {profile.name} at {throughput} MB/s/TiB comes in multiples of"
            f" {step:,} GiB"
            if efa and profile.efa_capacity_step_gib
            else f"{profile.name} comes in 1,200 GiB, 2,400 GiB or multiples of {step:,} GiB"
        )
        raise InputError(
            f"{what} {gib:,.6g} GiB cannot be provisioned: {kind}",
            f"use {sizes}",
        )
    return FileSystem(profile, whole, throughput, efa, assumed=False)
