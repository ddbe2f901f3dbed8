"""Every bundled hardware and storage profile loads, validates, round-trips and cites sources."""

from __future__ import annotations

import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import InputError
from kvtool.profiles.hardware import node_profile_from_dict, storage_profile_from_dict
from kvtool.profiles.load import (
    builtin_root,
    load_node_profile,
    load_storage_profile,
    node_profiles,
)

HARDWARE = sorted((builtin_root() / "hardware").glob("*.toml"))
STORAGE = sorted((builtin_root() / "storage").glob("*.toml"))


def to_toml_dict(profile: Any) -> dict[str, Any]:
    data = {k: v for k, v in asdict(profile).items() if v not in ("", (), {})}
    data["aliases"] = list(profile.aliases)
    for key in ("throughput_mbps_per_tib_options", "capacity_sizes_gib"):
        if key in data:
            data[key] = list(data[key])
    if "efa_capacity_step_gib" in data:
        data["efa_capacity_step_gib"] = {
            str(k): v for k, v in data["efa_capacity_step_gib"].items()
        }
    return {"schema_version": 1, **data}


# A figure's source names a first-party publisher (AWS, its API models and docs repos, NVIDIA)
# or says it is an estimate, not published, or kvtool's own choice.
FIRST_PARTY = (
    "AWS ",
    "aws.amazon.com",
    "docs.aws.amazon.com",
    "EC2 DescribeInstanceTypes",
    "botocore",
    "NVIDIA",
    "aws-samples/",
)
NOT_FIRST_PARTY = ("transcri", "not opened", "from memory", "via the", "KARP")


def first_party_or_estimate(source: str) -> bool:
    if source.startswith(("estimate", "not published", "choice:", "not in AWS's")):
        return True
    if any(marker in source for marker in NOT_FIRST_PARTY):
        return False
    return any(marker in source for marker in FIRST_PARTY) or "= not available" in source


@pytest.mark.parametrize("path", HARDWARE + STORAGE, ids=[p.stem for p in HARDWARE + STORAGE])
def test_every_figure_names_a_first_party_source_or_says_estimate(path: Path) -> None:
    sources = tomllib.loads(path.read_text())["sources"]
    bad = {key: text for key, text in sources.items() if not first_party_or_estimate(text)}
    assert not bad, f"{path.name}: say 'estimate' or cite AWS/NVIDIA for {sorted(bad)}"


@pytest.mark.parametrize("path", HARDWARE, ids=[p.stem for p in HARDWARE])
def test_node_profile_round_trips_and_cites_every_figure(path: Path) -> None:
    raw = tomllib.loads(path.read_text())
    profile = node_profile_from_dict(raw, file=str(path))
    assert node_profile_from_dict(to_toml_dict(profile), file="x") == profile
    numeric = {k for k, v in raw.items() if isinstance(v, int | float) and k != "schema_version"}
    assert numeric | {"gds"} <= set(profile.sources), f"{path.name} lacks a source"
    assert path.stem == profile.name


@pytest.mark.parametrize("path", STORAGE, ids=[p.stem for p in STORAGE])
def test_storage_profile_round_trips_and_cites_every_figure(path: Path) -> None:
    raw = tomllib.loads(path.read_text())
    profile = storage_profile_from_dict(raw, file=str(path))
    assert storage_profile_from_dict(to_toml_dict(profile), file="x") == profile
    numeric = {k for k, v in raw.items() if isinstance(v, int | float) and k != "schema_version"}
    assert numeric <= set(profile.sources), f"{path.name} lacks a source"


def test_the_required_node_types_are_bundled() -> None:
    names = {n.name for n in node_profiles()}
    for required in (
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6-b200.48xlarge",
        "u-p6e-gb200x72",
        "trn2.48xlarge",
        "trn2-ultraserver",
        "trn3-ultraserver",
    ):
        assert required in names


def test_trn3_ultraserver_pools_20_736_gib() -> None:
    """AWS's "20.7 TB" is the Neuron docs' 144 chips x 144 GiB = 20,736 GiB, in 36 servers."""
    trn3 = load_node_profile("Trn3")
    assert (trn3.chips, trn3.instances, trn3.chips_per_instance) == (144, 36, 4)
    assert trn3.hbm_bytes == 20_736 * 2**30


@pytest.mark.parametrize(
    ("name", "instances"), [("u-p6e-gb200x72", 18), ("trn2-ultraserver", 4), ("p5en", 1)]
)
def test_ultraservers_are_several_instances(name: str, instances: int) -> None:
    assert load_node_profile(name).instances == instances


def test_p6_b300_figures_from_the_aws_news_blog() -> None:
    b300 = load_node_profile("p6-b300")
    assert (b300.ena_gbps, b300.efa_gbps, b300.gds) == (300, 6400, True)


def test_gb200_c2c_is_shared_by_two_gpus() -> None:
    """900 GB/s bidirectional per superchip = 450 GB/s a direction for 2 GPUs."""
    assert load_node_profile("p6e-gb200").host_to_chip_gbytes_per_s == 225


def test_storage_facts_that_were_wrong_before() -> None:
    scratch = load_storage_profile("fsx-scratch2")
    assert (scratch.default_throughput_mbps_per_tib, scratch.write_throughput_mbps_per_tib) == (
        200,
        100,
    )
    assert load_storage_profile("s3-express").request_rate_scope == "directory bucket"
    assert load_storage_profile("s3").request_rate_scope == "prefix"


def test_fsx_client_ceilings_match_the_brief() -> None:
    fsx = load_storage_profile("fsx")
    assert (fsx.client_ena_gbps, fsx.client_efa_gbps, fsx.client_efa_gds_gbps) == (100, 700, 1200)


def test_user_profile_with_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    text = HARDWARE[0].read_text().replace("chips = ", "gpus = 8\nchips = ")
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=r"mine\.toml: unknown key 'gpus'"):
        load_node_profile(str(path))


def test_user_profile_with_missing_key_names_it(tmp_path: Path) -> None:
    lines = [ln for ln in HARDWARE[0].read_text().splitlines() if not ln.startswith("efa_gbps")]
    path = tmp_path / "mine.toml"
    path.write_text("\n".join(lines))
    with pytest.raises(InputError, match=r"mine\.toml: missing key 'efa_gbps'"):
        load_node_profile(str(path))


def test_unknown_hardware_suggests_closest() -> None:
    with pytest.raises(InputError) as info:
        load_node_profile("p5enn")
    assert "p5en" in info.value.hint
