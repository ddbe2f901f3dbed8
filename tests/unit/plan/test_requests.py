"""A restore request by request: objects per chunk (one per worker), the lookup a chunk at a
time and a session at a time or at the store's rate, then the bytes, the requests in flight
and the store's request rate; the worked numbers of plan/requests.py's docstring and
docs/planning.md, by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from kvtool.plan.deployment import make_hardware, plan_contexts
from kvtool.plan.reload import ReloadAssumptions, s3_path
from kvtool.plan.requests import (
    LMCACHE_S3,
    SGLANG_NIXL_OBJ,
    Requests,
    RestoreTerms,
    key_scheme,
    lookup_limit_chunks,
    restore_terms,
)
from kvtool.profiles.load import load_node_profile, load_storage_profile

from .conftest import model, shape

FSX, S3 = load_storage_profile("fsx"), load_storage_profile("s3")


def test_the_terms_by_hand() -> None:
    """2 sessions of 1,024 tokens, 4 objects a 256-token chunk, 8 MB a session: 32 objects of
    500 kB, a HEAD in the lookup and a GET each (64 requests) of 100 ms, the GET in flight with
    500 kB at 85 MB/s over 8 connections; 5,500 requests a second; 1 GB/s."""
    r = Requests(objects_per_chunk=4, requests_per_object=2, first_byte_s=0.1,
                 per_connection_bytes_per_s=85e6, connections=8, rate_per_s=5_500,
                 lookup_s_per_chunk=0.1, lookup_requests=1)  # fmt: skip
    t = restore_terms(r, sessions=2, tier_bytes_per_session=8e6, tokens=1_024, chunk_tokens=256,
                      bytes_per_s=1e9, fixed_s=0.101)  # fmt: skip
    assert (t.objects, t.object_bytes, t.requests) == (32, 500e3, 64)
    assert (t.lookup_requests, t.read_requests) == (32, 32)
    assert t.transfer_s == pytest.approx(16e6 / 1e9)
    assert t.in_flight_s == pytest.approx(32 * (0.1 + 500e3 / 85e6) / 8)
    assert t.rate_s == pytest.approx(32 / 5_500)  # the GETs; the HEADs are the lookup's
    assert t.lookup_rate_s == pytest.approx(32 / 5_500)
    assert t.lookup_s == t.lookup_latency_s == pytest.approx(4 * 0.1)  # both side by side
    assert (t.lookup_bound, t.bound) == ("latency", "requests in flight")
    assert t.total_s == pytest.approx(0.101 + 0.4 + t.in_flight_s)
    assert t.rate_needed_per_s(2.0) == 32
    assert t.lookup_needs_per_s() == pytest.approx(32 / 0.4)
    assert t.reads_need_per_s() == pytest.approx(32 / t.in_flight_s)
    # one session looked up at a time: 2 x 4 HEADs in turn
    same = {"sessions": 2, "tier_bytes_per_session": 8e6, "tokens": 1_024, "chunk_tokens": 256,
            "bytes_per_s": 1e9, "fixed_s": 0.101}  # fmt: skip
    one = restore_terms(replace(r, lookups_at_once=1), **same)  # type: ignore[arg-type]
    assert one.lookup_s == pytest.approx(2 * 4 * 0.1)
    # a slow store: the lookup's 32 HEADs at 10 a second bound it, the GETs the reads
    slow = restore_terms(replace(r, rate_per_s=10), **same)  # type: ignore[arg-type]
    assert (slow.lookup_bound, slow.lookup_s, slow.bound) == ("request rate", 3.2, "request rate")
    assert slow.total_s == pytest.approx(0.101 + 3.2 + 3.2)
    unbounded = restore_terms(Requests(), sessions=1, tier_bytes_per_session=1e9, tokens=256,
                              chunk_tokens=256, bytes_per_s=1e9, fixed_s=0.0)  # fmt: skip
    assert (unbounded.rate_s, unbounded.in_flight_s, unbounded.total_s) == (0.0, 0.0, 1.0)


def test_405b_on_a_trn3_ultraserver_from_s3_is_rate_bound() -> None:
    """The docstring's case: tp 8 x pp 18 saves 144 objects a chunk; 16 sessions of 200,000
    tokens are 1,801,728 objects of 917 kB and 3,603,456 requests. The lookup: one session at
    a time, 782 HEADs of 100 ms in turn each, 1,251.2 s (its HEADs at 5,500 a second would
    take 327.6 s). The reads: 1,801,728 GETs at 5,500 a second, 327.6 s, where S3 as one
    195.8 GB/s pipe said 8.5 s; the GETs in flight on 2,304 connections take 87 s."""
    spec, _ = model("llama-3.1-405b")
    trn3 = make_hardware(load_node_profile("trn3-ultraserver"), FSX, S3)
    plan = plan_contexts(shape(spec), contexts=[200_000], sessions=100, hardware=trn3).plans[0]
    assert (plan.serving.tp, plan.serving.pp) == (8, 18)
    t4 = plan.restores["T4"]
    assert (t4.objects, t4.requests) == (16 * 782 * 144, 2 * 16 * 782 * 144)
    assert t4.object_bytes == pytest.approx(103_219_200_000 / 782 / 144, rel=1e-3)
    assert t4.rate_s == t4.lookup_rate_s == pytest.approx(1_801_728 / 5_500)
    assert t4.lookup_s == pytest.approx(16 * 78.2)
    assert t4.lookup_bound == "latency"
    assert t4.in_flight_s == pytest.approx(1_801_728 * (0.1 + t4.object_bytes / 85e6) / 2_304)
    assert t4.bound == "request rate"
    assert t4.total_s == pytest.approx(0.001 + 0.1 + 16 * 78.2 + 1_801_728 / 5_500)
    assert t4.total_s == pytest.approx(1_578.89, abs=0.005)
    row = next(r for r in plan.break_even if r.ctx_tokens == 200_000)
    assert row.reload_s["T4"] > 5 * row.recompute_s
    assert plan.crossovers["T4"] is None or plan.crossovers["T4"] > 1_000_000
    assert not any("S3 out-reads" in note for note in plan.notes)


def test_the_lookups_head_is_waited_once_not_again_in_flight() -> None:
    """LMCache's lookup HEADs each key one after another and keeps the size it read; the GET
    that follows does not ask again (lmcache 0.5.6 s3_connector.py:280-292, 341-358, 603-630).
    So a HEAD's 100 ms is the lookup's and only the GET is in flight with the transfer; both
    requests count against S3's rate, the HEADs in the lookup, the GETs in the reads. Llama
    3.1 70B on one p5en, 16 x 131,072 tokens: 65,536 objects of 10.5 MB on 64 connections take
    65,536 x (0.1 + 0.123) / 64 = 228.7 s in flight (charged a second 100 ms, they took 331.1
    s)."""
    spec, _ = model("llama-3.1-70b")
    p5en = make_hardware(load_node_profile("p5en"), FSX, S3)
    plan = plan_contexts(shape(spec, tp=8), contexts=[131_072], sessions=16,
                         hardware=p5en).plans[0]  # fmt: skip
    t4 = plan.restores["T4"]
    assert (t4.objects, t4.requests) == (16 * 512 * 8, 2 * 16 * 512 * 8)
    assert t4.lookup_s == pytest.approx(16 * 512 * 0.1)  # a session at a time
    assert t4.in_flight_s == pytest.approx(65_536 * (0.1 + t4.object_bytes / 85e6) / 64)
    assert t4.rate_s == t4.lookup_rate_s == pytest.approx(65_536 / 5_500)
    path = next(p for p in plan.paths if p.tier == "T4")
    twice = s3_path(p5en.node, S3, ReloadAssumptions(s3_lookups=2), objects_per_chunk=8, nodes=1,
                    scheme=LMCACHE_S3)  # fmt: skip
    assert (twice.requests.requests_per_object, twice.requests.lookup_requests) == (3, 2)
    assert twice.requests.lookup_s_per_chunk == pytest.approx(2 * 0.1)  # each awaited in turn
    assert path.requests.lookup_requests == 1


def p5en_t4(**settings: int) -> RestoreTerms:
    """The T4 restore of Llama 3.1 70B at 128,000 tokens x 1,000 sessions on 8 p5en."""
    spec, _ = model("llama-3.1-70b")
    eight = make_hardware(load_node_profile("p5en"), FSX, S3, nodes=8)
    plan = plan_contexts(shape(spec), contexts=[128_000], sessions=1_000, hardware=eight,
                         assumptions=ReloadAssumptions(**settings)).plans[0]  # fmt: skip
    return plan.restores["T4"]


def test_the_lookups_heads_are_held_to_the_nodes_share_of_the_rate() -> None:
    """16 sessions x 500 chunks x 8 workers = 64,000 HEADs a node. Looked up side by side
    (--set s3_lookups_at_once=16), they would go in 50 s, 1,280 a second, against the 687.5 a
    second a node's share of one prefix's 5,500 allows: the lookup is rate-bound at
    64,000 / 687.5 = 93.09 s. Then the reads: 223.36 s in flight. 0.101 + 93.09 + 223.36 =
    316.55 s, where the lookup at 50 s made 273.46 s."""
    side = p5en_t4(s3_lookups_at_once=16)
    assert (side.lookup_requests, side.read_requests) == (64_000, 64_000)
    assert side.lookup_latency_s == pytest.approx(50.0)
    assert side.lookup_bound == "request rate"
    assert side.lookup_s == pytest.approx(64_000 / 687.5)
    assert side.lookup_needs_per_s() == pytest.approx(1_280)
    assert side.bound == "requests in flight"
    assert side.total_s == pytest.approx(0.101 + 64_000 / 687.5 + side.in_flight_s)
    assert f"{side.total_s:.2f}" == "316.55"


def test_an_engine_looks_its_sessions_up_one_at_a_time() -> None:
    """LMCache's scheduler-side lookup waits for each request's answer and each worker's
    lookup server answers on one thread (lmcache 0.5.6 vllm_v1_adapter.py:1431,
    lmcache_lookup_client.py:140, 197-276): 16 sessions x 500 HEADs in turn x 100 ms = 800 s,
    64,000 HEADs at 80 a second, well within the rate. 0.101 + 800 + 223.36 = 1,023.46 s."""
    t4 = p5en_t4()
    assert t4.lookup_bound == "latency"
    assert t4.lookup_s == pytest.approx(16 * 500 * 0.1)
    assert t4.lookup_needs_per_s() == pytest.approx(80)
    assert f"{t4.total_s:.2f}" == "1023.46"


def test_nodes_share_the_prefix_and_express_is_per_bucket() -> None:
    spec, _ = model("llama-3.1-70b")
    for t4, limit in (("s3", 5_500 / 8), ("s3-express", 200_000 / 8)):
        eight = make_hardware(load_node_profile("p5en"), FSX, load_storage_profile(t4), nodes=8)
        plan = plan_contexts(shape(spec), contexts=[131_072], sessions=100,
                             hardware=eight).plans[0]  # fmt: skip
        path = next(p for p in plan.paths if p.tier == "T4")
        assert path.requests.rate_per_s == pytest.approx(limit)
        assert path.requests.objects_per_chunk == 8


def test_key_schemes_are_the_engines_own() -> None:
    assert key_scheme("vllm") == (LMCACHE_S3, "")
    assert key_scheme("sglang") == (SGLANG_NIXL_OBJ, "")
    scheme, note = key_scheme("dynamo")
    assert scheme._replace(timeout_effect="") == LMCACHE_S3._replace(timeout_effect="")
    assert "not read" in note
    # LMCache's lookup timeout, said as LMCache's; the engine that recomputes is not vLLM there
    assert (LMCACHE_S3.lookup_timeout_s, SGLANG_NIXL_OBJ.lookup_timeout_s) == (3.0, math.inf)
    assert "vLLM" in LMCACHE_S3.timeout_effect
    assert scheme.timeout_effect == "the engine recomputes"
    assert LMCACHE_S3.prefixes == 1
    assert "s3_connector.py" in LMCACHE_S3.source
    assert math.isinf(Requests().rate_per_s)


def test_lmcache_gives_a_session_lookup_up_past_its_timeout() -> None:
    """LMCache's lookup_timeout_ms (3,000 by default, v1/config.py:457-461): a session whose
    own lookup, a 100 ms HEAD a chunk in turn, takes longer is answered 0 hits and recomputed.
    30 chunks (3.0 s, 7,680 tokens) are waited for, whatever the floating point says; 31 are
    not. The timeout is per session: 16 sessions one at a time do not add up against it."""
    r = Requests(lookup_s_per_chunk=0.1, lookup_requests=1, requests_per_object=2,
                 lookups_at_once=1, lookup_timeout_s=3.0)  # fmt: skip
    assert lookup_limit_chunks(r) == 30

    def at_ctx(tokens: int) -> RestoreTerms:
        return restore_terms(r, sessions=16, tier_bytes_per_session=1e9, tokens=tokens,
                             chunk_tokens=256, bytes_per_s=1e10, fixed_s=0.0)  # fmt: skip

    at = {tokens: at_ctx(tokens) for tokens in (7_680, 7_681)}
    assert (at[7_680].lookup_session_s, at[7_680].lookup_times_out) == (pytest.approx(3.0), False)
    assert at[7_680].lookup_latency_s == pytest.approx(16 * 3.0)  # the phase: all 16 in turn
    assert at[7_681].lookup_times_out
    assert lookup_limit_chunks(Requests(lookup_s_per_chunk=0.1)) is None  # no timeout: waits
    assert not restore_terms(Requests(lookup_s_per_chunk=0.1), sessions=1,
                             tier_bytes_per_session=1e9, tokens=1_000_000, chunk_tokens=256,
                             bytes_per_s=1e10, fixed_s=0.0).lookup_times_out  # fmt: skip
