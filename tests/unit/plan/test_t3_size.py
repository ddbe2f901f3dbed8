"""The T3 a plan sizes when the user gave none: for what spills there, and for reads that beat
recompute from the AWS article's 50K-token line (or restore within ``restore_slo``)."""

from __future__ import annotations

import pytest

from kvtool.plan.deployment import make_hardware, plan_contexts
from kvtool.plan.reload import ReloadAssumptions
from kvtool.plan.t3_size import FOR_CAPACITY, FOR_THROUGHPUT, GIVEN, size_t3
from kvtool.profiles.load import load_node_profile, load_storage_profile

from .conftest import model, shape

FSX, S3 = load_storage_profile("fsx"), load_storage_profile("s3")
GIB = 2**30


def hardware(node: str = "p5en", **options: object):  # type: ignore[no-untyped-def]
    return make_hardware(load_node_profile(node), FSX, S3, **options)  # type: ignore[arg-type]


def test_the_smallest_valid_size_whose_share_per_node_meets_the_deadline() -> None:
    """100 GB to restore in 10 s needs 10 GB/s per node: 20 GB/s for two nodes, 20,480 GiB
    at 1,000 MB/s/TiB, so 24,000 GiB in EFA-enabled PERSISTENT_2's 4,800 GiB steps (19,200
    gives 9.4 GB/s a node: 10.7 s)."""
    two = hardware(nodes=2)
    sized = size_t3(two, 10 * GIB, reload_s=lambda share: 100e9 / share, deadline_s=10.0,
                    link_bytes_per_s=87.5e9, goal="100 GB in 10 s")  # fmt: skip
    assert (sized.source, sized.file_system.capacity_gib, sized.capacity_gib) == (
        FOR_THROUGHPUT, 24_000, 4_800
    )  # fmt: skip
    assert sized.goal_met
    assert sized.share_bytes_per_s == pytest.approx(24_000 / 1024 * 1e9 / 2)
    assert 100e9 / (19_200 / 1024 * 1e9 / 2) > 10.0  # one step less misses it
    holds = size_t3(two, 10 * GIB, reload_s=lambda share: 1e9 / share, deadline_s=10.0,
                    link_bytes_per_s=87.5e9, goal="1 GB in 10 s")  # fmt: skip
    assert (holds.source, holds.file_system.capacity_gib) == (FOR_CAPACITY, 4_800)
    out_of_reach = size_t3(two, 10 * GIB, reload_s=lambda share: 1e12 / share, deadline_s=10.0,
                           link_bytes_per_s=87.5e9, goal="1 TB in 10 s")  # fmt: skip
    assert (out_of_reach.source, out_of_reach.goal_met) == (FOR_CAPACITY, False)
    assert out_of_reach.restore_s == pytest.approx(1e12 / 87.5e9)
    given = size_t3(hardware(nodes=2, fsx_capacity_bytes=9_600 * GIB), 10 * GIB,
                    reload_s=lambda share: 100e9 / share, deadline_s=10.0,
                    link_bytes_per_s=87.5e9, goal="100 GB in 10 s")  # fmt: skip
    assert (given.source, given.file_system.capacity_gib, given.goal_met) == (GIVEN, 9_600, False)


def _plan(name: str, ctx: int, sessions: int = 1, **options: object):  # type: ignore[no-untyped-def]
    spec, _ = model(name)
    assumptions = options.pop("assumptions", None)
    kwargs = {} if assumptions is None else {"assumptions": assumptions}
    return plan_contexts(shape(spec), contexts=[ctx], sessions=sessions,
                         hardware=hardware(**options), **kwargs).plans[0]  # type: ignore[arg-type]  # fmt: skip


def test_the_articles_line_holds_for_the_t3_kvtool_sizes() -> None:
    """The article: above 50K tokens reading back from T3 beats recompute. With the smallest
    FSx that holds the spill (4,800 GiB) it did not (T3 from 64,350 tokens, S3 ahead); with
    the one kvtool sizes it does, and T3 reads faster than S3."""
    plan = _plan("llama-3.1-70b", 50_000)
    assert plan.t3_size.source == FOR_THROUGHPUT
    assert plan.file_system.capacity_gib == 9_600
    assert plan.crossovers["T3"] is not None
    assert plan.crossovers["T3"] <= 50_000
    assert plan.crossovers["T4"] is None  # LMCache gives S3 lookups past 7,680 tokens up
    waited = _plan("llama-3.1-70b", 50_000, assumptions=ReloadAssumptions(lookup_timeout_s=3600))
    assert plan.crossovers["T3"] < waited.crossovers["T4"]  # type: ignore[operator]
    assert not any(note.startswith("S3 out-reads") for note in plan.notes)


