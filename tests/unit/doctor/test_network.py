"""The network checks alone, on a recorded healthy node and its variants: EFA carries the
file system's traffic, LNet's counters, GPUDirect Storage's mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.doctor.checks import DoctorOptions
from kvtool.doctor.network import check_efa, check_gds, check_lnet_health
from kvtool.probe.gather import GatherOptions, gather
from kvtool.probe.host import SnapshotHost

from .snapshots import KV_PATH, broken, healthy, sample, variant


def facts(folder: Path):
    return gather(SnapshotHost(folder), KV_PATH, GatherOptions())


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return healthy(tmp_path_factory.mktemp("snap") / "healthy")


def test_a_healthy_node_passes_every_network_check(base: Path) -> None:
    node = facts(base)
    options = DoctorOptions(gds="required")
    found = [*check_efa(node, options), *check_lnet_health(node, options)]
    found += check_gds(node, options)
    assert found
    assert {f.status for f in found} == {"PASS"}, [(f.id, f.status) for f in found]
    assert {f.area for f in found} >= {"network", "gds"}


def test_tcp_in_place_of_efa_fails_and_lnet_timeouts_warn(base: Path, tmp_path: Path) -> None:
    over_tcp = {f.id: f for f in check_efa(facts(broken("tcp", base, tmp_path / "t")),
                                           DoctorOptions())}  # fmt: skip
    assert over_tcp["network.efa_carries"].status == "FAIL"
    stats = sample("lnetctl_stats_show_fsx_client.txt").replace(
        "network_timeout_count: 0", "network_timeout_count: 12"
    )
    (lnet,) = check_lnet_health(facts(variant(base, tmp_path / "l", lnet_stats=stats)),
                                DoctorOptions())  # fmt: skip
    assert lnet.status == "WARN"
    assert "network_timeout_count=12" in lnet.evidence


def test_gds_off_is_skipped_not_graded(base: Path) -> None:
    found = check_gds(facts(base), DoctorOptions(gds="off"))
    assert {f.status for f in found} == {"SKIP"}
