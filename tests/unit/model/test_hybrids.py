"""Hybrid, state-space and linear-attention families sized as vLLM 0.33.0 allocates them.

Each expected figure is derived by hand from vLLM's source (file and function named in the
test) applied to the config: the state shapes of ``model_executor/layers/mamba/mamba_utils.py``
(``MambaStateShapeCalculator``), the state dtypes of ``MambaStateDtypeCalculator``, the
per-model ``get_mamba_state_shape_from_config``, and the hybrid block size of
``platforms/interface.py:_align_hybrid_block_size``:
``block = k * cdiv(state_page, k * attention_bytes_per_token_per_layer)`` with k = 16 (128 when
the attention is MLA), and every state page padded to ``block * attention_bytes_per_token``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import ConfigError
from kvtool.model.config import spec_from_config
from kvtool.model.engines import get_engine
from kvtool.model.formats import resolve_format
from kvtool.model.kv import SizeResult, size_kv
from kvtool.model.spec import ModelSpec

MODELS = Path(__file__).parents[2] / "fixtures" / "models"
transformers = pytest.importorskip("transformers")


def _config(name: str) -> dict[str, Any]:
    return json.loads((MODELS / f"{name}.json").read_text())


def _size(spec: ModelSpec, tp: int = 1, engine: str = "vllm", ctx: int = 8192) -> SizeResult:
    fmt = resolve_format("auto", "bf16" if spec.dtype == "fp32" else spec.dtype)
    return size_kv(spec, rules=get_engine(engine), fmt=fmt, ctx_tokens=ctx, sessions=1, tp=tp)


def _per_layer_state(result: SizeResult) -> int:
    (state,) = [g for g in result.groups if g.fixed_bytes_per_session]
    return state.bytes_per_rank_per_session // state.num_layers


def _attention_per_token_per_layer(result: SizeResult, tp: int) -> int:
    attention = [g for g in result.groups if g.bytes_per_token]
    return sum(g.bytes_per_token for g in attention) // tp // sum(g.num_layers for g in attention)


@pytest.mark.parametrize(
    ("name", "tp", "per_layer"),
    [
        # models/mamba.py get_mamba_state_shape_from_config -> mamba1_state_shape(
        #   intermediate_size, state_size, conv_kernel): conv (3, 5120) + ssm (5120, 16), bf16
        #   (the float32 checkpoint runs in bf16: config/model.py _resolve_auto_dtype)
        ("mamba-2.8b-hf", 1, 3 * 5120 * 2 + 5120 * 16 * 2),
        ("mamba-2.8b-hf", 2, 3 * 2560 * 2 + 2560 * 16 * 2),
        # FalconMamba runs through the same class; its JSON intermediate_size 8192 wins over
        # expand 16 x hidden
        ("falcon-mamba-7b", 1, 3 * 8192 * 2 + 8192 * 16 * 2),
        ("falcon-mamba-7b", 2, 3 * 4096 * 2 + 4096 * 16 * 2),
    ],
)
def test_pure_mamba1_models_hold_only_a_fixed_state(name: str, tp: int, per_layer: int) -> None:
    spec = spec_from_config(_config(name), name=name)
    result = _size(spec, tp)
    assert spec.layer_kinds == ("linear",) * 64
    assert result.kv_bytes_per_token == 0
    assert _per_layer_state(result) == per_layer  # attention-free: no page padding
    assert result.kv_bytes_per_rank_per_session == 64 * per_layer
    assert result.block_size == 16


def test_mamba_checkpoint_in_float32_is_sized_in_bf16_and_says_so() -> None:
    result = _size(spec_from_config(_config("mamba-2.8b-hf"), name="m"))
    assert any("float32" in n and "bf16" in n for n in result.notes)


def test_jamba_attention_every_eighth_layer_and_mamba1_elsewhere() -> None:
    # models/jamba.py: layers_block_type, i % attn_layer_period == attn_layer_offset
    spec = spec_from_config(_config("jamba-v0.1"), name="jamba")
    assert [i for i, k in enumerate(spec.layer_kinds) if k == "full"] == [4, 12, 20, 28]
    for tp, kv_per_layer, raw_state in ((1, 4096, 311_296), (2, 2048, 155_648)):
        result = _size(spec, tp)
        # 8 KV heads x head_dim 128 (hidden / heads) x K and V x bf16, heads sharded over tp
        assert _attention_per_token_per_layer(result, tp) == kv_per_layer
        # mamba1_state_shape(mamba_expand x hidden = 8192, d_state 16, d_conv 4) / tp
        block = 16 * -(-raw_state // (16 * kv_per_layer))
        assert result.block_size == block == 80
        assert _per_layer_state(result) == block * kv_per_layer  # padded to one attention page


def test_minimax_m1_lightning_state_and_softmax_layers() -> None:
    # vLLM 0.23.0 models/minimax_text_01.py: attn_type_list 0 = lightning, 1 = softmax;
    # mamba_utils.linear_attention_state_shape (heads, head_dim, head_dim) in the model dtype
    spec = spec_from_config(_config("minimax-m1"), name="m1")
    assert [i for i, k in enumerate(spec.layer_kinds) if k == "full"] == list(range(7, 80, 8))
    result = _size(spec)
    assert _per_layer_state(result) == 64 * 128 * 128 * 2  # 2 MiB, equal to a 512-token page
    assert _attention_per_token_per_layer(result, 1) == 8 * 128 * 2 * 2
    assert result.block_size == 512
    assert any("served until 0.23.0" in n for n in result.notes)


def test_kimi_linear_kda_layers_are_one_based_and_the_rest_mla() -> None:
    # models/kimi_k3/nvidia/model.py: is_kda_layer(i) <=> i + 1 in kda_layers;
    # kda_state_shape(num_heads 32, head_dim 128, conv 4): conv (3, 3*32*128) bf16 +
    # recurrent (32, 128, 128) fp32 (kda_state_dtype, auto -> float32)
    spec = spec_from_config(_config("kimi-linear-48b-a3b-instruct"), name="kimi")
    mla = [i for i, k in enumerate(spec.layer_kinds) if k == "full"]
    assert mla == [3, 7, 11, 15, 19, 23, 26]
    raw = 3 * 12288 * 2 + 32 * 128 * 128 * 4
    assert raw == 2_170_880
    result = _size(spec, 1)
    # MLA latent 576 x bf16 per token per layer on every rank; MLA aligns to 128 tokens
    assert result.block_size == 128 * -(-raw // (128 * 1152)) == 1920
    assert _per_layer_state(result) == 1920 * 1152
    four = _size(spec, 4)
    assert four.block_size == 512
    assert _per_layer_state(four) == 512 * 1152  # raw 542,720 padded to 589,824


@pytest.mark.parametrize(
    ("tp", "block", "page"),
    [(1, 2096, 2_146_304), (2, 2096, 1_073_152)],
)
def test_nemotron_3_nano_mamba2_with_fp32_ssm(tp: int, block: int, page: int) -> None:
    # models/nemotron_h.py: inner = mamba_num_heads x mamba_head_dim = 4096 (not expand x
    # hidden); conv (3, 4096 + 2 x 8 x 128) bf16 + ssm (64, 64, 128) fp32 (the config's
    # mamba_ssm_cache_dtype, NemotronHForCausalLMConfig); 2 KV heads x 128
    spec = spec_from_config(_config("nemotron-3-nano-30b-a3b-bf16"), name="nano")
    result = _size(spec, tp)
    assert result.block_size == block
    assert _per_layer_state(result) == page


def _hf(cls: str, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = getattr(transformers, cls)(**overrides).to_dict()
    return config


def test_mamba2_default_groups_replicate_when_tp_does_not_divide_them() -> None:
    # Bamba defaults (transformers BambaConfig): inner 2 x 4096 = 8192, 1 group, d_state 256,
    # 128 heads of 64: at tp 2 the single group is replicated
    # (mamba_utils.extra_groups_for_head_shards returns tp - n_groups)
    spec = spec_from_config(_hf("BambaConfig"), name="bamba")
    one = _per_layer_state(_size(spec, 1))
    two = _per_layer_state(_size(spec, 2))
    assert one == 3 * (8192 + 2 * 1 * 256) * 2 + 128 * 64 * 256 * 2
    assert two == 3 * ((8192 + 2 * 2 * 256) // 2) * 2 + 64 * 64 * 256 * 2


def test_falcon_h1_has_attention_and_mamba2_in_every_layer() -> None:
    # models/falcon_h1.py: every decoder layer is FalconH1ParallelHybrid
    spec = spec_from_config(_hf("FalconH1Config"), name="falcon-h1")
    assert set(spec.layer_kinds) == {"parallel"}
    result = _size(spec)
    groups = {g.kind: g.num_layers for g in result.groups}
    assert groups == {"full": 32, "mamba2": 32}


def test_zamba2_hybrid_layers_own_attention_kv_and_their_own_mamba() -> None:
    # models/zamba2.py: a hybrid layer holds the shared block and its own Mamba2 mixer; "KV
    # cache is unique for every attention layer"; attention_head_dim = 2 x hidden / heads
    config = _hf("Zamba2Config")
    spec = spec_from_config(config, name="zamba2")
    hybrid = sum(1 for kind in config["layers_block_type"] if kind == "hybrid")
    result = _size(spec)
    groups = {g.kind: g.num_layers for g in result.groups}
    assert groups == {"full": hybrid, "mamba2": config["num_hidden_layers"]}
    heads, hidden = config["num_attention_heads"], config["hidden_size"]
    assert _attention_per_token_per_layer(result, 1) == heads * (2 * hidden // heads) * 2 * 2


def test_granite_4_h_reads_mamba_n_heads() -> None:
    config = _hf("GraniteMoeHybridConfig", layer_types=["mamba", "attention"] * 4,
                 num_hidden_layers=8)  # fmt: skip
    spec = spec_from_config(config, name="granite-h")
    assert spec.layer_kinds == ("linear", "full") * 4
    (state,) = [g for g in spec.groups if g.kind == "mamba2"]
    assert state.state_heads == config["mamba_n_heads"]


def test_gemma_3n_shared_layers_own_no_cache() -> None:
    # models/gemma3n.py: the last num_kv_shared_layers read layer first-2 (sliding) or first-1
    # (full) through kv_sharing_target_layer_name and get no KV cache spec
    spec = spec_from_config(_hf("Gemma3nTextConfig"), name="gemma-3n")
    assert spec.layer_kinds.count("shared") == 15
    result = _size(spec, ctx=32768)
    groups = {g.kind: g.num_layers for g in result.groups}
    assert groups == {"sliding": 16, "full": 4}
    assert result.kv_bytes_per_token_unbounded == 20 * 2 * 2 * 256 * 2


@pytest.mark.parametrize(
    ("engine", "name"), [("sglang", "jamba-v0.1"), ("hf", "kimi-linear-48b-a3b-instruct")]
)
def test_other_engines_are_refused_for_families_not_checked_for_them(
    engine: str, name: str
) -> None:
    spec = spec_from_config(_config(name), name=name)
    with pytest.raises(ConfigError, match=f"how {engine} lays it out|does not size"):
        _size(spec, engine=engine)


def test_hf_keeps_jambas_mamba_state_in_fp32_and_the_whole_conv_window() -> None:
    """Jamba-v0.1 (bf16): 28 Mamba layers of 8,192 channels, d_state 16, d_conv 4; transformers
    keeps all 4 conv steps in bf16 and the scan's final state in fp32."""
    spec = spec_from_config(_config("jamba-v0.1"), name="jamba")
    state = next(g for g in _size(spec, engine="hf").groups if g.fixed_bytes_per_session)
    assert state.num_layers == 28
    assert state.fixed_bytes_per_session == 28 * (4 * 8192 * 2 + 8192 * 16 * 4)


