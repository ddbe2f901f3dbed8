"""Every bundled hardware and storage profile loads, validates, round-trips and cites sources."""

from __future__ import annotations

import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import InputError
from kvtool.profiles.load import (
    builtin_root,
    load_node_profile,
    load_storage_profile,
    node_profiles,
)
from kvtool.profiles.schema import node_profile_from_dict, storage_profile_from_dict

HARDWARE = sorted((builtin_root() / "hardware").glob("*.toml"))
STORAGE = sorted((builtin_root() / "storage").glob("*.toml"))


def to_toml_dict(profile: Any) -> dict[str, Any]:
    data = {k: v for k, v in asdict(profile).items() if v not in ("", ())}
    data["aliases"] = list(profile.aliases)
    if "throughput_mbps_per_tib_options" in data:
        data["throughput_mbps_per_tib_options"] = list(data["throughput_mbps_per_tib_options"])
    return {"schema_version": 1, **data}


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


def test_trn3_ultraserver_pools_the_briefs_20_7_tb() -> None:
    trn3 = load_node_profile("Trn3")
    assert trn3.chips == 144
    assert trn3.hbm_bytes == pytest.approx(20.7e12, rel=0.005)


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
