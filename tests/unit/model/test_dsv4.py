"""DeepSeek-V4 (model/dsv4.py) against vLLM 0.33.0's own planning code.

The reference figures were produced by running vLLM 0.33.0's ``get_kv_cache_groups``,
``_pool_bytes_per_block_from_builder`` and ``_max_memory_usage_bytes_from_groups``
(``v1/core/kv_cache_planning.py``) on CPU, on the specs each DeepSeek-V4 layer builds
(``models/deepseek_v4/attention.py:860,911``, ``compressor.py:179``, ``sparse_swa.py:120``)
for the released configs, at --max-num-batched-tokens 8192 with async scheduling, tp 1 and 8
(identical per GPU: every cache is replicated). The held figure is the blocks a request keeps
while decoding at L tokens (``SlidingWindowManager``: the windows keep 3, 3 and 17 blocks).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtool.errors import ConfigError, InputError
from kvtool.model.backends import ASSUMED_GPU, Gpu
from kvtool.model.config import spec_from_config
from kvtool.model.dsv4 import approximate_gcd, packed_groups
from kvtool.model.engines import get_engine
from kvtool.model.formats import resolve_format
from kvtool.model.kv import SizeResult, size_kv
from kvtool.model.params import count_params
from kvtool.model.spec import Dsv4Layers, ModelSpec

FIXTURES = Path(__file__).parents[2] / "fixtures" / "models"

# (model, L, bytes per block, admission per GPU, held per GPU), fp8_ds_mla
VLLM = [
    ("flash", 4096, 1002240, 1687772160, 42094080),
    ("flash", 8192, 1002240, 3371535360, 58129920),
    ("flash", 16384, 1002240, 6739061760, 90201600),
    ("flash", 32768, 1002240, 6825254400, 154344960),
    ("flash", 65536, 1002240, 6953541120, 282631680),
    ("flash", 131072, 1002240, 7210114560, 539205120),
    ("flash", 262144, 1002240, 7723261440, 1052352000),
    ("flash", 524288, 1002240, 8749555200, 2078645760),
    ("flash", 1048576, 1002240, 10802142720, 4131233280),
    ("pro", 4096, 1435968, 2418170112, 60310656),
    ("pro", 8192, 1435968, 4830596352, 83286144),
    ("pro", 16384, 1435968, 9655448832, 129237120),
    ("pro", 32768, 1435968, 9778942080, 221139072),
    ("pro", 65536, 1435968, 9962745984, 404942976),
    ("pro", 131072, 1435968, 10330353792, 772550784),
    ("pro", 262144, 1435968, 11065569408, 1507766400),
    ("pro", 524288, 1435968, 12536000640, 2978197632),
    ("pro", 1048576, 1435968, 15476863104, 5919060096),
]


def spec(which: str) -> ModelSpec:
    raw = json.loads((FIXTURES / f"deepseek-v4-{which}.json").read_text())
    return spec_from_config(raw, name=f"deepseek-v4-{which}")


def vllm(
    model: ModelSpec, ctx: int, *, tp: int = 1, kv: str = "auto", gpu: Gpu = ASSUMED_GPU
) -> SizeResult:
    fmt = resolve_format(kv, model.kv_dtype_auto or model.dtype)
    return size_kv(model, rules=get_engine("vllm"), fmt=fmt, ctx_tokens=ctx, sessions=1, tp=tp,
                   max_num_batched_tokens=8192, gpu=gpu)  # fmt: skip


def test_the_released_configs_layer_counts() -> None:
    """Flash: layers 0-1 slide only, then CSA and HCA alternate; Pro: two HCA first."""
    (flash,) = spec("flash").groups
    (pro,) = spec("pro").groups
    assert isinstance(flash, Dsv4Layers)
    assert isinstance(pro, Dsv4Layers)
    assert (flash.num_layers, flash.csa_layers, flash.hca_layers) == (43, 21, 20)
    assert (pro.num_layers, pro.csa_layers, pro.hca_layers) == (61, 30, 31)


def test_vllm_packs_five_groups_with_the_widest_as_the_block_cost() -> None:
    (flash,) = spec("flash").groups
    assert isinstance(flash, Dsv4Layers)
    groups = packed_groups(flash)
    assert [(g.bucket, g.layers) for g in groups] == [
        ("sliding", 22), ("sliding", 21), ("compressed", 62), ("state_c4", 42),
        ("state_c128", 20),
    ]  # fmt: skip
    assert max(g.page_bytes for g in groups) == 1_002_240
    assert approximate_gcd([43, 21, 20], 21) == 22  # Flash's repeats per group
    assert approximate_gcd([61, 30, 31], 30) == 31  # Pro's


@pytest.mark.parametrize(("which", "ctx", "block", "admission", "held"), VLLM)
@pytest.mark.parametrize("tp", [1, 8])
def test_held_and_admitted_bytes_match_vllm(
    which: str, ctx: int, block: int, admission: int, held: int, tp: int
) -> None:
    result = vllm(spec(which), ctx, tp=tp)
    assert result.admission_bytes_per_rank_per_session == admission
    assert result.kv_bytes_per_rank_per_session == held
    assert result.kv_bytes_per_session == tp * held  # replicated on every rank
    assert result.kv_dtype == "fp8_ds_mla"
    assert result.block_size == 256
    assert any(f"{block:,} B" in note for note in result.notes)


def test_fp8_is_the_same_layout_and_other_dtypes_or_gpus_are_refused() -> None:
    flash = spec("flash")
    assert vllm(flash, 8192, kv="fp8").kv_bytes_per_session == 58129920
    for kv in ("bf16", "nvfp4"):
        with pytest.raises(InputError, match="fp8_ds_mla only"):
            vllm(flash, 8192, kv=kv)
    with pytest.raises(InputError, match="sm90 and sm100 only"):
        vllm(flash, 8192, gpu=Gpu("NVIDIA A100", (8, 0)))
    assert vllm(flash, 8192, gpu=Gpu("NVIDIA B200", (10, 0))).kv_bytes_per_session == 58129920


def test_what_kvtool_does_not_model_for_deepseek_v4_is_refused_by_name() -> None:
    flash = spec("flash")
    fmt = resolve_format("fp8", flash.dtype)
    with pytest.raises(InputError, match=r"only as vLLM 0\.33\.0 allocates them"):
        size_kv(flash, rules=get_engine("sglang"), fmt=fmt, ctx_tokens=8192, sessions=1)
    with pytest.raises(InputError, match="per session only"):  # chunk bytes: bench, replay
        size_kv(flash, rules=get_engine("vllm"), fmt=fmt, ctx_tokens=256, sessions=1,
                block_size=1)  # fmt: skip
    with pytest.raises(ConfigError, match="does not count DeepSeek-V4's parameters"):
        count_params(flash)


def test_a_layout_vllm_packs_another_way_is_refused() -> None:
    raw = json.loads((FIXTURES / "deepseek-v4-flash.json").read_text())
    raw["compress_ratios"] = [4] * 44
    with pytest.raises(ConfigError, match="both compressed"):
        spec_from_config(raw, name="x")