def test_the_formula_engine_still_sizes_them() -> None:
    spec = spec_from_config(_config("falcon-mamba-7b"), name="fm")
    assert _size(spec, engine="formula").kv_bytes_per_rank_per_session == 64 * 311_296


@pytest.mark.parametrize(
    "name",
    ["mamba-2.8b-hf", "falcon-mamba-7b", "jamba-v0.1", "kimi-linear-48b-a3b-instruct",
     "nemotron-3-nano-30b-a3b-bf16"],
)  # fmt: skip
def test_configs_transformers_knows_load_through_autoconfig_the_same(
    name: str, tmp_path: Path
) -> None:
    raw = _config(name)
    if raw.get("model_type") not in transformers.models.auto.configuration_auto.CONFIG_MAPPING:
        pytest.skip(f"transformers does not know {raw.get('model_type')}")
    (tmp_path / "config.json").write_text(json.dumps(raw))
    loaded = transformers.AutoConfig.from_pretrained(tmp_path).to_dict()
    a, b = spec_from_config(raw, name=name), spec_from_config(loaded, name=name)
    assert a.layer_kinds == b.layer_kinds
    assert _size(a).kv_bytes_per_rank_per_session == _size(b).kv_bytes_per_rank_per_session


# vLLM's admission charge, checked against vLLM 0.33.0's own spec, grouping and concurrency
# code run on CPU for these configs (v1/kv_cache_interface.py max_memory_usage_bytes,
# v1/core/kv_cache_planning.py grouping, v1/core/kv_cache_utils.py get_max_concurrency...):
# in flight = 2 x max_num_batched_tokens (async scheduling); state layers 2 pages (+1 for
# mixers with a prefill checkpoint) with prefix caching on.
@pytest.mark.parametrize(
    ("name", "tp", "ctx", "batched", "per_rank"),
    [
        # 256 attention blocks of 512 tokens + 70 lightning layers x 2 pages of 2 MiB
        ("minimax-m1", 1, 131072, 8192, 5_662_310_400),
        # 7 MLA layers and 20 KDA layers (3 groups of 7: one padding layer) per 15,482,880 B
        ("kimi-linear-48b-a3b-instruct", 1, 131072, 8192, 1_161_216_000),
        ("kimi-linear-48b-a3b-instruct", 4, 131072, 8192, 1_081_737_216),
    ],
)
def test_admission_charge_matches_vllm(
    name: str, tp: int, ctx: int, batched: int, per_rank: int
) -> None:
    spec = spec_from_config(_config(name), name=name)
    fmt = resolve_format("auto", spec.dtype)
    result = size_kv(spec, rules=get_engine("vllm"), fmt=fmt, ctx_tokens=ctx, sessions=1, tp=tp,
                     max_num_batched_tokens=batched)  # fmt: skip
    assert result.admission_bytes_per_session == per_rank * tp
    assert result.admission_bytes_per_rank_per_session == per_rank  # one GPU's budget


