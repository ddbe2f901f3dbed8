"""FSx for Lustre capacities: only sizes AWS can provision, and the nearest ones otherwise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.plan.fsx import file_system, is_valid_size, smallest_size_at_least
from kvtool.profiles.load import load_storage_profile

P2 = load_storage_profile("fsx-lustre-persistent2")
SCRATCH = load_storage_profile("fsx-lustre-scratch2")
GIB = 2**30


@pytest.mark.parametrize(
    ("gib", "efa", "valid"),
    [
        (1200, False, True),
        (2400, False, True),
        (4800, False, True),
        (3600, False, False),  # neither 1,200, 2,400 nor a multiple of 2,400
        (49_152, False, False),  # the README's old 48 TiB
        (48_000, False, True),
        (4800, True, True),  # EFA at 1,000 MB/s/TiB: multiples of 4,800
        (2400, True, False),
        (1200, True, False),
        (9600, True, True),
    ],
)
def test_valid_sizes(gib: int, efa: bool, valid: bool) -> None:
    assert is_valid_size(P2, gib, 1000, efa=efa) is valid


def test_efa_steps_follow_the_throughput_tier() -> None:
    assert is_valid_size(P2, 38_400, 125, efa=True)
    assert not is_valid_size(P2, 19_200, 125, efa=True)
    assert is_valid_size(P2, 19_200, 250, efa=True)


def test_the_readmes_old_48_tib_names_the_nearest_sizes() -> None:
    with pytest.raises(InputError) as info:
        file_system(P2, capacity_bytes=48 * 2**40, throughput_mbps_per_tib=None, efa=True)
    assert "cannot be provisioned" in info.value.message
    assert info.value.hint == "use 48,000 GiB or 52,800 GiB"
    with pytest.raises(InputError) as info:
        file_system(P2, capacity_bytes=3600 * GIB, throughput_mbps_per_tib=None, efa=False)
    assert info.value.hint == "use 2,400 GiB or 4,800 GiB"


def test_without_a_capacity_the_smallest_size_that_holds_the_need_is_assumed() -> None:
    fs = file_system(
        P2, capacity_bytes=None, throughput_mbps_per_tib=None, efa=True, need_bytes=10_000 * GIB
    )
    assert (fs.capacity_gib, fs.assumed) == (14_400, True)
    assert fs.read_bytes_per_s == pytest.approx(14_400 / 1024 * 1000e6)
    small = file_system(
        P2, capacity_bytes=None, throughput_mbps_per_tib=250, efa=False, need_bytes=GIB
    )
    assert small.capacity_gib == 1200


def test_scratch2_writes_at_half_its_read_rate() -> None:
    fs = file_system(SCRATCH, capacity_bytes=2400 * GIB, throughput_mbps_per_tib=None, efa=False)
    assert fs.write_bytes_per_s == pytest.approx(fs.read_bytes_per_s / 2)


@given(
    need=st.integers(1, 2_000_000), efa=st.booleans(), tier=st.sampled_from([125, 250, 500, 1000])
)
def test_smallest_size_is_valid_and_holds_the_need(need: int, efa: bool, tier: int) -> None:
    size = smallest_size_at_least(P2, need, tier, efa=efa)
    assert size >= need
    assert is_valid_size(P2, size, tier, efa=efa)
