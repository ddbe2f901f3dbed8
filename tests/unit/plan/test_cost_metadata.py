"""Provisioned Metadata IOPS in a plan's cost (plan/cost.py, issue 49): the ones past what
AUTOMATIC gives the capacity, x $ per IOPS-month; docs/planning.md's figures from kvtool."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.inputs.prices import resolve_prices
from kvtool.inputs.shape import resolve_shape
from kvtool.plan.cost import deployment_cost, plan_cost
from kvtool.plan.deployment import DeploymentPlan, make_hardware, plan_contexts
from kvtool.plan.metadata import MetadataPlan
from kvtool.plan.reload import ReloadAssumptions
from kvtool.profiles.load import load_node_profile, load_storage_profile

DOC = " ".join((Path(__file__).parents[3] / "docs" / "planning.md").read_text().split())
EXAMPLE = resolve_prices(None)


def trn3(ctx: int, sessions: int, **assumed: float) -> DeploymentPlan:
    """Llama 3.1 405B on one Trn3 UltraServer (vLLM, LMCache on FSx PERSISTENT_2, S3)."""
    hardware = make_hardware(load_node_profile("trn3-ultraserver"), load_storage_profile("fsx"),
                             load_storage_profile("s3"))  # fmt: skip
    a = ReloadAssumptions(**assumed)
    return plan_contexts(resolve_shape("llama-3.1-405b"), contexts=[ctx], sessions=sessions,
                         hardware=hardware, assumptions=a).plans[0]  # fmt: skip


def test_a_metadata_bound_t3_bills_its_iops_past_automatic() -> None:
    """1M x 500, mean idle 30m: 38,400 GiB with 24,000 Metadata IOPS where AUTOMATIC gives
    12,000: 12,000 x $0.055 = $660 a month, a T3 line, in the storage beside all-FSx."""
    plan = trn3(2**20, 500, mean_idle_s=1_800)
    md = plan.t3_size.metadata
    assert (md.iops, md.mode, md.automatic_iops) == (24_000, "USER_PROVISIONED", 12_000)
    cost = deployment_cost(plan, EXAMPLE, sessions=500)
    line = next(x for x in cost.lines if "Metadata IOPS" in x.what)
    assert line.tier == "T3"
    assert line.what == "24,000 Metadata IOPS (USER_PROVISIONED)"
    assert line.usd_per_month == pytest.approx(12_000 * 0.055)
    assert line.basis == (
        "(24,000 - the 12,000 AUTOMATIC gives 38,400 GiB) = 12,000 x $0.055/IOPS-month"
    )
    released_gb = 358 * 541_165_879_296 / 2**30
    assert cost.storage_usd_per_month == pytest.approx(23_040 + 660 + released_gb * 0.023)
    assert round(cost.storage_usd_per_month or 0) == 27_850
    # all-FSx: 216,000 GiB, whose AUTOMATIC 108,000 Metadata IOPS carry the restores
    assert (cost.all_fsx_gib, cost.all_fsx_usd_per_month) == (216_000, pytest.approx(129_600))


def test_automatic_and_a_given_value_below_it_bill_none() -> None:
    plan = trn3(2**20, 500, mean_idle_s=1_800)
    for given in (12_000, 6_000):
        hw = plan.hardware
        fixed = make_hardware(hw.node, hw.t3, hw.t4, metadata_iops=given)
        p = plan_contexts(resolve_shape("llama-3.1-405b"), contexts=[2**20], sessions=500,
                          hardware=fixed,
                          assumptions=ReloadAssumptions(mean_idle_s=1_800)).plans[0]  # fmt: skip
        assert p.t3_size.metadata.mode == "given"
        cost = deployment_cost(p, EXAMPLE, sessions=500)
        assert not any("Metadata IOPS" in x.what for x in cost.lines)


def test_a_missing_metadata_price_is_named_and_leaves_no_total() -> None:
    prices = EXAMPLE._replace(fsx_metadata_iops_month={},
                              instance_hour={"trn3-ultraserver": 100.0})  # fmt: skip
    cost = deployment_cost(trn3(2**20, 500, mean_idle_s=1_800), prices, sessions=500)
    line = next(x for x in cost.lines if "Metadata IOPS" in x.what)
    assert line.usd_per_month is None
    assert line.basis == (
        'no price: fsx_metadata_iops_month."fsx-lustre-persistent2" is not in the prices'
        " (see the note)"
    )
    assert cost.usd_per_month is None
    assert cost.missing == ('fsx_metadata_iops_month."fsx-lustre-persistent2"',)
    assert all(x.usd_per_month is not None for x in cost.lines if x is not line)


def test_docs_planning_prices_the_trn3_200k_metadata_iops() -> None:
    """Trn3 405B at 200K x 100 spills nothing: T3 is not billed, and a note says what the
    file system the plan sizes, with its Metadata IOPS, would cost (docs/planning.md)."""
    plan = trn3(200_000, 100)
    md = plan.t3_size.metadata
    assert (md.iops, md.automatic_iops, plan.file_system.capacity_gib) == (24_000, 12_000, 24_000)
    cost = deployment_cost(plan, EXAMPLE, sessions=100)
    assert [x.tier for x in cost.lines] == ["T1+T2"]
    note = next(n for n in cost.notes if n.startswith("T3 not billed"))
    assert note.endswith(
        "24,000 GiB with 24,000 Metadata IOPS (USER_PROVISIONED), would cost 24,000 x $0.6 +"
        " (24,000 - 12,000) x $0.055 = $15,060 a month ($660 of it Metadata IOPS)"
    )
    assert "sizes a 24,000 GiB file system with **24,000 Metadata IOPS**" in DOC
    assert "24,000 x $0.6 + (24,000 - 12,000) x $0.055 = $14,400 + **$660** = **$15,060" in DOC


def test_docs_planning_prices_the_pb_case_metadata_iops() -> None:
    assert "(24,000 - 12,000) x $0.055 = $660" in DOC
    assert "storage $23,040 + $660 + $4,150 = **$27,850**" in DOC
    assert "216,000 / 24,000 x 12,000 = 108,000 Metadata IOPS carry the 21,669" in DOC
    plan = trn3(2**20, 500, mean_idle_s=1_800)
    assert f"{plan.t3_size.metadata.need_iops:,.0f}" == "21,669"


def test_plan_cost_prints_the_metadata_line(kvtool: Callable) -> None:
    result = kvtool("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
                    "--sessions", "500", "--set", "mean_idle=30m", "--cost", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    cost = json.loads(result.stdout)["results"][0]["cost"]
    line = next(x for x in cost["lines"] if "Metadata IOPS" in x["what"])
    assert line["usd_per_month"] == 660.0
    assert cost["storage_usd_per_month"] == pytest.approx(27_849.94, abs=0.01)


def test_all_fsx_buys_the_metadata_iops_its_automatic_lacks() -> None:
    """A restore needing 150,000 Metadata IOPS: all-FSx's 216,000 GiB gets 108,000 from
    AUTOMATIC, so it provisions 156,000 and pays for the 48,000 past AUTOMATIC's."""
    plan = trn3(2**20, 500, mean_idle_s=1_800)
    assert plan.release is not None
    need = MetadataPlan(156_000, "USER_PROVISIONED", 12_000, 150_000.0, True)
    cost = plan_cost(plan.hardware, plan.tiers, EXAMPLE, sessions=500, ctx_tokens=2**20,
                     chunk_tokens=256, file_system=plan.file_system,
                     all_fsx_bytes=plan.release.all_fsx_bytes, metadata=need)  # fmt: skip
    assert cost.all_fsx_gib == 216_000
    assert cost.all_fsx_usd_per_month == pytest.approx(129_600 + (156_000 - 108_000) * 0.055)


def test_a_read_back_price_says_when_the_lookup_times_out(kvtool: Callable) -> None:
    """The engine-direct read's request price is what a read would cost; past LMCache's
    lookup timeout (30 chunks of 100 ms HEADs: 7,680 tokens) nothing is read back, and the
    price once read as if it were (issue 49)."""
    long = kvtool("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
                  "--sessions", "500", "--set", "mean_idle=30m", "--cost")  # fmt: skip
    assert long.exit_code == 0, long.stderr
    text = " ".join(long.stdout.split())
    assert (
        "$0.4719 to read one back engine-direct (1,179,648 requests: a GET and 1 lookup(s) an"
        " object, were it read: its lookup times out past 7,680 tokens, and the engine"
        " recomputes)" in text
    )
    short = kvtool("plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "4k", "--sessions",
                   "100000", "--fsx-capacity", "1200GiB", "--t3-path", "ena", "--cost")  # fmt: skip
    assert short.exit_code == 0, short.stderr
    assert "to read one back engine-direct (256 requests" in " ".join(short.stdout.split())
    assert "times out" not in short.stdout.split("T4 requests")[1].split("note:")[0]
