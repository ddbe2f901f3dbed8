"""``kvtool plan`` (and ``kvtool size --hardware``, which forwards to it) and ``kvtool hardware``
end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Run = Callable[..., CliResult]
HARDWARE_DIR = Path(__file__).parents[2] / "profiles" / "hardware"


def test_json_adds_tiers_and_plan(kvtool: Run) -> None:
    result = kvtool(
        "size",
        "llama-3.1-405b",
        "--ctx",
        "200k",
        "--sessions",
        "100",
        "--hardware",
        "trn3-ultraserver",
        "--tp",
        "16",
        "--engine",
        "formula",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    [data] = json.loads(result.stdout)["results"]
    assert [t["name"] for t in data["tiers"]] == ["T1", "T2", "T3", "T4"]
    for tier in data["tiers"]:
        assert {"name", "medium", "capacity_bytes", "used_bytes", "sessions", "utilization"} <= set(
            tier
        )
    # the AWS article's arithmetic: ~10 TB fits one Trn3 UltraServer's HBM, with 9 engines of tp 16
    # (18 of tp 8 would hold 18 copies of the 810 GB of weights). vLLM would replicate the 8
    # KV heads over 16 ranks and need twice the bytes: tests/unit/plan/test_deployment.py
    assert data["plan"]["fits_in_t1"] is True
    assert data["plan"]["engine_instances_per_node"] == 9
    assert data["plan"]["total_kv_bytes"] == 516_096 * 200_000 * 100
    # the host-to-chip bandwidth is not published: no T2 reload time
    assert {p["tier"] for p in data["reload"]["paths"]} == {"T3", "T4"}


def test_several_contexts_give_one_plan_each(kvtool: Run) -> None:
    result = kvtool(
        "size",
        "deepseek-r1",
        "--ctx",
        "32k,200k",
        "--sessions",
        "500",
        "--hardware",
        "p5en",
        "--nodes",
        "4",
        "--fsx-capacity",
        "96000GiB",
        "--json",
    )
    data = json.loads(result.stdout)["results"]
    assert [d["ctx_tokens"] for d in data] == [32_000, 200_000]
    assert data[0]["plan"]["weights_dtype"] == "fp8"  # the checkpoint's quantization_config
    t3 = data[1]["tiers"][2]
    assert t3["capacity_bytes"] == 96_000 * 2**30
    assert [f["path"] for f in data[1]["fan_in"]] == ["ENA/TCP", "EFA", "EFA+GDS"]


def test_table_shows_plan_crossovers_and_fan_in(kvtool: Run) -> None:
    result = kvtool(
        "size",
        "llama-3.1-70b",
        "--ctx",
        "128K",
        "--sessions",
        "200",
        "--hardware",
        "p5en",
        "--nodes",
        "2",
    )
    assert result.exit_code == 0, result.stderr
    for text in (
        "Tier plan at 131,072 tokens",
        "85% line",
        "Reload vs recompute",
        "reload wins from",
        "Fan-in from T3",
        "EFA+GDS",
    ):
        assert text in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hardware", "p5x"], "unknown hardware 'p5x' (did you mean p5"),
        (["--hardware", "p5", "--fsx-capacity", "lots"], "--fsx-capacity 'lots' is not a size"),
        (["--hardware", "p5", "--fsx-throughput", "300"], "is not an FSx option"),
        (["--hardware", "p5", "--t3-path", "nfs"], "unknown --t3-path 'nfs'"),
        (["--hardware", "p5", "--weights-dtype", "fp6"], "unknown --weights-dtype 'fp6'"),
        (["--hardware", "p5", "--nodes", "0"], "--nodes must be at least 1"),
        (["--hardware", "p5", "--mfu", "1.5"], "--mfu must be in (0, 1]"),
    ],
)
def test_plan_input_errors_are_one_line(kvtool: Run, args: list[str], message: str) -> None:
    result = kvtool("size", "llama-3.1-8b", *args)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert message in result.stderr


def test_weights_larger_than_hbm_is_a_verdict_exit_1(kvtool: Run) -> None:
    result = kvtool("size", "llama-3.1-405b", "--hardware", "p4d")
    assert result.exit_code == 1  # (was 2: an answer, not a mistake in the input)
    first = result.stdout.splitlines()[0]
    assert first.startswith("does not fit: the weights (812 GB (756 GiB)) leave no room for KV")
    assert "try --tp 8 --pp 3 --nodes 3 (fits" in first


def test_a_session_larger_than_a_node_is_a_verdict_whose_tries_plan_as_said(kvtool: Run) -> None:
    """The issue's case, end to end: exit 1, the verdict first with its tries, and each try,
    run as typed, is a plan with the figures the verdict gave it."""
    args = ("plan", "llama-3.1-405b", "--hardware", "p5en", "--ctx", "1m")
    result = kvtool(*args)
    assert result.exit_code == 1, result.stderr
    assert result.stdout.startswith("does not fit: one session (516 GB (481 GiB) of KV")
    assert "Tier plan" not in result.stdout  # no plan for a context no node serves
    data = kvtool(*args, "--json")
    assert data.exit_code == 1
    [row] = json.loads(data.stdout)["results"]
    assert "tiers" not in row
    verdict = row["verdict"]
    assert verdict["reason"].startswith("one session (516 GB")
    assert [t["options"][:2] for t in verdict["tries"]] == [
        ["--tp", "8"], ["--kv-dtype", "fp8"], ["--hardware", "p6-b300"]
    ]  # fmt: skip
    for tried in verdict["tries"]:
        again = kvtool(*args, *tried["options"], "--json")
        assert again.exit_code == 0, (tried, again.stderr)
        [plan] = json.loads(again.stdout)["results"]
        assert plan["verdict"]["fits"] == tried["fits"]
        assert plan["verdict"]["sessions_in_t1"] == tried["sessions_in_t1"]
        assert plan["verdict"]["hbm_utilization"] == tried["hbm_utilization"]
        assert plan["verdict"]["reason"] is None


def test_a_context_no_node_serves_beside_one_it_serves(kvtool: Run) -> None:
    result = kvtool("plan", "llama-3.1-405b", "--hardware", "p5en", "--ctx", "8k,1m", "--json")
    assert result.exit_code == 1
    short, long = json.loads(result.stdout)["results"]
    assert (short["ctx_tokens"], long["ctx_tokens"]) == (8000, 1_000_000)
    assert short["verdict"]["reason"] is None
    assert "tiers" in short
    assert long["verdict"]["reason"] is not None
    assert "tiers" not in long


def test_user_hardware_profile_file(kvtool: Run, tmp_path: Path) -> None:
    text = (HARDWARE_DIR / "p5en.48xlarge.toml").read_text()
    mine = tmp_path / "my-node.toml"
    mine.write_text(text.replace('name = "p5en.48xlarge"', 'name = "my-node"'))
    result = kvtool("size", "llama-3.1-8b", "--hardware", str(mine), "--json")
    assert result.exit_code == 0, result.stderr
    assert "8 x NVIDIA H200" in json.loads(result.stdout)["results"][0]["tiers"][0]["medium"]
    mine.write_text(text.replace("gds = true", "gds = true\nwarp_drive = 1"))
    bad = kvtool("size", "llama-3.1-8b", "--hardware", str(mine))
    assert bad.exit_code == 2
    assert "unknown key 'warp_drive'" in bad.stderr


def test_hardware_lists_profiles(kvtool: Run) -> None:
    table = kvtool("hardware").stdout
    assert "trn3-ultraserver" in table
    trn3 = next(line for line in table.splitlines() if line.startswith("trn3-ultraserver"))
    assert "20,736 GiB (22.3 TB)" in trn3  # 144 chips x 144 GiB
    assert 'trn3-ultraserver\'s 20,736 GiB is their "20.7 TB", 22.3 TB in bytes' in table
    assert "fsx-lustre-persistent2" in table
    data = json.loads(kvtool("hardware", "--json").stdout)
    assert any(n["name"] == "p5en.48xlarge" for n in data["results"] if n["kind"] == "node")


def test_t3_and_t4_profiles_can_be_chosen(kvtool: Run) -> None:
    result = kvtool(
        "size",
        "llama-3.1-8b",
        "--ctx",
        "32k",
        "--hardware",
        "p5en",
        "--t3-storage",
        "fsx-scratch2",
        "--t4-storage",
        "s3-express",
        "--json",
    )
    [data] = json.loads(result.stdout)["results"]
    paths = {p["tier"]: p["description"] for p in data["reload"]["paths"]}
    assert paths["T3"].startswith("fsx-lustre-scratch2: the file system's throughput, 1,200 GiB")
    assert paths["T4"].startswith("s3-express-one-zone")
    assert [f["path"] for f in data["fan_in"]] == ["ENA/TCP"]  # SCRATCH_2 has no EFA
    wrong = kvtool("size", "llama-3.1-8b", "--hardware", "p5", "--t3-storage", "s3")
    assert wrong.exit_code == 2
    assert "is a T4 profile" in wrong.stderr


def _bench_file(tmp_path: Path, results: list[dict[str, object]]) -> Path:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"results": results}))
    return path


T3_READ = {
    "tier": "t3", "op": "seq_read", "status": "ok", "tool": "fio-3.33", "block_bytes": 10485760,
    "threads": 32, "direct": True, "clients": 1, "bytes_per_s": 4.0e9, "filesystem": "lustre",
}  # fmt: skip


def test_bench_file_replaces_the_t3_spec_and_says_so(kvtool: Run, tmp_path: Path) -> None:
    bench = _bench_file(tmp_path, [T3_READ])
    args = ["size", "llama-3.1-70b", "--ctx", "128K", "--sessions", "200", "--hardware", "p5en"]
    [spec] = json.loads(kvtool(*args, "--json").stdout)["results"]
    done = kvtool(*args, "--bench", str(bench), "--json")
    assert done.exit_code == 0, done.stderr
    [measured] = json.loads(done.stdout)["results"]
    paths = {p["tier"]: p for p in measured["reload"]["paths"]}
    spec_paths = {p["tier"]: p for p in spec["reload"]["paths"]}
    assert paths["T3"]["bandwidth_source"] == "measured"
    assert paths["T3"]["node_bytes_per_s"] == 4.0e9
    assert spec_paths["T3"]["bandwidth_source"] == "spec"
    assert paths["T4"] == spec_paths["T4"]  # not measured: untouched
    # a slower measured T3 makes reloading from it win later, or never
    later = paths["T3"]["reload_wins_from_tokens"]
    assert later is None or later > spec_paths["T3"]["reload_wins_from_tokens"]
    text = kvtool(*args, "--bench", str(bench)).stdout
    assert "measured 4.00 GB/s (kvtool bench: fio-3.33 seq_read" in text
    assert "T3 reload times use the bandwidth measured (kvtool bench or capacity)" in text


def test_bench_file_without_usable_figures_is_exit_2(kvtool: Run, tmp_path: Path) -> None:
    bench = _bench_file(tmp_path, [{**T3_READ, "status": "skip", "bytes_per_s": None}])
    done = kvtool("size", "llama-3.1-8b", "--hardware", "p5en", "--bench", str(bench))
    assert done.exit_code == 2
    assert "has no measurement a plan can use" in done.stderr


def test_bench_without_hardware_has_no_effect_and_says_so(kvtool: Run, tmp_path: Path) -> None:
    done = kvtool("size", "llama-3.1-8b", "--bench", str(_bench_file(tmp_path, [T3_READ])))
    assert done.exit_code == 0
    assert "--bench has no effect without --hardware" in done.stderr


def test_plan_is_size_hardwares_answer_and_size_forwards_it_with_a_notice(kvtool: Run) -> None:
    args = ["llama-3.1-70b", "--ctx", "32k", "--sessions", "200", "--hardware", "p5en"]
    planned = kvtool("plan", *args)
    forwarded = kvtool("size", *args)
    assert planned.exit_code == forwarded.exit_code == 0, planned.stderr
    assert planned.stdout == forwarded.stdout
    assert "kvtool size --hardware is now kvtool plan" not in planned.stderr
    assert forwarded.stderr.endswith(
        "kvtool: note: kvtool size --hardware is now kvtool plan; the old name goes in the next"
        " release\n"
    )
    data = json.loads(kvtool("plan", *args, "--json").stdout)
    assert data["command"] == "plan"
    assert data["results"][0]["tiers"]


def test_a_tensorrt_llm_plan_takes_its_pool_rule_and_emits_the_same_fraction(kvtool: Run) -> None:
    """--engine trtllm planned T1 with vLLM's rule (0.92 of all HBM, less the weights) and
    emitted free_gpu_memory_fraction 0.9 whatever the plan assumed (issue 51): now T1 is 0.9
    of what the weights and the reserve leave, a --set gpu_memory_utilization is that
    fraction, and --emit trtllm writes the plan's own."""
    base = ["plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "32k", "--tp", "8"]
    vllm = json.loads(kvtool(*base, "--json").stdout)["results"][0]["plan"]
    trt = json.loads(kvtool(*base, "--engine", "trtllm", "--json").stdout)["results"][0]["plan"]
    assert (vllm["gpu_memory_share_of"], vllm["gpu_memory_utilization"]) == ("hbm", 0.92)
    assert (trt["gpu_memory_share_of"], trt["gpu_memory_utilization"]) == ("free", 0.9)
    weights, reserve = trt["weights_bytes_per_node"], 8 * 2 * 10**9
    hbm = (vllm["kv_space_bytes_per_node"] + weights + reserve) / 0.92
    assert trt["kv_space_bytes_per_node"] == pytest.approx((hbm - weights - reserve) * 0.9, abs=8)
    assert any("free_gpu_memory_fraction 0.9 of the" in n for n in trt["notes"])
    set_08 = [*base, "--engine", "trtllm", "--set", "gpu_memory_utilization=0.8"]
    low = json.loads(kvtool(*set_08, "--json").stdout)["results"][0]["plan"]
    assert low["kv_space_bytes_per_node"] == pytest.approx((hbm - weights - reserve) * 0.8, abs=8)
    emitted = kvtool(*set_08, "--emit", "trtllm").stdout
    assert "  free_gpu_memory_fraction: 0.8" in emitted.splitlines()
    assert "--kv_cache_free_gpu_memory_fraction 0.8 " in emitted


def test_plan_needs_hardware_and_takes_the_rest_through_set(kvtool: Run) -> None:
    done = kvtool("plan", "llama-3.1-70b")
    assert done.exit_code == 2
    assert "kvtool plan needs --hardware NODE" in done.stderr
    base = ["plan", "deepseek-r1", "--hardware", "p5en", "--ctx", "32k", "--json"]
    plain = json.loads(kvtool(*base).stdout)["results"][0]
    slow = json.loads(kvtool(*base, "--set", "mfu=0.1").stdout)["results"][0]
    fast = json.loads(kvtool(*base, "--set", "mfu=0.8").stdout)["results"][0]
    recompute = [r["reload"]["break_even"][0]["recompute_s"] for r in (slow, plain, fast)]
    assert recompute[0] > recompute[1] > recompute[2]  # mfu moves the recompute time
    old = kvtool("size", *base[1:], "--dp-attention")
    new = kvtool(*base, "--set", "dp_attention=true")
    assert json.loads(old.stdout)["results"] == json.loads(new.stdout)["results"]
    bad = kvtool(*base, "--set", "speed=fast")
    assert bad.exit_code == 2
    assert "--set 'speed' is not a plan setting" in bad.stderr


def test_the_storage_models_settings_reach_the_plan_and_bad_ones_are_one_line(kvtool: Run) -> None:
    """Every assumption of the T3/T4 request model is a --set key, and printed (issue 49)."""
    base = ["plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "128k", "--json"]
    got = json.loads(kvtool(*base, "--set", "s3_prefixes=4", "--set", "s3_lookups=0",
                            "--set", "io_threads=64", "--set", "metadata_iops=36000",
                            "--set", "chunk_tokens=512").stdout)["results"][0]  # fmt: skip
    paths = {p["tier"]: p for p in got["reload"]["paths"]}
    assert paths["T4"]["request_rate_per_s"] == 4 * 5_500
    assert paths["T4"]["requests_per_object"] == 1
    assert paths["T3"]["request_rate_per_s"] == 36_000
    assert "512-token chunk" in paths["T3"]["description"]
    assert "64 I/O threads" in paths["T3"]["description"]
    assert got["plan"]["t3_file_system"]["metadata_mode"] == "given"
    for item, message in (
        ("metadata_iops=5000", "--set metadata_iops 5,000 cannot be provisioned"),
        ("s3_prefixes=0", "--set s3_prefixes must be at least 1"),
        ("fp8_attention=perhaps", "--set fp8_attention='perhaps' is not true or false"),
    ):
        bad = kvtool(*base, "--set", item)
        assert bad.exit_code == 2, item
        assert bad.stderr.startswith(f"kvtool: error: {message}"), bad.stderr
        assert bad.stdout == ""


def test_the_t4_restore_says_which_term_bounds_each_phase(kvtool: Run) -> None:
    """The lookup and the reads each print their bound and the requests a second they need
    against the node's share of S3's rate (issue 49): p5en 70B at 128K x 1,000 on 8 nodes."""
    base = ["plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "128k", "--sessions",
            "1000", "--nodes", "8"]  # fmt: skip
    plain = " ".join(kvtool(*base).stdout.split())
    assert (
        "lookup latency-bound: 800.00 s (its HEADs need 80/s of 688/s: 93.09 s at the rate);"
        " reads bound by the requests in flight: 223.36 s (bytes 53.69 s, request rate 93.09 s;"
        " its GETs need 287/s of 688/s); as fast as recompute (197.16 s) needs 649 requests/s a"
        " node against 688/s: met" in plain
    )
    assert "the lookup a chunk after another, 1 session at a time per engine;" in plain
    side = " ".join(kvtool(*base, "--set", "s3_lookups_at_once=16").stdout.split())
    assert (
        "lookup rate-bound: 93.09 s at 688/s (its HEADs need 1,280/s of 688/s: 50.00 s a chunk"
        " at a time)" in side
    )
    assert "16 sessions at a time per engine (--set s3_lookups_at_once)" in side
    got = json.loads(kvtool(*base, "--json", "--set", "s3_lookups_at_once=16").stdout)
    t4 = next(p for p in got["results"][0]["reload"]["paths"] if p["tier"] == "T4")["restore"]
    assert (t4["lookup_bound"], t4["lookup_requests"], round(t4["total_s"], 2)) == (
        "request rate", 64_000, 316.55)  # fmt: skip
    assert got["results"][0]["reload"]["assumptions"]["s3_lookups_at_once"] == 16
    bad = kvtool(*base, "--set", "s3_lookups_at_once=0")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("kvtool: error: --set s3_lookups_at_once"), bad.stderr


def test_lmcaches_lookup_timeout_gives_t4_engine_direct_up_and_the_plan_says_so(
    kvtool: Run,
) -> None:
    """LMCache answers 0 hits after lookup_timeout_ms (3 s) and vLLM recomputes: a 128K
    session's 500 HEADs of 100 ms take 50 s, so S3 engine-direct restores nothing, wins at no
    context, and the plan says so; with an hour the old crossover returns, bounded (issue 49)."""
    base = ["plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "128k", "--sessions",
            "1000", "--nodes", "8"]  # fmt: skip
    plain = " ".join(kvtool(*base).stdout.split())
    assert "reload wins never (times out past 7,680 tokens)" in plain
    assert "T4 engine-direct restores no session past 7,680 tokens" in plain
    assert "lookup_timeout_ms, 3,000 by default in LMCache 0.5.6's v1/config.py:457-461" in plain
    assert "the AWS article's T4 through FSx (300 us a chunk) holds to 2,560,000 tokens" in plain
    assert (
        "not restored: its 50.00 s lookup outlasts the 3.00 s timeout (lookup_timeout=50s lets it"
        " through)" in plain
    )
    assert "1,023.46 s !" in plain
    assert "1,023.46 s *" not in plain
    got = json.loads(kvtool(*base, "--json").stdout)["results"][0]["reload"]
    t4 = next(p for p in got["paths"] if p["tier"] == "T4")
    assert (t4["reload_wins_from_tokens"], t4["reload_up_to_tokens"], t4["lookup_timeout_s"]) == (
        None, 7_680, 3.0)  # fmt: skip
    assert (t4["restore"]["lookup_session_s"], t4["restore"]["lookup_times_out"]) == (50.0, True)
    t3 = next(p for p in got["paths"] if p["tier"] == "T3")
    assert (t3["reload_up_to_tokens"], t3["restore"]["lookup_times_out"]) == (None, False)
    hour = " ".join(kvtool(*base, "--set", "lookup_timeout=1h").stdout.split())
    assert "reload wins from 1,102,211 to 9,216,000 tokens (times out past them)" in hour
    assert "T4 engine-direct restores no session" not in hour
    assert "not restored" not in hour
    waited = json.loads(kvtool(*base, "--json", "--set", "lookup_timeout=50s").stdout)
    assert waited["results"][0]["reload"]["assumptions"]["lookup_timeout_s"] == 50.0
    t4 = next(p for p in waited["results"][0]["reload"]["paths"] if p["tier"] == "T4")
    assert t4["restore"]["lookup_times_out"] is False  # 50 s lets 128K through
    for item, message in (
        ("lookup_timeout=3", "--set lookup_timeout '3' is not a duration"),
        ("lookup_timeout=0", "--set lookup_timeout=0 is not a lookup timeout"),
    ):
        bad = kvtool(*base, "--set", item)
        assert bad.exit_code == 2, item
        assert bad.stderr.startswith(f"kvtool: error: {message}"), bad.stderr
    sglang = kvtool(*base, "--engine", "sglang", "--set", "lookup_timeout=1h")
    assert sglang.exit_code == 2
    assert sglang.stderr.startswith("kvtool: error: --set lookup_timeout is LMCache's"), (
        sglang.stderr
    )
    assert "lookup_timeout_ms" not in kvtool(*base, "--engine", "sglang").stdout


def test_a_t3_lookup_past_lmcaches_timeout_is_said(kvtool: Run) -> None:
    """LMCache's fs and GDS backends answer through the same lookup client and its 3 s
    lookup_timeout_ms: at 3M tokens a session's 12,288 stats of 300 us take 3.69 s, so on
    LMCache's defaults T3 restores nothing there and the plan's T3 times assume the timeout
    raised; said, with the value. Not below 2,560,000 tokens, not with the timeout given
    past it, not for SGLang's file tier (issue 49)."""
    base = ["plan", "llama-4-scout", "--hardware", "p5en", "--sessions", "4"]
    plain = " ".join(kvtool(*base, "--ctx", "3M").stdout.split())
    assert "LMCache's T3 (its fs or GDS backend) restores no session past 2,560,000 tokens" in plain
    assert "(300 us a chunk, in turn: 3.69 s) outlasts lookup_timeout_ms (3,000," in plain
    assert "assume lookup_timeout_ms 3,687 or more in LMCache's config" in plain
    for more in (["--ctx", "2M"], ["--ctx", "3M", "--set", "lookup_timeout=4s"],
                 ["--ctx", "3M", "--engine", "sglang"]):  # fmt: skip
        done = kvtool(*base, *more)
        assert done.exit_code == 0, (more, done.stderr)
        assert "LMCache's T3" not in done.stdout, more


def test_emit_lmcache_has_no_s3_backend_so_keeps_lmcaches_lookup_timeout(kvtool: Run) -> None:
    """lookup_timeout_ms matters to an S3 remote backend (a HEAD a chunk, 100 ms): the emitted
    YAML has none (T3 through the fs plugin, a 300 us stat a chunk), so it leaves LMCache's
    3000 ms as it is, even where the plan says T4 engine-direct would time out (issue 49)."""
    out = kvtool("plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "128k", "--sessions",
                 "1000", "--nodes", "8", "--emit", "lmcache").stdout  # fmt: skip
    keys = [line.split(":")[0].strip() for line in out.splitlines() if not line.startswith("#")]
    assert 'remote_storage_plugins: ["fs"]' in out
    assert not [k for k in keys if k in ("remote_url", "lookup_timeout_ms") or "s3" in k]


def test_no_command_shows_more_than_20_options() -> None:
    import typer.main

    from kvtool.cli.app import build_app

    app = typer.main.get_command(build_app())
    shown: dict[str, int] = {}

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
            return
        shown[" ".join(path)] = sum(
            1
            for p in command.params
            if p.param_type_name == "option"
            and not p.hidden
            and p.name not in ("help", "as_json", "quiet")  # what every command has
        )

    walk(app, ())
    assert "plan" in shown
    assert max(shown.values()) <= 20, shown


def test_the_verdict_is_the_first_line_and_in_the_json(kvtool: Run) -> None:
    args = ("plan", "llama-3.1-405b", "--ctx", "200k", "--sessions", "100", "--hardware", "trn3")
    text = kvtool(*args)
    assert text.exit_code == 0, text.stderr
    assert text.stdout.splitlines()[0] == (
        "fits: 100 of 100 sessions in T1 (53% of HBM's KV space), 1 x trn3-ultraserver,"
        " tp 8 x pp 18"
    )
    (record,) = json.loads(kvtool(*args, "--tp", "8", "--json").stdout)["results"]
    verdict = record["verdict"]
    assert (verdict["fits"], verdict["sessions_in_t1"], verdict["tp"], verdict["pp"]) == (
        False, 45, 8, 1,
    )  # fmt: skip
    assert [t["options"] for t in verdict["tries"]] == [
        ["--kv-dtype", "fp8"], ["--nodes", "3"], ["--tp", "8", "--pp", "18"],
    ]  # fmt: skip
    assert verdict["tries"][1]["fits"] is True
    assert isinstance(verdict["hbm_utilization"], float)
    several = kvtool("plan", "llama-3.1-70b", "--ctx", "10k,128k", "--sessions", "500",
                     "--hardware", "p5en").stdout.splitlines()  # fmt: skip
    assert several[0].startswith("at 10,000 tokens, does not fit: 248 of 500 sessions in T1")
    assert several[1].startswith("at 128,000 tokens, does not fit: 19 of 500 sessions in T1")


def test_emit_sglang_plans_with_sglangs_rules_unless_another_engine_was_asked(kvtool: Run) -> None:
    args = ("plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "32k", "--emit", "sglang")
    emitted = kvtool(*args)
    assert emitted.exit_code == 0, emitted.stderr
    assert "--emit sglang: the plan is sized by sglang's rules (no --engine given)" in (
        emitted.stderr
    )
    assert emitted.stdout.startswith("# SGLang 0.5.23 HiCache command")
    assert kvtool(*args, "--engine", "sglang").stdout == emitted.stdout
    asked = kvtool(*args, "--engine", "vllm")  # said, so a conflict: one line, exit 2
    assert asked.exit_code == 2
    assert "--emit sglang configures sglang, but the plan is sized by --engine vllm's" in (
        asked.stderr
    )


def test_the_same_reload_section_is_printed_once(kvtool: Run) -> None:
    """At 10K and 50K the paths, table and notes are the same: printed at the first context,
    referred to at the second; the fan-in (a session's size) is each context's own."""
    out = kvtool("plan", "llama-3.1-70b", "--ctx", "10k,50k", "--hardware", "p5en").stdout
    assert out.count("Reload vs recompute (16 sessions at once per node") == 1
    assert out.count("(* reload beats recompute") == 1
    assert "Reload vs recompute: as at 10,000 tokens above" in out
    assert out.count("departs from the AWS article's \"below 10K") == 1
    assert out.count("Fan-in from T3 at") == 2
    other = kvtool("plan", "llama-3.1-70b", "--ctx", "10k,2m", "--hardware", "p5en").stdout
    assert "as at 10,000 tokens above" not in other  # 2M adds a row: a table of its own


def test_cost_on_every_bundled_node_prints_the_plan(kvtool: Run) -> None:
    """A price the prices file lacks never fails the plan: it exits 0 and the cost names the
    missing price and how to give it (issue 49: trn3-ultraserver exited 2)."""
    from kvtool.profiles.load import node_profiles

    for node in node_profiles():
        got = kvtool("plan", "llama-3.1-8b", "--hardware", node.name, "--ctx", "8k", "--cost",
                     "--json")  # fmt: skip
        assert got.exit_code == 0, (node.name, got.stderr)
        cost = json.loads(got.stdout)["results"][0]["cost"]
        if cost["usd_per_month"] is None:
            assert f'instance_hour."{node.name}"' in cost["missing_prices"]
            assert any("--prices FILE" in n for n in cost["notes"])
