"""The AWS checks alone, on a recorded healthy node: the file system as FSx describes it
becomes the facts the settings rules grade (the same rules kvtool check applies)."""

from __future__ import annotations

import pytest

from kvtool.doctor.aws import check_aws, described_facts
from kvtool.doctor.checks import DoctorOptions
from kvtool.probe.gather import GatherOptions, gather
from kvtool.probe.host import SnapshotHost

from .snapshots import KV_PATH, healthy


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    folder = healthy(tmp_path_factory.mktemp("snap") / "healthy")
    return gather(SnapshotHost(folder), KV_PATH, GatherOptions())


def test_the_described_file_system_becomes_the_settings_facts(node) -> None:
    fs = node.aws.file_system
    assert fs is not None
    settings = described_facts(node.aws, fs)
    assert settings.deployment_type == "PERSISTENT_2"
    assert settings.storage_capacity_gib == 28_800
    assert settings.per_unit_storage_throughput == 1000


def test_the_throughput_is_held_to_the_nodes_links(node) -> None:
    one = {f.id: f for f in check_aws(node, DoctorOptions(nodes=1))}
    many = {f.id: f for f in check_aws(node, DoctorOptions(nodes=16))}
    assert "28.1 GB/s per node against a 87.5 GB/s client link" in one["aws.throughput"].message
    assert "1.8 GB/s per node" in many["aws.throughput"].message  # shared by 16 nodes
    assert "for 16 node(s)" in many["aws.throughput"].evidence
    assert {one["aws.throughput"].status, many["aws.throughput"].status} == {"WARN"}
