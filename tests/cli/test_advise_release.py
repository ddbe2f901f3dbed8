"""``kvtool advise`` and ``kvtool check`` release idle sessions to S3 by the workload's own
mean idle time, as ``kvtool plan --set mean_idle`` does (issue 49, item 2; plan/release.py).

The PB-scale case of docs/planning.md: Llama 3.1 405B, 1M (1,048,576) tokens x 500 sessions
on one Trn3 UltraServer, mean idle 30 minutes: exp(-10m / 30m) = 71.65% of 500 sessions, 358,
are idle past 10 minutes and released; 427 spill past T1 and T2, so 69 stay hot on FSx, whose
37.3 TB take 38,400 GiB (8 of EFA PERSISTENT_2's 4,800 GiB steps) instead of 216,000 GiB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.conftest import CliResult

Run = Callable[..., CliResult]
PB = ("--model", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--nodes", "1")
PB_WORKLOAD = ("--sessions", "500", "--ctx", "1M", "--idle", "30m")


def plan_split(kvtool: Run, idle: str) -> tuple[int, int, int]:
    """(released, hot, FSx GiB) of ``kvtool plan`` on the PB case with --set mean_idle."""
    result = kvtool("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
                    "--sessions", "500", "--set", f"mean_idle={idle}", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)["results"][0]
    release = plan["t4_release"]
    gib = plan["plan"]["t3_file_system"]["capacity_bytes"] // 2**30
    return release["released_sessions"], release["hot_sessions"], gib


def advise_split(kvtool: Run, *args: str) -> tuple[dict, tuple[int, int, int]]:
    result = kvtool("advise", *PB, *args, "--json")
    assert result.exit_code == 0, result.stderr
    placement = json.loads(result.stdout)["placement"]
    release = placement["t4_release"]
    split = (release["released_sessions"], release["hot_sessions"], placement["t3_capacity_gib"])
    return placement, split


def test_advise_splits_the_pb_case_by_the_workloads_idle_time_as_plan_does(kvtool: Run) -> None:
    placement, split = advise_split(kvtool, *PB_WORKLOAD)
    assert math.floor(500 * math.exp(-10 / 30)) == 358
    assert split == (358, 69, 38_400) == plan_split(kvtool, "30m")
    assert placement["t3_capacity_source"] == "sized for capacity"  # it holds 69 and is fast
    tiers = {t["tier"]: t["sessions"] for t in placement["tiers"]}
    assert tiers == {"T1": 30, "T2": 43, "T3": 69, "T4": 358}
    release = placement["t4_release"]
    assert (release["mean_idle_s"], release["mean_idle_source"]) == (1_800, "--idle")
    assert release["all_fsx_bytes"] == 427 * 541_165_879_296  # 1,048,576 x 516,096 B


def test_advise_says_where_the_idle_time_came_from(kvtool: Run, tmp_path: Path) -> None:
    flags = kvtool("advise", *PB, *PB_WORKLOAD)
    assert flags.exit_code == 0, flags.stderr
    text = " ".join(flags.stdout.split())
    assert (
        "at peak: 30 sessions in T1, 43 in T2, 69 on FSx (T3), 358 released to S3 (T4); FSx"
        " 38,400 GiB holds the hot share"
    ) in text
    assert "mean idle 30m (--idle), idle gaps taken as exponential" in text
    workload = tmp_path / "pb.yaml"
    pb = {"model": "llama-3.1-405b", "hardware": "trn3-ultraserver", "sessions": 500}
    workload.write_text(yaml.safe_dump({**pb, "contexts": "1M", "mean_idle": "30m"}))
    from_file = kvtool("advise", str(workload))
    assert from_file.exit_code == 0, from_file.stderr
    assert f"mean idle 30m ({workload}'s mean_idle)" in " ".join(from_file.stdout.split())


def test_an_explicit_set_mean_idle_wins_over_the_workloads_and_says_so(kvtool: Run) -> None:
    """--set mean_idle=1h over --idle 30m: exp(-10m / 1h) of 500, 423, released; 4 of 427
    stay hot, 2.16 TB: the smallest EFA PERSISTENT_2, 4,800 GiB, holds them, but advise sizes
    the FSx as plan does, 24,000 GiB, to restore at the 50K line's speed (before the fix
    advise sized for capacity alone and said 4,800 GiB)."""
    placement, split = advise_split(kvtool, *PB_WORKLOAD, "--set", "mean_idle=1h")
    assert math.floor(500 * math.exp(-1 / 6)) == 423
    assert split == (423, 4, 24_000) == plan_split(kvtool, "1h")
    assert placement["t3_capacity_source"] == "sized for throughput"
    assert placement["t3_capacity_to_hold_gib"] == 4_800
    assert placement["t3_goal_met"] is True
    assert placement["t4_release"]["mean_idle_source"] == "--set mean_idle, over 30m from --idle"
    text = " ".join(kvtool("advise", *PB, *PB_WORKLOAD, "--set", "mean_idle=1h").stdout.split())
    assert "mean idle 1h (--set mean_idle, over 30m from --idle)" in text
    assert (
        "FSx 24,000 GiB holds the hot share (sized for throughput, as kvtool plan sizes it: T3"
        " reload beats recompute from 50,000 tokens (the AWS article's line); 4,800 GiB would"
        " hold what stays on T3)"
    ) in text


def test_advise_set_takes_the_release_keys_alone(kvtool: Run) -> None:
    result = kvtool("advise", *PB, *PB_WORKLOAD, "--set", "mfu=0.5")
    assert result.exit_code == 2
    assert result.stderr.startswith("kvtool: error: --set mfu is not an advise setting")


def test_advise_cost_prices_the_hot_share_beside_all_fsx(kvtool: Run) -> None:
    result = kvtool("advise", *PB, *PB_WORKLOAD, "--cost", "--json")
    assert result.exit_code == 0, result.stderr
    cost = json.loads(result.stdout)["cost"]
    t3 = next(line for line in cost["lines"] if line["tier"] == "T3")
    assert "38,400 GiB" in t3["what"]
    assert cost["all_fsx_gib"] == 216_000


def test_advise_cost_prices_the_fsx_it_prints(kvtool: Run) -> None:
    """At mean_idle 1h the FSx is sized for throughput, 24,000 GiB: --cost prices that one,
    not the 4,800 GiB that would only hold the 4 hot sessions."""
    result = kvtool("advise", *PB, *PB_WORKLOAD, "--set", "mean_idle=1h", "--cost", "--json")
    assert result.exit_code == 0, result.stderr
    cost = json.loads(result.stdout)["cost"]
    t3 = next(line for line in cost["lines"] if line["tier"] == "T3")
    assert "24,000 GiB" in t3["what"], t3


def pb_plan(tmp_path: Path, **fsx: object) -> Path:
    path = tmp_path / "plan.yaml"
    declared = {"deployment_type": "PERSISTENT_2", "storage_type": "SSD",
                "per_unit_storage_throughput": 1000, "efa_enabled": True}  # fmt: skip
    workload = {"model": "llama-3.1-405b", "hardware": "trn3-ultraserver", "sessions": 500,
                "contexts": "1M", "mean_idle": "30m"}  # fmt: skip
    path.write_text(yaml.safe_dump({**workload, "fsx": {**declared, **fsx}}))
    return path


def capacity(kvtool: Run, plan: Path) -> dict:
    result = kvtool("check", str(plan), "--json")
    assert result.exit_code in (0, 1), result.stderr
    return next(f for f in json.loads(result.stdout)["findings"] if f["id"] == "plan.capacity")


def test_check_holds_the_pb_case_on_the_fsx_plan_sizes_for_the_hot_share(
    kvtool: Run, tmp_path: Path
) -> None:
    """38,400 GiB with a DRA holds the peak: 358 sessions released to S3, 69 on FSx (before
    the fix check released nothing and 358 sessions overflowed)."""
    found = capacity(kvtool, pb_plan(tmp_path, storage_capacity_gib=38_400, s3_association=True))
    assert found["status"] == "PASS", found
    assert "T1 30, T2 43, T3 69, released to S3 358, overflow 0" in found["evidence"]
    assert "mean idle 30m (the plan's mean_idle)" in found["evidence"]
    assert found["evidence"].endswith(
        "; 38,400 GiB of FSx holds the hot share (sized for capacity, as kvtool plan sizes it,"
        " already meeting its goal: T3 reload beats recompute from 50,000 tokens (the AWS"
        " article's line))"
    )


def test_check_names_the_fsx_plan_sizes_for_restores_too(kvtool: Run, tmp_path: Path) -> None:
    """At mean_idle 1h 4 sessions stay hot: 4,800 GiB holds them, but kvtool plan sizes 24,000
    GiB so restores beat recompute from 50K tokens; check names that size (it said 4,800)."""
    plan = pb_plan(tmp_path, storage_capacity_gib=38_400, s3_association=True)
    plan.write_text(plan.read_text().replace("mean_idle: 30m", "mean_idle: 1h"))
    found = capacity(kvtool, plan)
    assert found["status"] == "PASS", found
    assert "released to S3 423" in found["evidence"]
    assert "; 24,000 GiB of FSx holds the hot share (sized for throughput" in found["evidence"]
    assert found["evidence"].endswith("; 4,800 GiB would hold what stays on T3)")
    assert plan_split(kvtool, "1h")[2] == 24_000


def test_check_releases_nothing_without_a_data_repository_association(
    kvtool: Run, tmp_path: Path
) -> None:
    found = capacity(kvtool, pb_plan(tmp_path, storage_capacity_gib=38_400))
    assert found["status"] == "FAIL"
    assert (
        "none released to S3: the plan declares no S3 data repository association"
        in (found["evidence"])
    )
    # 427 x 541 GB = 231 TB: 216,000 GiB in 4,800 GiB steps
    assert found["fix"].startswith("grow storage_capacity_gib to 216,000 GiB")


def test_advise_and_plan_agree_on_the_fsx_over_several_nodes(kvtool: Run) -> None:
    """Llama 3.1 70B, 128K x 400 sessions (peak 800) on 8 p5en, mean idle 2m: 14,400 GiB holds
    the 308 hot sessions; each node's share of reads makes restores beat recompute from 50K
    tokens at 43,200 GiB, the size advise and plan both give (advise said 14,400 before)."""
    args = ("--model", "llama-3.1-70b", "--hardware", "p5en", "--nodes", "8", "--engine", "vllm")
    result = kvtool("advise", *args, "--sessions", "400", "--ctx", "128k", "--idle", "2m",
                    "--peak-to-mean", "2", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    placement = json.loads(result.stdout)["placement"]
    sized = (placement["t3_capacity_gib"], placement["t3_capacity_source"])
    assert sized == (43_200, "sized for throughput")
    assert placement["t3_capacity_to_hold_gib"] == 14_400
    plan = kvtool("plan", "llama-3.1-70b", *args[2:], "--ctx", "128k", "--sessions", "800",
                  "--set", "mean_idle=2m", "--json")  # fmt: skip
    assert plan.exit_code == 0, plan.stderr
    fs = json.loads(plan.stdout)["results"][0]["plan"]["t3_file_system"]
    assert (fs["capacity_bytes"] // 2**30, fs["capacity_source"]) == sized