@pytest.mark.parametrize(
    ("batched", "per_request"),
    [(2048, 419_954_688), (8192, 822_607_872), (16384, 1_342_701_568)],
)
def test_gemma_3n_sliding_windows_are_charged_for_tokens_in_flight(
    batched: int, per_request: int
) -> None:
    spec = spec_from_config(_hf("Gemma3nTextConfig"), name="gemma-3n")
    fmt = resolve_format("auto", spec.dtype)
    result = size_kv(spec, rules=get_engine("vllm"), fmt=fmt, ctx_tokens=32768, sessions=1,
                     max_num_batched_tokens=batched)  # fmt: skip
    assert result.admission_bytes_per_session == per_request
    assert result.kv_bytes_per_session < per_request  # what a decoding session holds


def test_plain_attention_is_admitted_at_what_it_holds() -> None:
    spec = spec_from_config(_hf("LlamaConfig", num_hidden_layers=4), name="llama")
    result = _size(spec, ctx=100_000)
    assert result.admission_bytes_per_session == result.kv_bytes_per_session


def test_other_engines_have_no_admission_charge() -> None:
    spec = spec_from_config(_hf("LlamaConfig", num_hidden_layers=4), name="llama")
    assert _size(spec, engine="sglang").admission_bytes_per_session is None
