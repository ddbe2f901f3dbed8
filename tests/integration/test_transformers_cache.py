"""``--engine hf`` against what transformers' DynamicCache really allocates.

Each case builds a real transformers model of the family (its own modeling code, random
weights, shrunk to a few layers and 64 hidden units so it runs on CPU in well under a second),
runs one forward pass over 40 tokens with ``use_cache=True``, and adds up the bytes of every
cached tensor: K and V per layer, and the conv and recurrent states of linear-attention layers.
kvtool's prediction for the same config under ``--engine hf`` must match to the byte. This
is where the W - 1 sliding-window rule, the cached MLA latent, the DSA indexer keys in the model
dtype, Falcon's K/V broadcast and the Gated DeltaNet state shapes are checked against the engine
itself.

Runs on CPU tensors (no GPU here); needs torch and transformers (``.ci/run`` installs both).
kvtool is asked as a user would ask it, ``--engine hf`` through the front door, which picks the
rules of the transformers release installed: ``.ci/setup`` installs the newest the test extra
allows, and ``.ci/newest-transformers`` runs this file against the newest release published.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvtool.inputs.shape import engine_rules
from kvtool.model.config import spec_from_config
from kvtool.model.formats import resolve_format
from kvtool.model.kv import size_kv

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOKENS = 40
SMALL = {"vocab_size": 128, "hidden_size": 64, "dtype": "float32"}
MLA: dict[str, Any] = {
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "kv_lora_rank": 16,
    "q_lora_rank": None,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
}
CASES: dict[str, dict[str, Any]] = {
    "llama": {
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    "gemma2": {
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": 8,
    },
    "gemma3_text": {
        "intermediate_size": 128,
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": 8,
    },
    "gpt_oss": {
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": 8,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "llama4_text": {
        "intermediate_size": 64,
        "intermediate_size_mlp": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "attention_chunk_size": 8,
        "num_local_experts": 2,
    },
    "falcon": {
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_kv_heads": 2,
        "new_decoder_architecture": True,
    },
    "deepseek_v3": MLA,
    "deepseek_v32": {
        **MLA,
        "q_lora_rank": 32,
        "index_head_dim": 16,
        "index_n_heads": 4,
        "index_topk": 8,
    },
    "qwen3_next": {
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
    },
    # the Mamba families: transformers' PyTorch paths (no mamba_ssm kernels here) return fp32
    # recurrent states, which only the bfloat16 run tells apart from the model dtype
    "mamba": {"num_hidden_layers": 2, "state_size": 8, "expand": 2, "conv_kernel": 4,
              "intermediate_size": 128},
    "falcon_mamba": {"num_hidden_layers": 2, "state_size": 8, "expand": 2, "conv_kernel": 4,
                     "intermediate_size": 128},
    "mamba2": {"num_hidden_layers": 2, "num_heads": 8, "head_dim": 16, "n_groups": 2,
               "state_size": 8, "expand": 2, "conv_kernel": 4},
    "falcon_h1": {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 16, "intermediate_size": 128, "mamba_d_ssm": 128,
                  "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_n_groups": 2,
                  "mamba_d_state": 8, "mamba_d_conv": 4},
    "granitemoehybrid": {"num_hidden_layers": 4, "num_attention_heads": 4,
                         "num_key_value_heads": 2, "intermediate_size": 128, "mamba_n_heads": 8,
                         "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": 8,
                         "mamba_d_conv": 4, "mamba_expand": 2,
                         "layer_types": ["mamba", "attention", "mamba", "attention"],
                         "num_local_experts": 2, "num_experts_per_tok": 1,
                         "shared_intermediate_size": 64},
    "bamba": {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "mamba_n_heads": 8, "mamba_d_head": 16,
              "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_expand": 2,
              "attn_layer_indices": [1, 3]},
    "jamba": {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "mamba_d_state": 8, "mamba_d_conv": 4,
              "mamba_expand": 2, "attn_layer_period": 2, "attn_layer_offset": 1,
              "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 2,
              "num_experts_per_tok": 1},
    "zamba2": {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
               "intermediate_size": 128, "n_mamba_heads": 8, "mamba_headdim": 16,
               "mamba_ngroups": 2, "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_expand": 2,
               "layer_types": ["mamba", "hybrid", "mamba", "hybrid"],
               "hybrid_layer_ids": [1, 3]},
    # Nemotron-H and Qwen3.5: sized by hf before the Mamba fp32 rule; bf16 checks it for them
    # (an MoE block, "E", not an MLP one, "-": 5.14.1 cannot build the latter)
    "nemotron_h": {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "intermediate_size": 128, "mamba_num_heads": 8,
                   "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 8, "conv_kernel": 4,
                   "hybrid_override_pattern": "M*ME", "expand": 2},
    "qwen3_5_text": {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "head_dim": 16, "intermediate_size": 128, "linear_num_key_heads": 2,
                     "linear_num_value_heads": 4, "linear_key_head_dim": 8,
                     "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4},
    # Gemma-3n: the last num_kv_shared_layers read an earlier layer's cache and hold none
    "gemma3n_text": {"num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "head_dim": 16, "intermediate_size": 128, "sliding_window": 8,
                     "num_kv_shared_layers": 2, "laurel_rank": 8, "altup_num_inputs": 4,
                     "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 128,
                     "activation_sparsity_pattern": [0.0] * 6,
                     "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                                     "sliding_attention", "sliding_attention", "full_attention"]},
}  # fmt: skip
CACHED = ("keys", "values", "indexer_keys", "conv_states", "recurrent_states")


def cached_bytes(cache: Any) -> int:
    """Bytes of the cached tensors; bookkeeping (window-length scalars, the DSA indexer's int64
    position ids) is left out."""
    total = 0
    for layer in cache.layers:
        for name in CACHED:
            value = getattr(layer, name, None)
            tensors = value.values() if isinstance(value, dict) else [value]
            total += sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))
    return total


@pytest.mark.hf
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("model_type", CASES)
def test_hf_convention_matches_dynamic_cache(model_type: str, dtype: str) -> None:
    """In float32 and in bfloat16: a state transformers keeps in fp32 whatever the model's
    dtype (Qwen3-Next's Gated DeltaNet recurrent state) only shows in the second."""
    torch.manual_seed(0)
    config = transformers.CONFIG_MAPPING[model_type](**{**SMALL, "dtype": dtype},
                                                     **CASES[model_type])  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model = model.eval()
    with torch.no_grad():
        out = model(torch.randint(0, 128, (1, TOKENS)), use_cache=True)
    measured = cached_bytes(out.past_key_values)

    spec = spec_from_config(config.to_dict(), name=model_type)
    assert spec.dtype == {"float32": "fp32", "bfloat16": "bf16"}[dtype]
    predicted = size_kv(
        spec,
        rules=engine_rules("hf"),
        fmt=resolve_format("auto", spec.dtype),
        ctx_tokens=TOKENS,
        sessions=1,
    ).kv_bytes_per_session
    assert predicted == measured
