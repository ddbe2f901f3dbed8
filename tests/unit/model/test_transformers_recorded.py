"""``--engine hf`` and ``--engine hf-legacy`` against what transformers' own caches held, row
by row, without transformers installed.

``tests/fixtures/engines/transformers-<version>-cache.json`` is recorded by
``record_transformers_cache.py`` beside it: the shrunk configs of
``tests/integration/test_transformers_cache.py``, one forward pass of 40 tokens in float32 and
bfloat16, the cached tensors weighed. 5.25.0 is the release ``.ci/setup`` installs and ``hf``
names when none is installed (the integration test weighs the installed one live too); 5.24.0
is ``hf==5.24``'s (Falcon-40B's K/V broadcast to every query head); 5.14.1 is ``hf-legacy``'s.
kvtool must hold the same bytes, or refuse the family by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import ConfigError
from kvtool.model.config import spec_from_config
from kvtool.model.engines import ENGINES, HF_RELEASES, get_engine, hf_release
from kvtool.model.formats import resolve_format
from kvtool.model.kv import size_kv

ROOT = Path(__file__).parents[3]
ENGINE_OF = {"5.25.0": "hf==5.25", "5.24.0": "hf==5.24", "5.14.1": "hf-legacy"}
RECORDED = {
    version: json.loads((ROOT / f"tests/fixtures/engines/transformers-{version}-cache.json")
                        .read_text())
    for version in ENGINE_OF
}  # fmt: skip
ROWS = [(version, row) for version, doc in RECORDED.items() for row in doc["rows"]
        if "cached_bytes" in row]  # fmt: skip
# 5.14.1 writes layer_types "deepseek_sparse_attention" into DeepSeek-V3.2's config, which
# published checkpoints do not carry; kvtool refuses the entry by name, and sizes the config
# without it as 5.14.1 held it
REFUSED = {("5.14.1", "deepseek_v32"): "unknown entry 'deepseek_sparse_attention'"}


def test_each_recording_is_its_release_and_what_it_could_not_weigh_is_refused() -> None:
    for version, doc in RECORDED.items():
        assert doc["transformers"] == version
        unweighed = {row["model_type"] for row in doc["rows"] if "error" in row}
        assert not unweighed & get_engine(ENGINE_OF[version]).checked_hybrids
    # 5.14.1's pure Mamba models return a cache_params of their own, not a DynamicCache
    unweighed = {row["model_type"] for row in RECORDED["5.14.1"]["rows"] if "error" in row}
    assert unweighed == {"mamba", "falcon_mamba", "mamba2", "zamba2"}


@pytest.mark.parametrize(
    ("version", "row"), ROWS, ids=[f"{v}-{r['model_type']}-{r['dtype']}" for v, r in ROWS]
)
def test_kvtool_holds_what_transformers_held(version: str, row: dict[str, Any]) -> None:
    rules = get_engine(ENGINE_OF[version])

    def predicted() -> int:
        spec = spec_from_config(row["config"], name=row["model_type"])
        return size_kv(spec, rules=rules, fmt=resolve_format("auto", spec.dtype),
                       ctx_tokens=row["tokens"], sessions=1).kv_bytes_per_session  # fmt: skip

    if (version, row["model_type"]) in REFUSED:
        with pytest.raises(ConfigError, match=REFUSED[version, row["model_type"]]):
            predicted()
        row = {**row, "config": {k: v for k, v in row["config"].items() if k != "layer_types"}}
    assert predicted() == row["cached_bytes"]  # without it, as a checkpoint's config is


def test_every_release_kvtool_names_is_recorded_and_the_installed_one_picks_its_rules() -> None:
    assert {weighed for _first, weighed, _rules in HF_RELEASES} == set(RECORDED)
    for _first, weighed, rules in HF_RELEASES:
        installed = hf_release(weighed)
        assert installed._replace(release_note="") == rules
        note = f"sized as transformers {weighed} (installed here) holds it"
        assert installed.release_note == note
    assert hf_release("5.20.1").kv_heads_cached == "hf_broadcast"  # 5.15 to 5.24: broadcast
    assert hf_release("5.25.0.dev0").kv_heads_cached == "config"
    assert hf_release("4.57.6").mla_layout == "decompressed"
    assert "the oldest release kvtool was checked against" in hf_release("4.57.6").release_note
    newer = hf_release("6.1.0")
    assert newer.source == ENGINES["hf"].source
    assert "newer than 5.25.0" in newer.release_note
    absent = hf_release(None)
    assert absent.source == ENGINES["hf"].source
    assert "not installed here" in absent.release_note


def test_falcon_40b_differs_between_the_releases_as_their_caches_did() -> None:
    """The one family 5.24.0 and 5.25.0 cache differently (their recordings say so), and what
    ``kvtool size`` says for each."""
    rows = {version: {(r["model_type"], r["dtype"]): r.get("cached_bytes") for r in doc["rows"]}
            for version, doc in RECORDED.items() if version != "5.14.1"}  # fmt: skip
    differ = {key for key in rows["5.25.0"] if rows["5.25.0"][key] != rows["5.24.0"][key]}
    assert differ == {("falcon", "float32"), ("falcon", "bfloat16")}
    assert rows["5.24.0"]["falcon", "float32"] == 4 * rows["5.25.0"]["falcon", "float32"]
