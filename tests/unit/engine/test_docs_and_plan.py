"""docs/engine.md's Python example runs as written, and the plan's reload-vs-recompute
crossovers drive the engine's choice."""

from __future__ import annotations

import re
from pathlib import Path

from kvtool.engine.keys import chain_keys, model_fingerprint
from kvtool.engine.manager import Manager
from kvtool.engine.records import EngineConfig
from kvtool.inputs.shape import resolve_shape
from kvtool.plan.deployment import make_hardware, plan_contexts
from kvtool.plan.reload import ReloadAssumptions
from kvtool.profiles.load import load_node_profile, load_storage_profile
from kvtool.profiles.resolve import resolve_model

DOC = Path(__file__).parents[3] / "docs" / "engine.md"


def test_the_python_example_runs(tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert code is not None
    namespace = {"token_ids": list(range(600)), "kv_bytes_of": lambda key: b"k" * (10 * 2**20)}
    exec(code.group(1).replace("/fsx/kvtool", str(tmp_path)), namespace)
    assert len(list(tmp_path.glob("chunks/*/*/*.kv"))) == 2  # eager: two full chunks on T3


def test_the_plans_crossovers_decide_reload_or_recompute() -> None:
    model = resolve_model("llama-3.1-8b")
    plans = plan_contexts(
        resolve_shape(model),
        contexts=[8192],
        sessions=100,
        hardware=make_hardware(
            load_node_profile("p5en"),
            load_storage_profile("fsx-lustre-persistent2"),
            load_storage_profile("s3-standard"),
        ),
        assumptions=ReloadAssumptions(),
    )
    crossovers = plans.plans[0].crossovers
    # a short prefix is cheaper to recompute than to fetch from S3, and past 7,680 tokens
    # LMCache gives the S3 lookup up (lookup_timeout_ms): T4 never wins, so the engine recomputes
    assert crossovers["T4"] is None
    clock = [0.0]
    m = Manager(
        EngineConfig(
            capacity_bytes={"T1": None, "T2": 0, "T3": 0, "T4": None},
            reload_from_tokens=dict(crossovers),
        ),
        lambda: clock[0],
    )
    keys = chain_keys(list(range(4096)), 256, model_fingerprint("llama-3.1-8b", "bf16", "tp1"))
    for key in keys:
        m.insert(key, 2**20, 256)
    m.drop_local()
    assert m.lookup(keys).hits == []  # lazy: nothing below T1
    for key in keys:
        m.adopt(key, 2**20, 256, "T4")
    found = m.lookup(keys)
    assert found.recompute
    assert m.counters["recomputed_tokens"] == 4096
