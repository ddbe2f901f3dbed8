"""``kvtool capacity`` as a user runs it, on real folders: the verdict first, the levels, the
harness beside raw fio, the plan beside the run (exit 1 when it does not hold), --json in the
envelope (held to docs/json/capacity.schema.json), --plot, and bad input as one line, exit 2."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Run = Callable[..., CliResult]
TINY = ("--model", "llama-3.2-1b", "--ctx", "1k", "--duration", "1")


def test_fixed_levels_in_text(kvtool: Run, tmp_path: Path) -> None:
    result = kvtool("capacity", "--t3-dir", str(tmp_path), *TINY, "--sessions", "1,2",
                    "--restore-slo", "60s", "--no-fio-check")  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "T3 holds 2 concurrent restores within 60,000 ms at p95"
    assert "llama-3.2-1b (bf16, tp 1): a 256-token chunk is 8,388,608 bytes a rank" in (
        result.stdout
    )
    assert "sessions  restores" in result.stdout
    assert "closed loop" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (.ci/setup)")
def test_json_with_the_fio_check_and_the_plan_beside_it(kvtool: Run, tmp_path: Path) -> None:
    """A 1 ms target holds no level: the plan's 16 concurrent restores miss it, exit 1."""
    result = kvtool("capacity", "--t3-dir", str(tmp_path), *TINY, "--restore-slo", "1ms",
                    "--hardware", "p5en", "--json")  # fmt: skip
    assert result.exit_code == 1, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert (data["schema_version"], data["command"]) == (1, "capacity")
    capacity = data["capacity"]
    assert capacity["max_sessions"] == 0
    assert (capacity["slo_s"], capacity["percentile"]) == (0.001, "p95")
    assert [level["sessions"] for level in capacity["levels"]] == [1, 16]  # 16: the plan's
    assert data["fio_check"]["fio_bytes_per_s"] > 0
    assert data["fio_check"]["ratio"] > 0
    assert data["plan"]["concurrent_restores"] == 16
    assert data["plan"]["measured_sessions"] == 16
    assert data["verdict_text"].startswith("T3 does not hold the plan")
    assert data["workload"]["files_per_restore"] == 4
    assert list(tmp_path.iterdir()) == []


def test_the_plan_takes_a_capacity_report_as_its_t3_bandwidth(kvtool: Run, tmp_path: Path) -> None:
    """``kvtool plan --bench`` reads a capacity --json file: the fastest level's read rate
    stands for T3, and the path says it came from capacity's restores."""
    t3 = tmp_path / "t3"
    t3.mkdir()
    result = kvtool("capacity", "--t3-dir", str(t3), *TINY, "--sessions", "1,2",
                    "--restore-slo", "60s", "--no-fio-check", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    report = tmp_path / "capacity.json"
    report.write_text(result.stdout)
    levels = json.loads(result.stdout)["capacity"]["levels"]
    fastest = max(level["bytes_per_s"] for level in levels)
    plan = kvtool("plan", "llama-3.2-1b", "--hardware", "p5en", "--ctx", "4k", "--bench",
                  str(report), "--json")  # fmt: skip
    assert plan.exit_code == 0, plan.stdout + plan.stderr
    (planned,) = json.loads(plan.stdout)["results"]
    (path,) = (p for p in planned["reload"]["paths"] if p["tier"] == "T3")
    assert path["bandwidth_source"] == "measured"
    assert path["node_bytes_per_s"] == pytest.approx(fastest)
    assert "kvtool capacity: " in path["description"]
    assert "sessions restoring at once" in path["description"]


def test_plot(kvtool: Run, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    t3 = tmp_path / "t3"
    t3.mkdir()
    chart = tmp_path / "capacity.png"
    result = kvtool("capacity", "--t3-dir", str(t3), *TINY, "--sessions", "1,2",
                    "--restore-slo", "60s", "--no-fio-check", "--plot", str(chart))  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    assert chart.read_bytes().startswith(b"\x89PNG")
    assert f"capacity chart written to {chart}" in result.stdout


def test_the_chart_draws_what_was_measured() -> None:
    from kvtool.bench.capacity import CapacityOptions, CapacityResult
    from kvtool.bench.sessions import Level, PlanSide, Search, Workload
    from kvtool.cli.render.capacity import capacity_chart

    levels = tuple(Level(n, 10, 0.1, 0.02 * n, 0.03 * n, 1e9, 1.0, 1.0, 1.0) for n in (8, 1, 4))
    result = CapacityResult("/fsx", Workload(1000, 256, 4096), CapacityOptions(slo_s=0.1),
                            Search(levels, 4, ""), 4096, None, ())  # fmt: skip
    data = capacity_chart(result, PlanSide(16, 0.3, ""))
    assert data["points"] == [(1, pytest.approx(20.0)), (4, pytest.approx(80.0)),
                              (8, pytest.approx(160.0))]  # fmt: skip
    assert (data["slo_ms"], data["plan_sessions"], data["max_sessions"]) == (100.0, 16, 4)
    assert data["plan_point"] == (16, pytest.approx(300.0))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--ctx", "1k"), "needs --t3-dir"),
        (("--t3-dir", "/nonexistent-kvtool"), "needs --model"),
        (("--t3-dir", "/nonexistent-kvtool", *TINY), "does not exist"),
        (("--t3-dir", ".", *TINY, "--percentile", "p42"), "is not one kvtool reports"),
        (("--t3-dir", ".", *TINY, "--plot", "chart.gif"), "--plot"),
    ],
)
def test_bad_input_is_one_line_exit_2(kvtool: Run, args: tuple[str, ...], message: str) -> None:
    result = kvtool("capacity", *args)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


