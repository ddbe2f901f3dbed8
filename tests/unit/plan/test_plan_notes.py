"""The plan's notes on its T3 and its offload stack: "S3 out-reads this T3" only when S3,
read object by object, really beats the T3 the plan uses."""

from __future__ import annotations

from kvtool.plan.deployment import make_hardware, plan_contexts
from kvtool.plan.reload import ReloadAssumptions
from kvtool.profiles.load import load_node_profile, load_storage_profile

from .conftest import model, shape

GIB = 2**30


def _plan(t4: str, lookup_timeout_s: float | None = None):  # type: ignore[no-untyped-def]
    spec, _ = model("llama-3.1-70b")
    hardware = make_hardware(load_node_profile("p5en"), load_storage_profile("fsx"),
                             load_storage_profile(t4), nodes=8,
                             fsx_capacity_bytes=4_800 * GIB)  # fmt: skip
    a = ReloadAssumptions(lookup_timeout_s=lookup_timeout_s)
    return plan_contexts(shape(spec), contexts=[128_000], sessions=100, hardware=hardware,
                         assumptions=a).plans[0]  # fmt: skip


def test_s3_standard_never_out_reads_where_lmcache_gives_its_lookup_up() -> None:
    """On LMCache's defaults a session's lookup past 30 chunks (3 s at 100 ms a HEAD) is given
    up and recomputed: at 128K (500 chunks, 50 s) S3 Standard restores nothing, wins at no
    context, and out-reads no T3, however small."""
    plan = _plan("s3")
    assert plan.crossovers["T4"] is None
    assert plan.restores["T4"].lookup_times_out
    assert not [n for n in plan.notes if n.startswith("S3 out-reads")]
    (said,) = [n for n in plan.notes if n.startswith("T4 engine-direct restores no session")]
    assert "past 7,680 tokens" in said
    assert "lookup_timeout_ms, 3,000 by default in LMCache 0.5.6's v1/config.py:457-461" in said
    assert "the AWS article's T4 through FSx (300 us a chunk) holds to 2,560,000 tokens" in said


def test_s3_standard_out_reads_only_a_t3_too_small_for_its_nodes() -> None:
    """With a lookup timeout of an hour (--set lookup_timeout=1h): 4,800 GiB shared by 8
    nodes reads 0.6 GB/s a node (T3 wins from 1.2M tokens); S3 Standard (688 requests a
    second a node, 100 ms each, the lookup a session at a time) wins from 1,102,211 and
    delivers 0.66 GB/s a node at 128K, 53.7 s of bytes in a 1,023.5 s restore. The 43,200 GiB
    kvtool sizes has no such note (test_t3_size.py)."""
    plan = _plan("s3", lookup_timeout_s=3600.0)
    assert plan.crossovers["T3"] > plan.crossovers["T4"]  # type: ignore[operator]
    warning = [n for n in plan.notes if n.startswith("S3 out-reads")]
    assert warning == [
        "S3 out-reads this T3: reload from T4 wins from 1,102,211 to 9,216,000 tokens (its"
        " lookup times out past them), from T3 from 1,246,046 tokens (4,800 GiB, given);"
        " --fsx-capacity 9,600 GiB would give each node the 0.66 GB/s S3 restores at"
    ]


def test_the_capacity_named_matches_what_s3_delivers_not_its_link() -> None:
    """S3 Express One Zone (5 ms, 200,000 reads a second a bucket): its restore of 16 sessions
    at 128K delivers 3.99 GB/s a node (a 40 s lookup, a session at a time, then 128.36 s of
    reads), not the 12.5 GB/s of the node's ENA. Its 5 ms HEADs keep a 128K session's lookup
    (2.5 s) within LMCache's 3 s, but S3 out-reads the T3 only up to 600 chunks."""
    plan = _plan("s3-express")
    t4 = plan.restores["T4"]
    delivered = 12.5e9 * t4.transfer_s / t4.total_s
    assert round(delivered / 1e9, 2) == 3.99
    (warning,) = [n for n in plan.notes if n.startswith("S3 out-reads")]
    assert "--fsx-capacity 33,600 GiB would give each node the 3.99 GB/s S3 restores at" in (
        warning
    )
    assert "wins from 94,112 to 153,600 tokens (its lookup times out past them)" in warning
