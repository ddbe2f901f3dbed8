"""``kvtool engine replay``, ``sweep`` and ``gen`` end to end, on the head of Mooncake's
conversation trace and on generated traces."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Kvtool = Callable[..., CliResult]
HEAD = Path(__file__).parents[1] / "fixtures" / "traces" / "conversation_trace_head.jsonl"


def test_replay_json_has_the_ratios_and_tiers(kvtool: Kvtool) -> None:
    done = kvtool(
        "engine", "replay", str(HEAD), "--t1", "1M", "--t2", "3M", "--t3", "inf", "--json"
    )
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    for key in ("requests", "token_hit_ratio", "block_hit_ratio", "full_block_hit_ratio",
                "reuse_ratio_unbounded", "tiers"):  # fmt: skip
        assert key in data
    assert data["requests"] == 200
    assert [t["tier"] for t in data["tiers"]] == ["T1", "T2", "T3"]  # T4 off
    assert data["tiers"][0]["capacity"] == 2**20  # a tier's 1M is --ctx's: 2^20 tokens
    assert 0 < data["token_hit_ratio"] <= data["reuse_ratio_unbounded"] <= 1
    assert data["format"] == "mooncake"
    assert data["unit"] == "tokens"


def test_replay_with_model_and_hardware_sizes_in_bytes_and_estimates_ttft(kvtool: Kvtool) -> None:
    done = kvtool("engine", "replay", str(HEAD), "--model", "llama-3.1-8b", "--hardware", "p5en",
                  "--json")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["unit"] == "bytes"
    assert data["tiers"][0]["capacity"] > 100 * 2**30  # p5en's HBM for KV
    ttft = data["ttft"]
    assert ttft["source"].startswith("estimate:")
    assert ttft["with_cache_s"]["p50"] <= ttft["without_cache_s"]["p50"]
    assert ttft["prefill_seconds_saved"] >= 0
    text = kvtool("engine", "replay", str(HEAD), "--model", "llama-3.1-8b", "--hardware", "p5en")
    assert "TTFT (estimate:" in text.stdout
    assert "from the p5en.48xlarge plan" in text.stdout


def test_replay_text_and_a_png(kvtool: Kvtool, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "occupancy.png"
    done = kvtool("engine", "replay", str(HEAD), "--t1", "1M", "--plot", str(png))
    assert done.exit_code == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "token hit ratio" in done.stdout


def test_without_sizes_t1_is_unbounded_and_says_so(kvtool: Kvtool) -> None:
    done = kvtool("engine", "replay", str(HEAD))
    assert done.exit_code == 0
    assert "T1 unbounded and the rest off" in done.stdout
    assert "occupancy over the trace" not in done.stdout  # nothing bounded to chart


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--t1", "80GiB"), "is in bytes: that needs --model"),
        (("--t1", "lots"), "--t1 'lots' is not a size"),
        (("--hardware", "p5en"), "--hardware needs --model"),
        (("--policy", "clock"), "unknown --policy"),
        (("--format", "csv"), "unknown trace format"),
        (("--format", "jsonl"), "no kvtool trace header"),
    ],
)
def test_bad_replay_input_is_one_line_and_exit_2(
    kvtool: Kvtool, args: tuple[str, ...], message: str
) -> None:
    done = kvtool("engine", "replay", str(HEAD), *args)
    assert done.exit_code == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_malformed_line_is_named_and_skip_bad_goes_on(kvtool: Kvtool, tmp_path: Path) -> None:
    lines = HEAD.read_text().splitlines()[:10]
    lines[6] = lines[6][:30]
    trace = tmp_path / "broken.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    done = kvtool("engine", "replay", str(trace))
    assert done.exit_code == 2
    assert f"{trace}:7: not JSON" in done.stderr
    skipped = kvtool("engine", "replay", str(trace), "--skip-bad", "--json")
    assert skipped.exit_code == 0
    assert json.loads(skipped.stdout)["skipped_lines"] == 1


def test_a_trace_read_as_it_goes_fails_late_as_cleanly_as_early(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    """The replay reads the trace while it runs (a million requests in little memory): bytes
    that are not text on its last line are still one line and exit 2, and the result of a
    good trace is the one the in-memory replay gives."""
    from kvtool.replay.run import ReplayConfig, replay
    from kvtool.replay.trace import parse_trace

    good = HEAD.read_bytes()
    broken = tmp_path / "late.jsonl"
    broken.write_bytes(good + b'{"timestamp": 9e9, "hash_ids": [\xff\xfe]}\n')
    done = kvtool("engine", "replay", str(broken), "--t1", "64K")
    assert done.exit_code == 2
    assert f"{broken} is not text" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    streamed = json.loads(kvtool("engine", "replay", str(HEAD), "--t1", "64K", "--t2", "128K",
                                 "--t3", "inf", "--json").stdout)  # fmt: skip
    trace = parse_trace(HEAD.read_text().splitlines())
    sizes = {"T1": 64 * 1024, "T2": 128 * 1024, "T3": None, "T4": 0}  # K: x1024, as --ctx
    config = ReplayConfig(capacity=sizes, block_units=512, unit="tokens")
    held = replay(trace.requests, 512, config)
    assert streamed["counters"] == held.counters
    assert streamed["token_hit_ratio"] == float(f"{held.token_hit_ratio:.12g}")  # as --json rounds
    assert len(streamed["occupancy"]) == len(held.occupancy)


def test_timestamps_going_back_and_a_missing_file(kvtool: Kvtool, tmp_path: Path) -> None:
    trace = tmp_path / "back.jsonl"
    rows = [{"timestamp": t, "input_length": 10, "output_length": 1, "hash_ids": [i]}
            for i, t in enumerate((0, 20, 10))]  # fmt: skip
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = kvtool("engine", "replay", str(trace))
    assert done.exit_code == 2
    assert ":3: timestamp 10 ms goes back from 20 ms" in done.stderr
    missing = kvtool("engine", "replay", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2
    assert "is not a file" in missing.stderr


@pytest.mark.parametrize("processes", ["1", "2"])
def test_sweep_gives_one_point_per_size_and_rises_with_capacity(
    kvtool: Kvtool, processes: str
) -> None:
    done = kvtool("engine", "sweep", str(HEAD), "--t1", "256K,1M,4M,inf", "-j", processes, "--json")
    assert done.exit_code == 0, done.stderr
    points = json.loads(done.stdout)["points"]
    assert [p["capacity"]["T1"] for p in points] == [
        256 * 2**10,
        2**20,
        4 * 2**20,
        None,
    ]  # a tier's K and M are --ctx's: 2^10 and 2^20 tokens
    ratios = [p["token_hit_ratio"] for p in points]
    assert ratios == sorted(ratios)


def test_sweep_text_chart_and_png(kvtool: Kvtool, tmp_path: Path) -> None:
    done = kvtool("engine", "sweep", str(HEAD), "--t1", "256K,inf", "--t2", "0,1M")
    assert done.exit_code == 0, done.stderr
    assert "█" in done.stdout
    assert "off" in done.stdout
    pytest.importorskip("matplotlib")
    png = tmp_path / "sweep.png"
    assert (
        kvtool("engine", "sweep", str(HEAD), "--t1", "256K,inf", "--plot", str(png)).exit_code == 0
    )
    assert png.stat().st_size > 1000


def test_sweep_needs_something_to_vary(kvtool: Kvtool) -> None:
    done = kvtool("engine", "sweep", str(HEAD))
    assert done.exit_code == 2
    assert "a sweep needs sizes to vary" in done.stderr


def test_gen_is_seeded_and_replays(kvtool: Kvtool, tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    assert kvtool("engine", "gen", "--requests", "500", "--seed", "3", "-o", str(a)).exit_code == 0
    assert kvtool("engine", "gen", "--requests", "500", "--seed", "3", "-o", str(b)).exit_code == 0
    assert kvtool("engine", "gen", "--requests", "500", "--seed", "4", "-o", str(c)).exit_code == 0
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    header = json.loads(a.read_text().splitlines()[0])
    assert header["kvtool_trace"] == 1
    assert header["workload"]["seed"] == 3
    done = kvtool("engine", "replay", str(a), "--json")
    data = json.loads(done.stdout)
    assert data["requests"] == 500
    assert data["format"] == "jsonl"
    assert data["reuse_ratio_unbounded"] > 0.3  # shared prompts and conversation history


def test_gen_sharing_knobs_move_the_reuse(kvtool: Kvtool, tmp_path: Path) -> None:
    shared = tmp_path / "shared.jsonl"
    alone = tmp_path / "alone.jsonl"
    kvtool("engine", "gen", "--requests", "400", "--system-prompts", "1", "--turns", "6",
           "-o", str(shared))  # fmt: skip
    kvtool("engine", "gen", "--requests", "400", "--system-prompts", "400", "--turns", "1",
           "--rag-share", "0", "-o", str(alone))  # fmt: skip
    reuse = {
        name: json.loads(kvtool("engine", "replay", str(p), "--json").stdout)[
            "reuse_ratio_unbounded"
        ]
        for name, p in (("shared", shared), ("alone", alone))
    }
    assert reuse["shared"] > 0.5
    assert reuse["alone"] < reuse["shared"] / 2


def test_gen_bad_knobs(kvtool: Kvtool) -> None:
    done = kvtool("engine", "gen", "--rag-share", "2")
    assert done.exit_code == 2
    assert "--rag-share must be between 0 and 1" in done.stderr


def test_gen_is_bounded_by_a_request_cap_and_the_free_space(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gen -n 2**64 -o FILE`` wrote until the disk filled (339 MB in 90 s): now a cap, and a
    file system too small for the trace is refused before a byte is written."""
    done = kvtool("engine", "gen", "--requests", str(2**64), "-o", str(tmp_path / "big.jsonl"))
    assert done.exit_code == 2
    assert "more than kvtool generates (100,000,000" in done.stderr
    import os

    real = os.statvfs

    class Small:
        f_bavail, f_frsize = 10, 4096  # 40 KiB free

    monkeypatch.setattr(os, "statvfs", lambda p: Small() if str(p) == str(tmp_path) else real(p))
    done = kvtool("engine", "gen", "--requests", "1000", "-o", str(tmp_path / "t.jsonl"))
    assert done.exit_code == 2
    assert "1,000 requests take about" in done.stderr
    assert "has 41.0 kB (40.0 KiB) free" in done.stderr
    assert list(tmp_path.iterdir()) == []
    done = kvtool("engine", "gen", "--requests", "20", "-o", str(tmp_path / "t.jsonl"))
    assert done.exit_code == 0, done.stderr  # a trace that fits is written


