"""The AWS article's T4 (plan/release.py): idle sessions released from FSx to S3 through the
data repository association, FSx sized for the hot share, a released session read back
through FSx, the release the plan emits, and what it costs beside all-FSx."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.inputs.prices import resolve_prices
from kvtool.inputs.shape import resolve_shape
from kvtool.plan.cost import plan_cost
from kvtool.plan.deployment import DeploymentPlan, make_hardware, plan_contexts
from kvtool.plan.release import RELEASE_AFTER_S, RELEASED_MEDIUM, release_commands
from kvtool.plan.reload import ReloadAssumptions
from kvtool.profiles.load import load_node_profile, load_storage_profile

FSX, S3 = load_storage_profile("fsx"), load_storage_profile("s3")
DOC = " ".join((Path(__file__).parents[3] / "docs" / "planning.md").read_text().split())


def pb_case(**assumed: float) -> DeploymentPlan:
    """Llama 3.1 405B, 1M (1,048,576) tokens x 500 sessions on one Trn3 UltraServer."""
    trn3 = make_hardware(load_node_profile("trn3-ultraserver"), FSX, S3)
    a = ReloadAssumptions(**assumed)
    return plan_contexts(resolve_shape("llama-3.1-405b"), contexts=[2**20], sessions=500,
                         hardware=trn3, assumptions=a).plans[0]  # fmt: skip


def tier(plan: DeploymentPlan, name: str) -> tuple[int, int, str]:
    t = next(t for t in plan.tiers.tiers if t.name == name)
    return t.sessions, t.used_bytes, t.medium


def test_idle_sessions_are_released_and_fsx_is_sized_for_the_hot_share() -> None:
    """Mean idle 30 minutes, release after the default 10: exp(-1/3) of 500 sessions, 358,
    are idle past 10 minutes; 427 spill past T1 and T2, so 69 stay hot on FSx."""
    before, after = pb_case(), pb_case(mean_idle_s=1_800)
    session = 541_165_879_296  # 1,048,576 x 516,096 B
    assert tier(before, "T3")[:2] == (427, 427 * session)
    assert before.t3_size.file_system.capacity_gib == 216_000
    r = after.release
    assert r is not None
    assert RELEASE_AFTER_S == 600
    assert r.released_fraction == pytest.approx(math.exp(-600 / 1_800))
    assert (r.spilled_sessions, r.released_sessions, r.hot_sessions) == (427, 358, 69)
    assert math.floor(500 * math.exp(-1 / 3)) == 358
    assert tier(after, "T3")[:2] == (69, 69 * session)
    assert tier(after, "T4") == (358, 358 * session, RELEASED_MEDIUM)
    assert after.tiers.t3_bytes_needed == 69 * session
    assert r.all_fsx_bytes == 427 * session
    # 37.34 TB = 34,776 GiB: 8 of EFA PERSISTENT_2's 4,800 GiB steps at 1,000 MB/s/TiB
    assert after.t3_size.file_system.capacity_gib == 38_400
    assert any(n.startswith("T3 sized to fit the sessions not released") for n in after.tiers.notes)


def test_without_a_mean_idle_time_nothing_is_released() -> None:
    plan = pb_case()
    assert plan.release is not None
    assert plan.release.released_sessions == 0
    assert "none released without a mean idle time" in plan.release.summary(sessions=500)
    assert tier(plan, "T4")[0] == 0


def test_a_released_session_comes_back_through_fsx_at_s3s_request_rate() -> None:
    """16 sessions of 4,096 chunks x 144 files: 9,437,184 files, each FSx's GET of its
    object (5,500 a second on one prefix) after S3's 100 ms and FSx's 300 us to first byte."""
    r = pb_case(mean_idle_s=1_800).release
    assert r is not None
    assert r.restore is not None
    assert r.path is not None
    files = 16 * 4_096 * 144
    size = 541_165_879_296 / (4_096 * 144)
    terms = r.restore
    assert (terms.objects, terms.requests) == (files, files)
    assert terms.rate_s == pytest.approx(files / 5_500)  # 1,715.85 s
    assert terms.in_flight_s == pytest.approx(files * (0.1003 + size / 85e6) / 1_152)
    assert terms.bound == "request rate"
    assert f"{terms.rate_s:,.2f}" == "1,715.85"
    assert "FSx's restore concurrency is not published" in r.path.description


def test_a_trn3_plan_that_spills_nothing_is_unchanged() -> None:
    """Trn3 405B at 200K x 100 sits in T1: nothing to release, the same FSx as before."""
    trn3 = make_hardware(load_node_profile("trn3-ultraserver"), FSX, S3)
    plans = [
        plan_contexts(resolve_shape("llama-3.1-405b"), contexts=[200_000], sessions=100,
                      hardware=trn3, assumptions=ReloadAssumptions(mean_idle_s=m)).plans[0]
        for m in (None, 1_800.0)
    ]  # fmt: skip
    assert [p.release.spilled_sessions for p in plans if p.release] == [0, 0]
    assert plans[0].t3_size.file_system == plans[1].t3_size.file_system
    assert plans[0].tiers == plans[1].tiers


def test_s3_express_keeps_the_engine_direct_path() -> None:
    trn3 = make_hardware(load_node_profile("trn3-ultraserver"), FSX,
                         load_storage_profile("s3-express-one-zone"))  # fmt: skip
    plan = plan_contexts(resolve_shape("llama-3.1-405b"), contexts=[2**20], sessions=500,
                         hardware=trn3,
                         assumptions=ReloadAssumptions(mean_idle_s=1_800)).plans[0]  # fmt: skip
    assert plan.release is not None
    assert not plan.release.planned
    assert plan.release.released_sessions == 0
    assert plan.release.restore is None
    assert "engine-direct" in plan.release.summary(sessions=500)


def test_the_release_is_gc_below_a_day_and_fsxs_task_from_a_day() -> None:
    r = pb_case(mean_idle_s=1_800).release
    assert r is not None
    lines = "\n".join(release_commands(r, t3_dir="/fsx/kv"))
    assert "AutoExportPolicy={Events=[NEW,CHANGED,DELETED]}" in lines
    assert "#   kvtool gc /fsx/kv --max-age 10m --release\n" in lines
    assert "fsx-task" not in lines
    two_days = pb_case(mean_idle_s=1_800, release_after_s=172_800).release
    assert two_days is not None
    lines = "\n".join(release_commands(two_days, t3_dir="/fsx/kv"))
    assert 'kvtool gc /fsx/kv --max-age 2d --release --emit fsx-task --fsx-id "$FSX_ID"' in lines
    assert two_days.released_sessions == 0  # exp(-96) of 500


def test_the_hot_share_and_s3_cost_beside_all_fsx() -> None:
    plan = pb_case(mean_idle_s=1_800)
    assert plan.release is not None
    prices = resolve_prices(None)
    cost = plan_cost(plan.hardware, plan.tiers, prices, sessions=500, ctx_tokens=2**20,
                     chunk_tokens=256, file_system=plan.file_system,
                     all_fsx_bytes=plan.release.all_fsx_bytes)  # fmt: skip
    released_gb = 358 * 541_165_879_296 / 2**30
    assert cost.storage_usd_per_month == pytest.approx(38_400 * 0.6 + released_gb * 0.023)
    assert (cost.all_fsx_gib, cost.all_fsx_usd_per_month) == (216_000, pytest.approx(129_600))
    assert round(cost.storage_usd_per_month or 0) == 27_190


def test_docs_planning_works_the_pb_case_by_hand() -> None:
    """docs/planning.md's PB-scale case: each figure by hand there, and from kvtool here."""
    plan = pb_case(mean_idle_s=1_800)
    r = plan.release
    assert r is not None
    assert r.restore is not None
    assert "exp(-600 / 1,800) = 0.7165" in DOC
    assert f"{r.released_fraction:.4f}" == "0.7165"
    assert "500 x 0.7165 = 358.27, so **358 released**" in DOC
    assert "427 - 358 = **69 hot**" in DOC
    assert "69 x 541.17 GB = 37.34 TB" in DOC
    assert f"{69 * 541_165_879_296 / 1e12:.2f}" == "37.34"
    assert "**38,400 GiB**" in DOC
    assert plan.t3_size.file_system.capacity_gib == 38_400
    assert "16 x 4,096 x 144 = 9,437,184 files" in DOC
    assert f"9,437,184 / 5,500 = **{r.restore.rate_s:,.2f} s**" in DOC
    recompute = next(row.recompute_s for row in plan.break_even if row.ctx_tokens == 2**20)
    assert f"recompute's {recompute:,.2f} s" in DOC
    assert "38,400 x $0.6 = $23,040" in DOC
    assert "180,432 GB x $0.023 = $4,150" in DOC
    assert "216,000 x $0.6 = **$129,600**" in DOC
    assert "**$27,850**" in DOC


