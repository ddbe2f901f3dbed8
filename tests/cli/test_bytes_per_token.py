"""A JSON field named bytes per token never reads 0 for a model that caches KV (issue 55).

``kvtool size phi-3-mini-4k --ctx 8k --json`` said ``kv_bytes_per_token: 0``: every layer is
a sliding window of 2,047 tokens, so one more token past it adds nothing, and that marginal
figure was what the field carried while the table showed 393,216 B a token. The field is now
the bytes a token costs in every layer (the table's "bytes/token" of all layers, ``kvtool
models``' figure), and ``kv_bytes_per_token_mean`` is the table's "mean B/token": a session's
bytes over its tokens at the context asked (windows, state and block rounding in).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.conftest import CliResult

Run = Callable[..., CliResult]


def _bundled(kvtool: Run) -> list[str]:
    listed = kvtool("models", "--json")
    assert listed.exit_code == 0, listed.stderr
    return [row["name"] for row in json.loads(listed.stdout)["results"]]


def _check(result: dict[str, object]) -> None:
    groups = result["layer_groups"]
    assert isinstance(groups, list)
    caches_kv = any(g["bytes_per_token"] for g in groups)
    per_token, mean = result["kv_bytes_per_token"], result["kv_bytes_per_token_mean"]
    assert isinstance(per_token, int)
    assert isinstance(mean, int)
    assert (per_token > 0) == caches_kv, result["model"]
    assert per_token == sum(g["bytes_per_token"] for g in groups)
    assert per_token == result["kv_bytes_per_token_unbounded"]
    assert mean == round(result["kv_bytes_per_session"] / result["ctx_tokens"])  # type: ignore[operator]
    if caches_kv:
        assert mean > 0


def test_no_size_json_reads_zero_bytes_per_token_for_a_model_with_kv(kvtool: Run) -> None:
    """Every bundled model at a context past every window (1M tokens) and at one below."""
    for name in _bundled(kvtool):
        result = kvtool("size", name, "--ctx", "1k,1m", "--json")
        if result.exit_code == 2:  # a model the default engine refuses says why, by name
            assert result.stderr.startswith("kvtool: error:"), name
            continue
        assert result.exit_code == 0, (name, result.stderr)
        for one in json.loads(result.stdout)["results"]:
            _check(one)


def test_an_all_sliding_window_model_reads_its_bytes_per_token() -> None:
    """The case the issue found: the table and the JSON say the same figures."""
    from typer.testing import CliRunner

    from kvtool.cli.app import app

    runner = CliRunner()
    table = runner.invoke(app, ["size", "phi-3-mini-4k", "--ctx", "8k"])
    data = json.loads(runner.invoke(app, ["size", "phi-3-mini-4k", "--ctx", "8k", "--json"]).stdout)
    [result] = data["results"]
    assert result["kv_bytes_per_token"] == 393_216  # 32 layers x 32 KV heads x 96 x 2 x 2 B
    assert f"{result['kv_bytes_per_token']:,} B" in table.stdout  # the all-layers row
    assert f"{result['kv_bytes_per_token_mean']:,} B" in table.stdout  # "mean B/token"
    assert result["kv_bytes_per_token_mean"] == 101_450


@pytest.mark.parametrize("hardware", ["p5en", "trn2.48xlarge"])
def test_plan_json_carries_the_same_figures(kvtool: Run, hardware: str) -> None:
    for name in ("phi-3-mini-4k", "gemma-3-27b", "gpt-oss-120b", "nemotron-h-56b"):
        result = kvtool("plan", name, "--hardware", hardware, "--ctx", "64k", "--json")
        assert result.exit_code in (0, 1), (name, result.stderr)
        for one in json.loads(result.stdout)["results"]:
            _check(one)
