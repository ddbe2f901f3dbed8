"""The cluster a plan is made for (plan/cluster.py): the client path it can take."""

from __future__ import annotations

from kvtool.plan.cluster import client_path, make_hardware, uses_gds
from kvtool.plan.deployment import plan_contexts
from kvtool.profiles.load import load_node_profile, load_storage_profile

from .conftest import model, shape

FSX = load_storage_profile("fsx")
S3 = load_storage_profile("s3")


def test_a_scratch_file_system_read_over_efa_gds_says_it_goes_over_ena() -> None:
    """SCRATCH_2 cannot be EFA-enabled: the plan used ENA/TCP silently and still pinned the
    GDS buffer."""
    spec, _ = model("llama-3.1-70b")
    scratch = load_storage_profile("fsx-lustre-scratch2")
    asked = make_hardware(load_node_profile("p5en"), scratch, S3, t3_path="efa_gds")
    plan = plan_contexts(shape(spec), contexts=[131_072], sessions=500, hardware=asked).plans[0]
    assert plan.notes[0].startswith("--t3-path efa-gds is not available: fsx-lustre-scratch2")
    assert "T3 reads go over ENA/TCP" in plan.notes[0]
    assert not any("GDS path pins" in note for note in plan.notes)
    plain = make_hardware(load_node_profile("p5en"), scratch, S3, t3_path="ena")
    same = plan_contexts(shape(spec), contexts=[131_072], sessions=500, hardware=plain).plans[0]
    assert plan.tiers.kv_space_bytes_per_node == same.tiers.kv_space_bytes_per_node


def test_the_client_path_is_what_the_file_system_allows() -> None:
    p5en = load_node_profile("p5en")
    gds = make_hardware(p5en, FSX, S3, t3_path="efa_gds")
    assert (client_path(gds), uses_gds(gds)) == ("efa_gds", True)
    plain = make_hardware(p5en, FSX, S3)
    assert (client_path(plain), uses_gds(plain)) == ("efa", False)


def test_an_engine_over_nodes_is_planned_as_one_node_of_their_sum() -> None:
    import pytest

    from kvtool.errors import InputError
    from kvtool.plan.cluster import over_nodes

    node = load_node_profile("p5en")
    hardware = make_hardware(node, load_storage_profile("fsx-lustre-persistent2"),
                             load_storage_profile("s3-standard"), nodes=4)  # fmt: skip
    assert over_nodes(hardware, 1) is hardware
    two = over_nodes(hardware, 2)
    assert (two.nodes, two.engine_nodes, two.node.name) == (2, 2, "2 x p5en.48xlarge")
    assert (two.node.chips, two.node.hbm_bytes) == (16, 2 * node.hbm_bytes)
    assert two.node.host_memory_bytes == 2 * node.host_memory_bytes
    assert (two.node.efa_gbps, two.node.instances) == (2 * node.efa_gbps, 2)
    assert two.node.chips_per_instance == 8  # tensor parallel stays within one
    with pytest.raises(InputError, match="--nodes 4 is not a whole number of engines over 3"):
        over_nodes(hardware, 3)
