"""A plan's monthly cost from a prices record: each line is its arithmetic, nothing guessed."""

from __future__ import annotations

import pytest

from kvtool.inputs.hardware import resolve_hardware
from kvtool.inputs.shape import resolve_shape
from kvtool.plan.cost import HOURS_PER_MONTH, Prices, plan_cost
from kvtool.plan.deployment import plan_contexts

PRICES = Prices(
    source="test", date="2026-12", region="us-east-1", example=False,
    instance_hour={"p5en.48xlarge": 60.0, "p5.48xlarge": 50.0},
    fsx_gb_month={"fsx-lustre-persistent2@1000": 0.6},
    s3_gb_month={"s3-standard": 0.02}, s3_put_per_1000={"s3-standard": 0.005},
    s3_get_per_1000={"s3-standard": 0.0004}, cross_az_per_gb=0.01,
)  # fmt: skip


def plan(model: str, sessions: int, node: str = "p5en", **hardware: str):  # type: ignore[no-untyped-def]
    shape = resolve_shape(model)
    planned = plan_contexts(shape, contexts=[131_072], sessions=sessions,
                            hardware=resolve_hardware(node, **hardware))  # fmt: skip
    return planned.plans[0]


def cost_of(p, prices, sessions):  # type: ignore[no-untyped-def]
    return plan_cost(p.hardware, p.tiers, prices, sessions=sessions, ctx_tokens=p.ctx_tokens,
                     chunk_tokens=256)  # fmt: skip


def test_nodes_and_the_file_system_each_their_own_line() -> None:
    p = plan("llama-3.1-405b", 100)
    cost = cost_of(p, PRICES, 100)
    nodes, fsx = cost.lines
    assert nodes.usd_per_month == 60.0 * HOURS_PER_MONTH  # one node
    assert fsx.usd_per_month == p.file_system.capacity_gib * 0.6
    assert cost.usd_per_month == nodes.usd_per_month + fsx.usd_per_month
    assert cost.usd_per_session_hour == cost.usd_per_month / (100 * HOURS_PER_MONTH)
    assert cost.all_in_hbm_nodes == p.tiers.nodes_for_all_in_t1 == 34
    assert cost.all_in_hbm_usd_per_month == 34 * 60.0 * HOURS_PER_MONTH
    assert not any("EXAMPLE" in n for n in cost.notes)


def test_no_file_system_line_when_nothing_spills_there() -> None:
    p = plan("llama-3.1-8b", 10)
    cost = cost_of(p, PRICES, 10)
    assert [line.tier for line in cost.lines] == ["T1+T2"]


def test_a_missing_price_is_named_and_the_example_says_it_is_one() -> None:
    p = plan("llama-3.1-8b", 10, node="p4d")
    missing = cost_of(p, PRICES, 10)  # a missing price never fails the plan (issue 49)
    (nodes,) = missing.lines
    assert nodes.usd_per_month is None
    assert (
        nodes.basis == 'no price: instance_hour."p4d.24xlarge" is not in the prices (see the note)'
    )
    assert (missing.usd_per_month, missing.usd_per_session_hour) == (None, None)
    assert missing.all_in_hbm_usd_per_month is None
    assert missing.missing == ('instance_hour."p4d.24xlarge"',)
    assert missing.notes[0].startswith(
        'no total: instance_hour."p4d.24xlarge" missing from test; add it to a prices file'
        " (--prices FILE"
    )
    example = PRICES._replace(example=True, instance_hour={"p4d.24xlarge": 20.0})
    cost = cost_of(p, example, 10)
    assert cost.notes[0].startswith("EXAMPLE prices (test, 2026-12): not current")


