"""FSx for Lustre Intelligent-Tiering for a plan's released sessions (plan/tiering.py) and its
price beside FSx hot + S3 and all-FSx (plan/cost.py, issue 49); docs/planning.md's figures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.inputs.prices import resolve_prices
from kvtool.plan.cost import deployment_cost
from kvtool.plan.tiering import FIRST_BYTE_S, plan_tiering
from tests.unit.plan.test_cost_metadata import trn3

DOC = " ".join((Path(__file__).parents[3] / "docs" / "planning.md").read_text().split())
EXAMPLE = resolve_prices(None)
SESSION = 541_165_879_296  # 1,048,576 x 516,096 B


def test_it_is_sized_for_the_released_sessions_restore() -> None:
    """16 released sessions at once, within recompute: 8.66 TB at 3,888 MB/s, 4,000 MBps;
    4,238 opens a second, 6,000 Metadata IOPS; its restore is bytes-bound."""
    t = plan_tiering(trn3(2**20, 500, mean_idle_s=1_800))
    assert t is not None
    assert t.stored_bytes == 358 * SESSION
    r = t.restore
    assert (r.objects, r.object_bytes) == (9_437_184, 917_504)
    assert r.objects * r.object_bytes == 16 * SESSION
    window = t.deadline_s - r.fixed_s - r.lookup_s
    assert f"{t.deadline_s:,.2f} {window:,.2f}" == "2,227.99 2,226.76"
    assert t.throughput_need_mbps == pytest.approx(16 * SESSION / window / 1e6)
    assert (round(t.throughput_need_mbps), t.throughput_mbps) == (3_888, 4_000)
    assert (round(t.metadata_need_iops), t.metadata_iops) == (4_238, 6_000)
    assert r.transfer_s == pytest.approx(16 * SESSION / 4e9)
    assert r.rate_s == pytest.approx(9_437_184 / 6_000)
    assert r.in_flight_s == pytest.approx(9_437_184 * FIRST_BYTE_S / 1_152)
    assert f"{r.transfer_s:,.2f} {r.rate_s:,.2f} {r.in_flight_s:,.2f}" == (
        "2,164.66 1,572.86 409.60"
    )
    assert f"{r.total_s:,.2f} {t.s3_restore_s:,.2f}" == "2,165.89 1,717.18"
    assert t.met
    assert t.fit().startswith(
        "fits the cold share only: the plan's T3 restores need 21,669 Metadata IOPS, and"
        " Intelligent-Tiering provisions 6,000 or 12,000"
    )


def test_it_is_priced_beside_s3_and_all_fsx() -> None:
    cost = deployment_cost(trn3(2**20, 500, mean_idle_s=1_800), EXAMPLE, sessions=500)
    it = cost.intelligent_tiering
    assert it is not None
    gb = 358 * SESSION / 2**30
    storage, throughput, iops = it.lines
    assert (storage.what, storage.usd_per_month) == ("storage", pytest.approx(gb * 0.023))
    assert storage.basis == "180,432 GB x $0.023/GB-month, frequent access tier"
    assert (throughput.usd_per_month, throughput.basis) == (
        4_000 * 0.52,
        "4,000 MBps x $0.52/MBps-month",
    )
    assert iops.usd_per_month == pytest.approx(6_000 * 0.055)
    assert it.usd_per_month == pytest.approx(gb * 0.023 + 2_080 + 330)
    assert it.storage_usd_per_month == pytest.approx(23_040 + 660 + gb * 0.023 + 2_080 + 330)
    assert (round(it.usd_per_month or 0), round(it.storage_usd_per_month or 0)) == (6_560, 30_260)
    assert it.missing == ()


def test_a_missing_it_price_is_named_without_failing_the_plans_total() -> None:
    prices = EXAMPLE._replace(fsx_intelligent_tiering={},
                              instance_hour={"trn3-ultraserver": 100.0})  # fmt: skip
    cost = deployment_cost(trn3(2**20, 500, mean_idle_s=1_800), prices, sessions=500)
    assert cost.usd_per_month is not None
    assert cost.missing == ()
    it = cost.intelligent_tiering
    assert it is not None
    assert (it.usd_per_month, it.storage_usd_per_month) == (None, None)
    assert it.missing == tuple(
        f'fsx_intelligent_tiering."{k}"'
        for k in ("frequent-gb-month", "throughput-mbps-month", "metadata-iops-month")
    )


def test_no_it_option_where_nothing_is_released() -> None:
    plan = trn3(2**20, 500)  # no mean idle time: nothing released
    assert plan_tiering(plan) is None
    assert deployment_cost(plan, EXAMPLE, sessions=500).intelligent_tiering is None


def test_docs_planning_works_the_it_line_by_hand() -> None:
    for figure in (
        "3,888 MB/s, so **4,000 MBps**",
        "9,437,184 / 2,226.76 = 4,238 opens a second, so **6,000 Metadata IOPS**",
        "bytes 8.66 TB / 4,000 MB/s = 2,164.66 s, opens 9,437,184 / 6,000 = 1,572.86 s",
        "9,437,184 x 0.05 s / 1,152 threads = 409.60 s: **2,165.89 s**",
        "slower than S3 through FSx (1,717.18 s)",
        "180,432 GB x $0.023 = $4,150 + 4,000 MBps x $0.52 = $2,080 + 6,000 x $0.055 = $330 ="
        " $6,560 a month",
        "$23,040 + $660 + $6,560 = **$30,260** against FSx hot + S3's $27,850",
    ):
        assert figure in DOC, figure


def test_plan_cost_prints_and_carries_the_it_line(kvtool: Callable) -> None:
    args = ("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
            "--sessions", "500", "--set", "mean_idle=30m", "--cost")  # fmt: skip
    text = kvtool(*args)
    assert text.exit_code == 0, text.stderr
    out = " ".join(text.stdout.split())
    start = out.index("T3 + FSx IT")
    row = out[start : out.index("note:", start)]
    assert "FSx hot +" in row
    assert "30,260" in row
    assert "storage $4,150: 180,432 GB x $0.023/GB-month, frequent access tier" in out
    assert "fits the cold share only" in out
    data = kvtool(*args, "--json")
    assert data.exit_code == 0, data.stderr
    it = json.loads(data.stdout)["results"][0]["cost"]["intelligent_tiering"]
    assert it["storage_usd_per_month"] == pytest.approx(30_259.94, abs=0.01)
    assert [x["what"] for x in it["lines"]] == ["storage", "throughput", "Metadata IOPS"]