def test_eight_nodes_share_a_file_system_sized_for_all_of_them() -> None:
    """1,000 sessions on 8 nodes share one FSx: a 50K restore took 447 s against 51 s of
    recompute on the 4,800 GiB one; sized for the eight, T3 wins from below 50K."""
    plan = _plan("llama-3.1-70b", 50_000, sessions=1_000, nodes=8)
    assert plan.t3_size.source == FOR_THROUGHPUT
    assert plan.file_system.capacity_gib == 43_200
    assert plan.crossovers["T3"] is not None
    assert plan.crossovers["T3"] <= 50_000
    row = next(r for r in plan.break_even if r.ctx_tokens == 50_000)
    assert row.reload_s["T3"] < row.recompute_s
    # docs/planning.md's table: T3 from 45,775 tokens; S3, object by object, never on
    # LMCache's 3 s lookup timeout, from 1,102,211 with an hour's
    assert (plan.crossovers["T3"], plan.crossovers["T4"]) == (45_775, None)
    waited = _plan("llama-3.1-70b", 50_000, sessions=1_000, nodes=8,
                   assumptions=ReloadAssumptions(lookup_timeout_s=3600))  # fmt: skip
    assert (waited.crossovers["T3"], waited.crossovers["T4"]) == (45_775, 1_102_211)
    assert not any(note.startswith("S3 out-reads") for note in plan.notes)


def test_a_given_capacity_is_used_as_given_beside_the_one_kvtool_would_size() -> None:
    plan = _plan("llama-3.1-70b", 50_000, fsx_capacity_bytes=4_800 * GIB)
    assert (plan.t3_size.source, plan.file_system.capacity_gib) == (GIVEN, 4_800)
    assert not plan.t3_size.goal_met
    assert plan.crossovers["T3"] == 64_527
    notes = "\n".join(plan.notes)
    assert "--fsx-capacity 4,800 GiB as given" in notes
    # S3 read object by object (8 a chunk, a HEAD and a GET each, the lookup a session at a
    # time) wins never on LMCache's 3 s lookup timeout, and only from 1,102,211 tokens with an
    # hour's: it was a 41,373-token "S3 out-reads this T3" when S3 was one 5.4 GB/s pipe
    assert plan.crossovers["T4"] is None
    waited = _plan("llama-3.1-70b", 50_000, fsx_capacity_bytes=4_800 * GIB,
                   assumptions=ReloadAssumptions(lookup_timeout_s=3600))  # fmt: skip
    assert waited.crossovers["T4"] == 1_102_211
    assert "S3 out-reads" not in notes
    assert "T3 as given (4,800 GiB): reload wins from 64,527 tokens; the 9,600 GiB kvtool would" \
        " size (sized for throughput): from 16 tokens" in notes  # fmt: skip


def test_a_goal_no_file_system_reaches_is_said_and_throughput_is_not_bought_for_it() -> None:
    """Llama 3.1 8B recomputes 50K tokens faster than ENA's 100 Gbps can bring them back:
    the SCRATCH_2 T3 is sized for what it holds, and the note says why."""
    spec, _ = model("llama-3.1-8b")
    scratch = make_hardware(load_node_profile("p5en"), load_storage_profile("fsx-scratch2"), S3)
    plan = plan_contexts(shape(spec), contexts=[32_000], sessions=1, hardware=scratch).plans[0]
    assert (plan.t3_size.source, plan.t3_size.goal_met) == (FOR_CAPACITY, False)
    assert plan.file_system.capacity_gib == 1_200
    assert plan.t3_size.restore_s > plan.t3_size.deadline_s
    assert any("no file system reaches T3 reload beats recompute from 50,000 tokens" in n
               and "recomputing is the faster path there" in n for n in plan.notes)  # fmt: skip


def test_a_restore_slo_sizes_for_the_plans_context_and_reload_from_moves_the_line() -> None:
    slo = _plan("llama-3.1-70b", 32_000, assumptions=ReloadAssumptions(restore_slo_s=5.0))
    assert slo.t3_size.source == FOR_THROUGHPUT
    assert slo.t3_size.goal_met
    assert slo.t3_size.restore_s <= 5.0
    assert "within 5,000 ms (--set restore_slo)" in slo.t3_size.goal
    row = next(r for r in slo.break_even if r.ctx_tokens == 32_000)
    assert row.reload_s["T3"] <= 5.0
    later = _plan("llama-3.1-70b", 32_000,
                  assumptions=ReloadAssumptions(t3_reload_from_tokens=200_000))  # fmt: skip
    assert "from 200,000 tokens (--set reload_from)" in later.t3_size.goal
    assert later.file_system.capacity_gib <= _plan("llama-3.1-70b", 32_000).file_system.capacity_gib
