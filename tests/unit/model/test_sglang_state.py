"""``--engine sglang`` against what SGLang 0.5.23's own code holds per request, row by row.

``tests/fixtures/engines/sglang-0.5.23-state.json`` is recorded by ``record_sglang_state.py``
beside it, which runs SGLang's config classes and ``mamba2_cache_params`` on CPU for each hybrid
and state-space family at tp 1, 2, 4 and 8, with ``mamba_ssm_dtype: bfloat16`` in the config, and
with ``--mamba-ssm-dtype bfloat16`` (``kvtool size --state-dtype bf16``).
For each row kvtool must hold the same per-rank state bytes and put the same number of layers in
the KV pool, or refuse where SGLang could not build the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import ConfigError, InputError
from kvtool.inputs.shape import resolve_shape
from kvtool.model.config import spec_from_config
from kvtool.model.engines import ENGINES
from kvtool.model.formats import resolve_format
from kvtool.model.kv import size_kv
from kvtool.model.spec import ModelSpec
from kvtool.profiles.resolve import ResolvedModel

ROOT = Path(__file__).parents[3]
RECORDED = json.loads((ROOT / "tests/fixtures/engines/sglang-0.5.23-state.json").read_text())
ROWS: list[dict[str, Any]] = RECORDED["rows"]


def _config(row: dict[str, Any]) -> dict[str, Any]:
    source = row["config"]
    config = RECORDED["configs"].get(source) or json.loads((ROOT / source).read_text())
    dtype = row["mamba_ssm_dtype"]
    if dtype is None:
        return dict(config)
    if isinstance(config.get("text_config"), dict):  # where the recorder put it (Qwen3.5)
        return {**config, "text_config": {**config["text_config"], "mamba_ssm_dtype": dtype}}
    return {**config, "mamba_ssm_dtype": dtype}


def _resolved(spec: ModelSpec) -> ResolvedModel:
    return ResolvedModel(spec, "file", spec.name, {})


def _id(row: dict[str, Any]) -> str:
    source = Path(row["config"].split("+")[0]).stem.removeprefix("transformers:")
    extra = "+" if "+" in row["config"] else ""
    dtype = f"-ssm-{row['mamba_ssm_dtype']}" if row["mamba_ssm_dtype"] else ""
    if row.get("flag_mamba_ssm_dtype"):
        dtype = f"-flag-{row['flag_mamba_ssm_dtype']}"
    return f"{row['model_type']}-{source}{extra}-tp{row['tp']}{dtype}"


def test_the_recording_is_sglang_0_5_23_and_covers_every_family_sglang_is_checked_for() -> None:
    assert RECORDED["sglang"] == "0.5.23"
    recorded = {row["model_type"] for row in ROWS}
    assert ENGINES["sglang"].checked_hybrids <= recorded


@pytest.mark.parametrize("row", ROWS, ids=[_id(row) for row in ROWS])
def test_kvtool_holds_what_sglang_holds(row: dict[str, Any]) -> None:
    spec = spec_from_config(_config(row), name=row["model_type"])

    def size() -> Any:
        given = spec
        if row.get("flag_mamba_ssm_dtype"):  # sglang serve --mamba-ssm-dtype
            flag = row["flag_mamba_ssm_dtype"]
            given = resolve_shape(_resolved(spec), engine="sglang", state_dtype=flag).spec
        return size_kv(given, rules=ENGINES["sglang"], fmt=resolve_format("auto", spec.dtype),
                       ctx_tokens=1, sessions=1, tp=row["tp"])  # fmt: skip

    if "error" in row:
        with pytest.raises((ConfigError, InputError)):
            size()
        return
    result = size()
    state = sum(g.bytes_per_rank_per_session for g in result.groups if g.fixed_bytes_per_session)
    kv_layers = sum(g.num_layers for g in result.groups if not g.fixed_bytes_per_session)
    assert state == row["state_bytes_per_request"]
    assert kv_layers == row["kv_pool_layers"]
