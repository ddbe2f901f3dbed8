"""``kvtool advise`` from flags and from a YAML workload file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Run = Callable[..., CliResult]


def test_flags_give_tiers_posture_and_reasons(kvtool: Run) -> None:
    result = kvtool(
        "advise",
        "--model",
        "deepseek-r1",
        "--hardware",
        "p5en",
        "--nodes",
        "4",
        "--sessions",
        "400",
        "--ctx",
        "8k:0.5,128k:0.5",
        "--shared-prefix",
        "40%",
        "--idle",
        "120",
        "--peak-to-mean",
        "4",
        "--disaggregated",
        "--gpus-added-for-kv",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["criteria_met"] == 6
    assert data["tiers"] == ["T1", "T2", "T3"]
    assert data["posture"] == "eager"
    # the layout that holds the most: vLLM keeps the whole MLA latent on every tensor-parallel
    # rank (8 copies at tp 8), so tp 1 x pp 8 keeps one
    assert (data["tp"], data["pp"]) == (1, 8)
    assert data["session_bytes"]["128000"] == 70_272 * 128_000
    at_tp8 = kvtool("advise", "--model", "deepseek-r1", "--hardware", "p5en", "--tp", "8",
                    "--sessions", "400", "--ctx", "128k", "--json")  # fmt: skip
    assert json.loads(at_tp8.stdout)["session_bytes"]["128000"] == 8 * 70_272 * 128_000


def test_yaml_file_and_flag_override(kvtool: Run, tmp_path: Path) -> None:
    workload = tmp_path / "workload.yaml"
    workload.write_text(
        "model: llama-3.1-70b\nhardware: trn3-ultraserver\nsessions: 100\n"
        "contexts: {200k: 1.0}\npeak_to_mean: 1.5\n"
    )
    data = json.loads(kvtool("advise", str(workload), "--json").stdout)
    assert data["tiers"] == ["T1"]
    override = json.loads(kvtool("advise", str(workload), "--sessions", "2000", "--json").stdout)
    # AWS's Neuron docs publish 27,648 GiB of host memory per Gen2 UltraServer: T2 is planned
    assert override["tiers"] == ["T1", "T2", "T3"]
    assert (override["tp"], override["pp"]) == (8, 18)  # the layout that holds the most
    table = kvtool("advise", str(workload)).stdout
    assert "recommended tiers: T1" in table


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("model: llama-3.1-8b\nhardware: p5\nsesions: 10\n", "unknown key 'sesions'"),
        ("model: [unclosed\n", "malformed YAML at line"),
        ("- a\n- b\n", "must be a YAML mapping"),
        (
            "model: llama-3.1-8b\nhardware: p5\ncontexts: {8k: 0.5, 32k: 0.2}\n",
            "shares add up to 0.7",
        ),
    ],
)
def test_bad_workload_files(kvtool: Run, tmp_path: Path, content: str, message: str) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(content)
    result = kvtool("advise", str(workload))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert message in result.stderr


def test_missing_model_is_reported(kvtool: Run) -> None:
    result = kvtool("advise", "--hardware", "p5")
    assert result.exit_code == 2
    assert "the workload names no model" in result.stderr


def test_advise_cost_prices_the_peak_placement(kvtool) -> None:  # type: ignore[no-untyped-def]
    import json

    args = ("advise", "--model", "deepseek-r1", "--hardware", "p5en", "--nodes", "4",
            "--sessions", "400", "--ctx", "8k:0.5,128k:0.5")  # fmt: skip
    result = kvtool(*args, "--cost", "--json")
    assert result.exit_code == 0, result.stderr
    cost = json.loads(result.stdout)["cost"]
    assert cost["lines"][0]["usd_per_month"] == 4 * 63.30 * 730  # the example's p5en x 4 nodes
    # the advice's T1 + T2 + T3: T3 is in the bill although nothing spills at peak (issue 49)
    assert cost["lines"][1]["tier"] == "T3"
    assert cost["lines"][1]["usd_per_month"] == 4_800 * 0.6
    assert cost["usd_per_session_hour"] == round((4 * 63.30 * 730 + 2_880) / (400 * 730), 4)
    assert cost["prices"]["example"] is True
    noted = kvtool(*args, "--prices", "x.toml")
    assert "--prices has no effect without --cost" in noted.stderr


def test_advise_cost_includes_every_tier_the_advice_requires(kvtool: Run) -> None:
    """Disaggregated serving needs a T3 even where the peak fits HBM: its cost is in the bill
    (issue 49: it was left out)."""
    import json

    result = kvtool("advise", "--model", "llama-3.1-70b", "--hardware", "p5en", "--sessions",
                    "10", "--ctx", "32k", "--disaggregated", "--cost", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tiers"] == ["T1", "T3"]
    lines = {line["tier"]: line for line in data["cost"]["lines"]}
    assert set(lines) == {"T1+T2", "T3"}
    assert lines["T3"]["usd_per_month"] == 4_800 * 0.6  # the example's PERSISTENT_2 @1000
    assert data["cost"]["usd_per_month"] == round(63.30 * 730 + 4_800 * 0.6, 2)