@needs_fio
def test_hosts_load_t3_alike_while_this_node_measures(  # type: ignore[no-untyped-def]
    kvtool: Run, tmp_path: Path, fio_servers
) -> None:
    """Two ``fio --server``s on 127.0.0.1 stand for two more nodes: their files laid out
    once, then at each level as many reader jobs each as the sessions here read chunks at
    once, started before the level and finished after it."""
    hosts = ",".join(f"127.0.0.1:{port}" for port in fio_servers)
    result = kvtool("capacity", "--t3-dir", str(tmp_path), *TINY, "--sessions", "1,2",
                    "--restore-slo", "60s", "--no-fio-check", "--hosts", hosts,
                    "--json")  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["workload"]["fleet_nodes"] == 2
    levels = data["capacity"]["levels"]
    assert [level["sessions"] for level in levels] == [1, 2]
    assert all(level["fleet_bytes_per_s"] > 0 for level in levels)
    assert "per node, 2 more node(s) loading T3 alike" in data["verdict_text"]
    assert list(tmp_path.iterdir()) == []  # the fleet's files too


@needs_fio
def test_hosts_that_do_not_answer_are_one_clear_error(kvtool: Run, tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = kvtool("capacity", "--t3-dir", str(tmp_path), *TINY, "--sessions", "1",
                    "--no-fio-check", "--hosts", f"127.0.0.1:{port}")  # fmt: skip
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "fio could not reach its servers" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_plot_without_matplotlib_prints_the_table_then_one_line(tmp_path: Path) -> None:
    """Without the plot extra: the measured table, then one line and exit 2 (issue 54)."""
    import subprocess
    import sys

    from tests.cli.test_replay import WITHOUT_MATPLOTLIB

    t3 = tmp_path / "t3"
    t3.mkdir()
    done = subprocess.run([sys.executable, "-c", WITHOUT_MATPLOTLIB, "capacity", "--t3-dir",
                           str(t3), *TINY, "--sessions", "1", "--restore-slo", "60s",
                           "--no-fio-check", "--plot", str(tmp_path / "c.png")],
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[2])  # fmt: skip
    assert done.returncode == 2
    assert "sessions" in done.stdout
    assert done.stderr.splitlines()[-1] == (
        "kvtool: error: --plot needs matplotlib (pip install 'kvtool[plot]')"
    )
    assert not (tmp_path / "c.png").exists()


def test_a_folder_off_lustre_is_said(kvtool: Run, tmp_path: Path) -> None:
    """capacity on a local folder measured that disk, not FSx, without a word (issue 54)."""
    result = kvtool("capacity", "--t3-dir", str(tmp_path), *TINY, "--sessions", "1",
                    "--restore-slo", "60s", "--no-fio-check", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (note,) = [n for n in json.loads(result.stdout)["notes"] if "not FSx for Lustre" in n]
    assert note.startswith(f"{tmp_path} is on ")
