"""docs/planning.md's crossover table is what kvtool computes, so a reader can trust it.

The table is for one p5en with 48,000 GiB of FSx PERSISTENT_2 at 1,000 MB/s/TiB over EFA, 16
sessions restored at once, vLLM, each model's own dtype and weights (the doc says so).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvtool.inputs.shape import resolve_shape
from kvtool.inputs.size import SizeRequest, size_models
from kvtool.plan.deployment import ContextPlans, make_hardware, plan_contexts
from kvtool.plan.reload import ReloadAssumptions
from kvtool.profiles.load import load_node_profile, load_storage_profile

DOC = (Path(__file__).parents[3] / "docs" / "planning.md").read_text()
TABLE = DOC.split("<!-- crossover-table -->")[1].split("<!-- /crossover-table -->")[0]
ROWS = [
    [cell.strip() for cell in line.strip("|").split("|")] for line in TABLE.strip().splitlines()[2:]
]


def number(cell: str) -> int | None:
    return None if cell == "never" else int(cell.replace(",", ""))


def plan_on_the_docs_node(
    name: str, loads: int = 16, tp: int = 8, lookup_timeout_s: float | None = None
) -> ContextPlans:
    """One p5en, 48,000 GiB of PERSISTENT_2 over EFA, vLLM, 131,072 tokens, at ``tp`` (the
    table's layout: one instance's chips, as the doc says; the layout search would choose a
    pipeline for MLA and few-KV-head models, which holds more sessions)."""
    hardware = make_hardware(
        load_node_profile("p5en"),
        load_storage_profile("fsx"),
        load_storage_profile("s3"),
        fsx_capacity_bytes=48_000 * 2**30,
    )
    return plan_contexts(
        resolve_shape(name, tp=tp),
        contexts=[131_072],
        sessions=16,
        hardware=hardware,
        assumptions=ReloadAssumptions(concurrent_loads=loads, lookup_timeout_s=lookup_timeout_s),
    )


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_crossover_row_matches_kvtool(row: list[str]) -> None:
    """T4 never wins on LMCache's 3 s lookup timeout; the last column is an hour's."""
    name, _, tp, per_token, t2, t3, t4, t4_waited = row
    result = plan_on_the_docs_node(name, tp=int(tp))
    plan = result.plans[0]
    assert result.serving.tp == int(tp)
    assert result.sizes[0].kv_bytes_per_token_unbounded == number(per_token)
    assert [plan.crossovers[t] for t in ("T2", "T3", "T4")] == [number(t2), number(t3), number(t4)]
    waited = plan_on_the_docs_node(name, tp=int(tp), lookup_timeout_s=3600).plans[0]
    assert waited.crossovers["T4"] == number(t4_waited)


def test_the_table_covers_the_families_the_issue_names() -> None:
    families = " ".join(r[1] for r in ROWS)
    for family in ("GQA 8B", "GQA 70B", "GQA 405B", "MLA", "hybrid"):
        assert family in families


@pytest.mark.parametrize(("loads", "ratio"), [(1, "0.0838"), (64, "0.0719")])
def test_the_quoted_concurrency_ratios_match_kvtool(loads: int, ratio: str) -> None:
    plan = plan_on_the_docs_node("llama-3.1-70b", loads).plans[0]
    row = next(r for r in plan.break_even if r.ctx_tokens == 131_072)
    assert f"{row.reload_s['T3'] / row.recompute_s:.4f}" == ratio
    assert re.search(rf"{ratio} with {loads}\b", DOC)


T3_TABLE = re.findall(
    r"^ *\| `(llama[^`]*)`[^|]*\| ([\d,]+) GiB, ([^|]+?) \| ([\d,]+) tokens \| (never) \|"
    r" ([\d,]+) tokens \|$",
    DOC,
    re.MULTILINE,
)


def test_the_t3_table_is_what_the_plan_computes() -> None:
    """Section 3's table of T3 sizes and crossovers on a p5en at 50K: each row's command as
    ``kvtool plan`` runs it (its T3 column said 16 tokens where the plan says 42)."""
    assert len(T3_TABLE) == 3
    for command, gib, source, t3, t4, t4_waited in T3_TABLE:
        model, *args = command.split()
        options = dict(zip(args[::2], args[1::2], strict=True))
        given = {"ctx": options.pop("--ctx"), "sessions": options.pop("--sessions", "1"),
                 "nodes": options.pop("--nodes", None),
                 "fsx_capacity": options.pop("--fsx-capacity", None)}  # fmt: skip
        assert not options
        request = SizeRequest(model, hardware="p5en.48xlarge", **given)
        plan = size_models(request, []).sized[0].plans[0]
        assert (plan.file_system.capacity_gib, plan.t3_size.source) == (number(gib), source)
        assert [plan.crossovers[t] for t in ("T3", "T4")] == [number(t3), number(t4)]
        waited = SizeRequest(model, hardware="p5en.48xlarge", settings={"lookup_timeout": "1h"},
                             **given)  # fmt: skip
        assert size_models(waited, []).sized[0].plans[0].crossovers["T4"] == number(t4_waited)