def test_real_moves_real_bytes_and_matches_the_counting_replay(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    sizes = ("--t1", "256K", "--t2", "256K", "--t3", "inf", "--t4", "0")
    counted = json.loads(kvtool("engine", "replay", str(HEAD), *sizes, "--json").stdout)
    done = kvtool("engine", "replay", str(HEAD), *sizes, "--real", str(tmp_path),
                  "--block-bytes", "8KiB", "--json")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    real = json.loads(done.stdout)
    for key in ("token_hit_ratio", "block_hit_ratio", "full_block_hit_ratio"):
        assert real[key] == counted[key]  # the same replay, now with bytes
    stats = real["real"]
    assert stats["checked"] > 0
    assert stats["mismatched"] == 0
    assert stats["faults"] == []
    assert stats["io"]["T3"]["write_bytes"] > 0
    assert stats["io"]["T3"]["read_bytes"] > 0
    assert list(tmp_path.iterdir()) == []  # its scratch folder removed


def test_real_refuses_a_missing_folder_and_block_bytes_alone(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    done = kvtool("engine", "replay", str(HEAD), "--real", str(tmp_path / "nope"))
    assert done.exit_code == 2
    assert "is not a folder" in done.stderr
    alone = kvtool("engine", "replay", str(HEAD), "--block-bytes", "8KiB")
    assert alone.exit_code == 2
    assert "--block-bytes goes with --real" in alone.stderr


def test_replay_sizes_blocks_with_the_kv_dtype(kvtool: Kvtool) -> None:
    """The front door resolves --kv-dtype for replay as for size: fp8 halves every byte figure
    of a bf16 model when the tiers hold the same tokens."""
    runs = {}
    for dtype in ("auto", "fp8"):
        done = kvtool("engine", "replay", str(HEAD), "--model", "llama-3.1-70b", "--kv-dtype",
                      dtype, "--t1", "256K", "--t2", "1M", "--t3", "inf", "--json")  # fmt: skip
        assert done.exit_code == 0, done.stderr
        runs[dtype] = json.loads(done.stdout)
    bf16, fp8 = runs["auto"], runs["fp8"]
    assert bf16["token_hit_ratio"] == fp8["token_hit_ratio"]
    for full, half in zip(bf16["tiers"], fp8["tiers"], strict=True):
        for key in ("capacity", "read", "written", "peak"):
            if full[key]:
                assert full[key] == 2 * half[key], (full["tier"], key)
    assert any("fp8_e4m3" in note for note in fp8["notes"])


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_and_cleared_and_absent_when_piped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvtool.cli.render.text import Progress

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with Progress(True, "kvtool engine replay", "requests", every_s=0.0) as progress:
        progress(0, 12_031)
        progress(4096, 12_031)
        progress(12_031, 12_031)
    text = terminal.getvalue()
    assert "\r\033[Kkvtool engine replay: 4,096 of 12,031 requests (34%)" in text
    assert text.endswith("\r\033[K")  # the line is gone when the work is done
    assert "\n" not in text
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    with Progress(True, "x", "requests", every_s=0.0) as progress:
        progress(1, 2)
    assert piped.getvalue() == ""


def test_replay_and_sweep_report_progress_through_the_whole_trace() -> None:
    from kvtool.replay.run import ReplayConfig, replay
    from kvtool.replay.sweep import grid, run_sweep
    from kvtool.replay.trace import parse_trace

    records = [json.loads(line) for line in HEAD.read_text().splitlines()]
    span = records[-1]["timestamp"] + 1
    lines = [json.dumps({**r, "timestamp": r["timestamp"] + k * span})
             for k in range(15) for r in records]  # fmt: skip
    trace = parse_trace(lines)  # 3,000 requests
    seen: list[tuple[int, int]] = []
    config = ReplayConfig(capacity={"T1": 1_000_000}, block_units=512, unit="tokens")
    replay(trace.requests, trace.block_tokens, config, progress=lambda d, t: seen.append((d, t)))
    total = len(trace.requests)
    assert seen[0] == (0, total)
    assert seen[-1] == (total, total)
    assert [d for d, _ in seen[1:-1]] == list(range(1024, total, 1024))
    points: list[tuple[int, int]] = []
    configs = grid({"T1": [1_000_000, 2_000_000, None]}, config)
    run_sweep(trace, configs, processes=1, progress=lambda d, t: points.append((d, t)))
    assert points == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_charts_name_the_trace_and_model_and_read_in_human_units(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    """Byte axes were raw numbers (1e10) and the title named neither trace nor model; the
    sweep drew its first-given tier on x even when another was the one swept."""
    pytest.importorskip("matplotlib")
    svg = tmp_path / "occupancy.svg"
    done = kvtool("engine", "replay", str(HEAD), "--model", "llama-3.1-8b", "--t1", "2GiB",
                  "--plot", str(svg))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    text = svg.read_text()
    assert "conversation_trace_head.jsonl, llama-3.1-8b: tier occupancy" in text
    assert " GB" in text  # the y ticks, in human units (matplotlib's round numbers: decimal)
    sweep = tmp_path / "sweep.svg"
    done = kvtool("engine", "sweep", str(HEAD), "--t1", "1M", "--t2", "0,1M,4M,inf",
                  "--plot", str(sweep), "-j", "1")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    text = sweep.read_text()
    assert "conversation_trace_head.jsonl: hit ratio by T2 size" in text  # T2 is the swept one
    assert "T2 capacity (tokens, log scale; off drawn at the left; inf drawn at the right)" in text


def test_a_t1_sweep_prints_the_whole_curve_exact_at_its_points(kvtool: Kvtool) -> None:
    """Only the given points were printed; the one-pass curve agrees with a replay per size."""
    done = kvtool("engine", "sweep", str(HEAD), "--t1", "256K,1M,inf", "-j", "1", "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    curve = data["curve"]
    assert len(curve) >= 10
    assert [p["token_hit_ratio"] for p in curve] == sorted(p["token_hit_ratio"] for p in curve)
    assert curve[-1]["token_hit_ratio"] == data["points"][-1]["token_hit_ratio"]  # inf
    assert any("one LRU stack-distance pass" in n for n in data["notes"])
    text = kvtool("engine", "sweep", str(HEAD), "--t1", "256K,inf", "-j", "1").stdout
    assert "token hit ratio by T1 size (the whole curve):" in text
    args = ("engine", "sweep", str(HEAD), "--t1", "256K,inf", "--t2", "1M", "-j", "1", "--json")
    with_t2 = json.loads(kvtool(*args).stdout)
    assert with_t2["curve"] is None
    assert (
        "each point a replay; no whole-curve pass: T2 on (the one-pass curve is for T1 alone)"
        in (with_t2["notes"])
    )


def test_gen_to_a_file_shows_its_progress_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kvtool.cli.engine.gen import gen
    from kvtool.cli.render import text

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(text.Progress, "__init__", _every_time(text.Progress.__init__))
    out = tmp_path / "t.jsonl"
    gen(output=out, requests="3000", arrival_rate=5.0, turns=4, think=30.0, system_prompts=4,
        system_tokens=1024, rag_preambles=8, rag_share=0.3, rag_tokens=2048, user_tokens=256,
        output_tokens=256, max_context="128k", block_tokens=512, seed=7)  # fmt: skip
    shown = terminal.getvalue()
    assert "\r\033[Kkvtool engine gen: 2,048 of 3,000 requests (68%)" in shown
    assert f"kvtool: wrote 3,000 requests to {out}" in shown
    assert len(out.read_text().splitlines()) >= 3000


def _every_time(init):  # type: ignore[no-untyped-def]
    """``Progress.__init__`` with no rate limit, so a short run shows every update."""

    def patched(self, enabled, label, what, *, every_s=0.2):  # type: ignore[no-untyped-def]
        init(self, enabled, label, what, every_s=0.0)

    return patched


@pytest.mark.parametrize(
    ("value", "unit", "label"),
    [
        (999_936, "tokens", "1m"),  # 1m tokens rounded down to whole 512-token blocks
        (3 * 2**20, "tokens", "3M"),
        (10**7, "tokens", "10m"),
        (9_999_220_736, "bytes", "10 GB"),  # was 9.31 GiB for a point asked at 10 GB
        (10 * 2**30, "bytes", "10 GiB"),
        (1.5 * 2**30, "bytes", "1.5 GiB"),
    ],
)
def test_a_tick_is_labelled_as_the_user_typed_it(value: float, unit: str, label: str) -> None:
    from kvtool.cli.render.replay import tick_label

    assert tick_label(value, unit) == label


def _charted(kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str):  # type: ignore[no-untyped-def]
    """The data the sweep chart drew for ``engine sweep HEAD args --plot``."""
    pytest.importorskip("matplotlib")
    from kvtool.cli.render import replay as render

    seen = {}
    original = render.sweep_chart

    def recording(*a, **k):  # type: ignore[no-untyped-def]
        seen["data"] = original(*a, **k)
        return seen["data"]

    monkeypatch.setattr(render, "sweep_chart", recording)
    png = tmp_path / "s.png"
    done = kvtool("engine", "sweep", str(HEAD), *args, "--plot", str(png))
    assert done.exit_code == 0, done.stderr
    assert png.stat().st_size > 1000
    return seen["data"]


def test_the_sweep_chart_says_its_unit_labels_its_points_and_shows_every_line(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _charted(kvtool, tmp_path, monkeypatch, "--t1", "1M,3M,10M,inf", "--t3", "0,inf")
    assert [label for _, label in data["ticks"]] == ["1M", "3M", "10M", "inf"]  # as typed
    decimal = _charted(kvtool, tmp_path, monkeypatch, "--t1", "1m,3m")
    assert [label for _, label in decimal["ticks"]] == ["1m", "3m"]  # 999,936: labelled as typed
    assert data["xlabel"] == "T1 capacity (tokens, log scale; inf drawn at the right)"
    labels = [s[0] for s in data["series"]]
    assert labels == ["T3 off", "T3 inf"]
    assert len({(s[2], s[3]) for s in data["series"]}) == 2  # "T3 off" not hidden under "inf"
    finite = _charted(kvtool, tmp_path, monkeypatch, "--t1", "1M,3M")
    assert "inf" not in finite["xlabel"]  # no inf swept: none said
    assert finite["curve"]  # the stack-distance curve the text prints is drawn too
    assert all(0 <= y <= 1 for _, y in finite["curve"])


def test_the_sweep_chart_draws_a_tier_turned_off(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--t2 0,10M,30M`` drew two points: the T2=0 one had no place on a log axis (issue
    54). It is drawn at the left, as ``inf`` is at the right, and said in the axis label."""
    data = _charted(kvtool, tmp_path, monkeypatch, "--t1", "64K", "--t2", "0,128K,512K")
    assert data["x_tier"] == "T2"
    assert [label for _, label in data["ticks"]] == ["off", "128K", "512K"]
    ((_, points, _, _),) = data["series"]
    assert len(points) == 3
    off = points[0]
    assert off[0] == data["ticks"][0][0] < 128 * 1024
    assert off[1] <= points[1][1]  # T2 off hits no more than T2 on
    assert data["xlabel"] == "T2 capacity (tokens, log scale; off drawn at the left)"


def test_the_occupancy_chart_draws_capacities_and_names_empty_tiers() -> None:
    from kvtool.cli.render.replay import occupancy_chart
    from kvtool.replay.run import ReplayConfig, replay
    from kvtool.replay.trace import parse_trace

    trace = parse_trace(HEAD.read_text().splitlines(), source=str(HEAD))
    config = ReplayConfig(
        capacity={"T1": 100_000, "T2": 300_000, "T3": None, "T4": 0},
        block_units=trace.block_tokens,
        unit="tokens",
        t2_idle_s=1e9,
    )  # fmt: skip  (T2 overflows into T3; T3 never idles out)
    data = occupancy_chart(replay(trace.requests, trace.block_tokens, config))
    drawn = {tier: capacity for tier, _, capacity in data["lines"]}
    assert drawn["T1"] == 100_000  # bounded tiers carry their capacity line
    assert drawn["T2"] == 300_000
    config = config._replace(capacity={"T1": 100_000, "T2": None, "T3": None, "T4": 0})
    idle = occupancy_chart(replay(trace.requests, trace.block_tokens, config))
    assert idle["empty"] == ["T3"]  # T2 holds all that leaves T1: T3 is named, not drawn
    assert "T3" not in [tier for tier, _, _ in idle["lines"]]
    assert all(any(values) for _, values, _ in data["lines"])  # no line lies on the axis


WITHOUT_MATPLOTLIB = (  # as after `pip install .`: the plot extra is not there
    "import sys; sys.modules['matplotlib'] = None; from kvtool.cli.app import main;"
    " sys.argv = ['kvtool', *sys.argv[1:]]; main()"
)


@pytest.mark.parametrize("command", ["sweep", "replay"])
def test_plot_without_matplotlib_prints_the_table_then_one_line(
    command: str, tmp_path: Path
) -> None:
    """``--plot`` without the plot extra was a 42-line traceback and no table (issue 54):
    the figures were measured, so they are shown, then one line saying what to install."""
    import subprocess

    chart = tmp_path / "chart.png"
    sizes = ["--t1", "256K,inf"] if command == "sweep" else ["--t1", "1M"]
    done = subprocess.run([sys.executable, "-c", WITHOUT_MATPLOTLIB, "engine", command, str(HEAD),
                           *sizes, "--plot", str(chart)], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2], timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert "token hit ratio" in done.stdout  # the table, and the text chart in the plot's place
    assert done.stderr.splitlines() == [
        "kvtool: error: --plot needs matplotlib (pip install 'kvtool[plot]')"
    ]
    assert not chart.exists()