def test_plan_sets_the_idle_times_and_refuses_bad_ones(kvtool: Callable) -> None:
    args = ("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
            "--sessions", "500")  # fmt: skip
    result = kvtool(*args, "--set", "mean_idle=30m", "--cost")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "358 released to S3; 69 of the 427 past T1 and T2 stay on FSx" in out
    assert "T4, released, read back through FSx: 9,437,184 files" in out
    assert "all on FSx 216,000 GiB 129,600" in out
    for bad in ("mean_idle=0s", "mean_idle=soon", "release_after=2y"):
        result = kvtool(*args, "--set", bad)
        assert result.exit_code == 2
        assert result.stderr.startswith("kvtool: error: --set")
    emitted = kvtool(*args, "--set", "mean_idle=30m", "--emit", "lmcache")
    assert emitted.exit_code == 0, emitted.stderr
    assert "#   kvtool gc /fsx/kvcache --max-age 10m --release" in emitted.stdout


def test_emit_puts_the_release_before_the_command_and_only_where_t3_is_on_fsx(
    kvtool: Callable,
) -> None:
    args = ("plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "128K", "--sessions", "200")
    vllm = kvtool(*args, "--emit", "vllm")
    assert vllm.exit_code == 0, vllm.stderr
    lines = vllm.stdout.splitlines()
    assert lines[-1].startswith("LMCACHE_CONFIG_FILE=lmcache.yaml vllm serve")
    assert "#   kvtool gc /fsx/kvcache --max-age 10m --release" in lines
    for target in ("dynamo", "trtllm"):
        other = kvtool(*args, "--emit", target)
        assert other.exit_code == 0, other.stderr
        assert "AutoExportPolicy" not in other.stdout


def test_emit_says_what_fsx_holds_and_the_released_share_apart(kvtool: Callable) -> None:
    """The PB case: FSx holds the 69 hot sessions, 69 x 541,165,879,296 B = 37,340 GB; the
    358 released, 193,737 GB, are in S3 (their files stay in the folder). Their sum, 231,078 GB,
    was once given as what FSx must hold. SGLang's file cap still counts the released files
    (its evictor sums st_size, which a release keeps): 427 x 541.17 GB / 144 ranks = 1,604 GB."""
    args = ("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
            "--sessions", "500", "--set", "mean_idle=30m")  # fmt: skip
    per = 541_165_879_296
    assert (round(69 * per / 1e9), round(358 * per / 1e9)) == (37_340, 193_737)
    lmcache = kvtool(*args, "--emit", "lmcache")
    assert lmcache.exit_code == 0, lmcache.stderr
    text = " ".join(lmcache.stdout.split())
    assert "231,078" not in text
    assert "T3 37,340 GB on /fsx/kvcache (the hot share on FSx); 193,737 GB released to S3" in text
    assert (
        "the plan needs 37,340 GB per node on FSx (the hot share; the 193,737 GB released keep"
        " their files here, their data in S3)" in text
    )
    sglang = kvtool(*args, "--set", "block_tokens=64", "--emit", "sglang")
    assert sglang.exit_code == 0, sglang.stderr
    assert f"SGLANG_HICACHE_FILE_BACKEND_MAX_SIZE={int(427 * per / 144 // 1e9)}G" in sglang.stdout
    assert int(427 * per / 144 // 1e9) == 1_604
    assert "released ones included" in sglang.stdout


def test_emit_keeps_what_spills_past_a_bounded_fsx_out_of_t3(kvtool: Callable) -> None:
    """--fsx-capacity 38400GiB, nothing released: 76 sessions (41,129 GB) on FSx, the other
    351 (189,949 GB) past it in S3, said as T4, not added to what FSx holds."""
    result = kvtool("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
                    "--sessions", "500", "--fsx-capacity", "38400GiB",
                    "--emit", "lmcache")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    per = 541_165_879_296
    assert (round(76 * per / 1e9), round(351 * per / 1e9)) == (41_129, 189_949)
    assert "T3 41,129 GB on /fsx/kvcache; T4 189,949 GB past T3 in S3" in text
    assert "the plan needs 41,129 GB per node." in text


def test_the_emitted_clean_up_is_kvtool_gc_and_says_what_the_dra_deletes(kvtool: Callable) -> None:
    """LMCache's emitted config once suggested `find DIR -type f -amin +1440 -delete`: file by
    file (a chunk's rank files apart), and on a plan that releases to S3 through a DRA that
    exports DELETED, silently the S3 copies of the released sessions too."""
    args = ("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
            "--sessions", "500", "--set", "mean_idle=30m")  # fmt: skip
    released = kvtool(*args, "--emit", "lmcache")
    assert released.exit_code == 0, released.stderr
    assert "-delete" not in released.stdout
    assert "kvtool gc /fsx/kvcache --max-age 1d" in released.stdout
    assert "a chunk gc removes loses its S3 copy too" in released.stdout
    hot = kvtool("plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "128k", "--sessions",
                 "1000", "--nodes", "8", "--emit", "lmcache")  # fmt: skip
    assert hot.exit_code == 0, hot.stderr
    assert "kvtool gc /fsx/kvcache --max-age 1d" in hot.stdout
    assert "S3 copy" not in hot.stdout


def test_the_t4_path_note_does_not_say_fsx_is_sized_for_the_hot_share_alone(
    kvtool: Callable,
) -> None:
    """At 1h idle the 4 hot sessions fit 4,800 GiB but FSx is sized for throughput (24,000
    GiB): the T4 path note said the hot sessions 'stay on FSx, sized for them'."""
    done = kvtool("plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
                  "--sessions", "500", "--set", "mean_idle=1h")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "24,000 GiB (sized for throughput" in text
    assert "sized for them" not in text
    assert "stay on FSx, FSx holding at least them" in text