def test_s3_storage_a_month_and_requests_per_session() -> None:
    p = plan("llama-3.1-405b", 400, fsx_capacity="4800GiB")
    t4 = next(t for t in p.tiers.tiers if t.name == "T4")
    assert t4.sessions > 0
    cost = cost_of(p, PRICES, 400)
    s3 = next(line for line in cost.lines if line.tier == "T4")
    assert s3.usd_per_month == pytest.approx(t4.used_bytes / 2**30 * 0.02)
    chunks = 131_072 // 256
    assert cost.t4_usd_per_session_written == pytest.approx(chunks * 0.005 / 1000)
    assert cost.t4_usd_per_session_read == pytest.approx(chunks * 0.0004 / 1000)


def test_a_missing_file_system_price_leaves_the_nodes_priced() -> None:
    p = plan("llama-3.1-405b", 100)
    cost = cost_of(p, PRICES._replace(fsx_gb_month={}), 100)
    nodes, fsx = cost.lines
    assert nodes.usd_per_month == 60.0 * HOURS_PER_MONTH
    assert fsx.usd_per_month is None
    assert cost.missing == ('fsx_gb_month."fsx-lustre-persistent2@1000"',)
    assert cost.usd_per_month is None
    assert cost.all_in_hbm_usd_per_month == 34 * 60.0 * HOURS_PER_MONTH


def test_a_tier_the_advice_requires_is_priced_without_sessions_there() -> None:
    p = plan("llama-3.1-8b", 10)
    cost = plan_cost(p.hardware, p.tiers, PRICES, sessions=10, ctx_tokens=p.ctx_tokens,
                     chunk_tokens=256, required=("T1", "T3"))  # fmt: skip
    nodes, fsx = cost.lines
    assert fsx.tier == "T3"
    assert fsx.basis.endswith("required by the advice, no session spills at peak")
    assert cost.usd_per_month == nodes.usd_per_month + fsx.usd_per_month


def test_requests_count_an_object_per_worker_and_the_lookups() -> None:
    """A chunk is one S3 object per worker that saves it (LMCache's keys carry the worker id),
    and reading one back is a GET and the engine's lookup HEAD: the note counted one PUT and
    one GET per chunk, 8x and 16x low for Llama 3.1 405B on a p5en at tp 8 (issue 49)."""
    p = plan("llama-3.1-405b", 400, fsx_capacity="4800GiB")
    t4 = next(path for path in p.paths if path.tier == "T4").requests
    assert (t4.objects_per_chunk, t4.requests_per_object) == (8, 2)
    cost = plan_cost(p.hardware, p.tiers, PRICES, sessions=400, ctx_tokens=p.ctx_tokens,
                     chunk_tokens=256, objects_per_chunk=8, requests_per_object=2)  # fmt: skip
    chunks = 131_072 // 256
    assert cost.t4_usd_per_session_written == pytest.approx(chunks * 8 * 0.005 / 1000)
    assert cost.t4_usd_per_session_read == pytest.approx(chunks * 8 * 2 * 0.0004 / 1000)
    (note,) = [n for n in cost.notes if n.startswith("T4 requests")]
    assert "4,096 PUTs: 512 256-token chunks x 8 objects (one per worker)" in note
    assert "8,192 requests: a GET and 1 lookup(s) an object" in note


def test_the_plans_cost_takes_its_t4_paths_objects(kvtool) -> None:  # type: ignore[no-untyped-def]
    """kvtool plan --cost passes the T4 path's objects and requests (the bundled example's
    $0.005 a 1,000 PUTs and $0.0004 a 1,000 GETs)."""
    import json

    args = ["plan", "llama-3.1-405b", "--hardware", "p5en", "--ctx", "128k", "--sessions", "400",
            "--fsx-capacity", "4800GiB", "--cost", "--json"]  # fmt: skip
    cost = json.loads(kvtool(*args).stdout)["results"][0]["cost"]
    assert cost["t4_usd_per_session_written"] == pytest.approx(
        500 * 8 * 0.005 / 1000, abs=1e-6
    )  # 128k: 500 chunks
    assert cost["t4_usd_per_session_read"] == pytest.approx(500 * 16 * 0.0004 / 1000, abs=1e-6)
