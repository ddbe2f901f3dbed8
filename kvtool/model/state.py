"""The recurrent-state layers of hybrid and state-space models (Mamba 1 and 2, Gated DeltaNet,
linear attention, MiniMax's lightning attention): each request's fixed-size state, as vLLM
lays it out. Pure. ``config.spec_from_config`` adds these groups beside the attention ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvtool.errors import ConfigError
from kvtool.model.fields import (
    MAMBA1_TYPES,
    MINIMAX_LINEAR_TYPES,
    STATE_KINDS,
    ConfigFields,
    normalize_dtype,
)
from kvtool.model.spec import LayerGroup, StateLayers


def state_groups(
    fields: ConfigFields, layer_types: list[str], hidden_size: int
) -> list[LayerGroup]:
    count = sum(1 for kind in layer_types if kind in STATE_KINDS)
    if not count:
        return []
    groups = _state_groups(fields, count, hidden_size)
    key = next((k for k in ("mamba_ssm_dtype", "mamba_ssm_cache_dtype") if fields.get(k)), "")
    return [group._replace(state_dtype_key=key) if key else group for group in groups]


def _state_groups(fields: ConfigFields, count: int, hidden_size: int) -> list[StateLayers]:
    state_dtype = normalize_dtype(fields.get("mamba_ssm_dtype", "mamba_ssm_cache_dtype"))
    model_type = fields.model_type
    if model_type in MAMBA2_FIELDS:
        return [_mamba2_group(fields, count, hidden_size, state_dtype)]
    if model_type in MAMBA1_TYPES or model_type == "jamba":
        # vllm mamba_utils.mamba1_state_shape: conv (d_conv - 1, I), ssm (I, d_state), with
        # I = intermediate_size (Mamba, FalconMamba: the JSON's, over expand x hidden) or
        # mamba_expand x hidden (Jamba, whose intermediate_size is the MLP's)
        if model_type == "jamba":
            inner = fields.whole("mamba_expand", default=2) * hidden_size
            d_state = fields.whole("mamba_d_state", default=16)
            d_conv = fields.whole("mamba_d_conv", default=4)
        else:
            inner = fields.whole("intermediate_size", default=0) or int(
                fields.number("expand", default=2) * hidden_size
            )
            d_state = fields.whole("state_size", default=16)
            d_conv = fields.whole("conv_kernel", default=4)
        return [
            StateLayers(
                kind="mamba1",
                num_layers=count,
                conv_channels=inner,
                conv_kernel=d_conv,
                state_heads=inner,
                state_head_elems=d_state,
                state_dtype=state_dtype,
                inner_dim=inner,
            )
        ]
    if model_type in MINIMAX_LINEAR_TYPES:
        # lightning attention: one (heads, head_dim, head_dim) state in the KV cache dtype,
        # no conv (vllm mamba_utils.linear_attention_state_shape / _state_dtype)
        heads = fields.require_int("num_attention_heads")
        head_dim = fields.whole("head_dim", default=0) or hidden_size // heads
        return [
            StateLayers(
                kind="lightning",
                num_layers=count,
                conv_channels=0,
                conv_kernel=1,
                state_heads=heads,
                state_head_elems=head_dim * head_dim,
                inner_dim=heads * head_dim,
            )
        ]
    if model_type == "kimi_linear":
        # KDA (vllm mamba_utils.kda_state_shape): conv over q, k, v, recurrent (H, d, d) kept in
        # float32 when mamba_ssm_cache_dtype is auto (kda_state_dtype)
        linear = fields.get("linear_attn_config")
        assert isinstance(linear, Mapping)  # checked by _layer_types
        heads, head_dim = int(linear["num_heads"]), int(linear["head_dim"])
        recurrent = state_dtype or "fp32"
        # Kimi-K3's layer (full-rank gate, models/kimi_k3/nvidia/model.py:715) prefills on
        # FlashKDA when kda.py:363 allows: head_dim 128, bf16 model, bf16/fp32 state, a
        # bounded gate; the GPU is checked when sizing (model/backends.py)
        model_dtype = normalize_dtype(fields.get("torch_dtype", "dtype")) or "bf16"
        flashkda = (
            bool(linear.get("use_full_rank_gate"))
            and linear.get("gate_lower_bound") is not None
            and head_dim == 128
            and model_dtype in ("bf16", "fp32")  # fp32 checkpoints run in bf16 (--dtype auto)
            and recurrent in ("bf16", "fp32")
        )
        return [
            StateLayers(
                kind="kda",
                num_layers=count,
                conv_channels=3 * heads * head_dim,
                conv_kernel=int(linear.get("short_conv_kernel_size", 4)),
                state_heads=heads,
                state_head_elems=head_dim * head_dim,
                state_dtype=recurrent,
                inner_dim=heads * head_dim,
                flashkda=flashkda,
            )
        ]
    if fields.get("linear_num_value_heads") is not None:  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
        key_heads = fields.require_int("linear_num_key_heads")
        value_heads = fields.require_int("linear_num_value_heads")
        key_dim = fields.require_int("linear_key_head_dim")
        value_dim = fields.require_int("linear_value_head_dim")
        return [
            StateLayers(
                kind="gated_deltanet",
                num_layers=count,
                conv_channels=2 * key_heads * key_dim + value_heads * value_dim,
                conv_kernel=fields.require_int("linear_conv_kernel_dim"),
                state_heads=value_heads,
                state_head_elems=key_dim * value_dim,
                state_dtype=state_dtype,
                inner_dim=value_heads * value_dim,
                key_head_dim=key_dim,
            )
        ]
    raise ConfigError(
        f"{fields.source}: {model_type} has state layers kvtool cannot size",
        "see docs/sizing.md for the families kvtool sizes",
    )


# Mamba2 families: (inner width, heads, head_dim, groups, d_state, d_conv) -> the config fields,
# as each vLLM model's get_mamba_state_shape_from_config reads them. "expand" means
# expand x hidden_size; "inner/heads" means the inner width over the heads.
MAMBA2_FIELDS: dict[str, tuple[str, str, str, str, str, str]] = {
    "nemotron_h": (
        "heads*head_dim",
        "mamba_num_heads",
        "mamba_head_dim",
        "n_groups",
        "ssm_state_size",
        "conv_kernel",
    ),
    "mamba2": ("expand", "num_heads", "head_dim", "n_groups", "state_size", "conv_kernel"),
    "bamba": (
        "mamba_expand",
        "mamba_n_heads",
        "mamba_d_head",
        "mamba_n_groups",
        "mamba_d_state",
        "mamba_d_conv",
    ),
    "granitemoehybrid": (
        "mamba_expand",
        "mamba_n_heads",
        "mamba_d_head",
        "mamba_n_groups",
        "mamba_d_state",
        "mamba_d_conv",
    ),
    "falcon_h1": (
        "mamba_d_ssm",
        "mamba_n_heads",
        "mamba_d_head",
        "mamba_n_groups",
        "mamba_d_state",
        "mamba_d_conv",
    ),
    "zamba2": (
        "mamba_expand",
        "n_mamba_heads",
        "mamba_headdim",
        "mamba_ngroups",
        "mamba_d_state",
        "mamba_d_conv",
    ),
    # vLLM 0.26.0 plamo2: no groups (B and C are not in the conv state)
    "plamo2": (
        "heads*head_dim",
        "mamba_num_heads",
        "hidden_size_per_head",
        "",
        "mamba_d_state",
        "mamba_d_conv",
    ),
}
# transformers' defaults for those fields, where published configs may leave them out
MAMBA2_DEFAULTS: dict[str, dict[str, Any]] = {
    "mamba2": {"num_heads": 128, "head_dim": 64, "n_groups": 8, "state_size": 128,
               "conv_kernel": 4, "expand": 2},
    "bamba": {"mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_state": 256,
              "mamba_d_conv": 4, "mamba_expand": 2},
    "granitemoehybrid": {"mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_state": 256,
                         "mamba_d_conv": 4, "mamba_expand": 2},
    "falcon_h1": {"mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_n_groups": 1,
                  "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2},
    "zamba2": {"n_mamba_heads": 8, "mamba_ngroups": 1, "mamba_d_state": 64, "mamba_d_conv": 4,
               "mamba_expand": 2},
}  # fmt: skip


def _mamba2_group(
    fields: ConfigFields, count: int, hidden_size: int, state_dtype: str | None
) -> StateLayers:
    """vllm mamba_utils.mamba2_state_shape: conv (d_conv - 1, inner + 2 x groups x d_state),
    ssm (heads, head_dim, d_state); groups are extended when tp does not divide them."""
    inner_rule, heads_key, head_dim_key, groups_key, state_key, conv_key = MAMBA2_FIELDS[
        fields.model_type
    ]
    defaults = MAMBA2_DEFAULTS.get(fields.model_type, {})

    def value(key: str) -> int:
        found = fields.get(key)
        if found is None:
            found = defaults.get(key)
        if found is None:
            raise ConfigError(f"{fields.source}: {fields.model_type} needs {key}")
        return int(found)

    heads = value(heads_key)
    if inner_rule == "heads*head_dim":
        inner = heads * value(head_dim_key)
    elif inner_rule == "mamba_d_ssm":
        present = "mamba_d_ssm" in fields.config
        raw = fields.get("mamba_d_ssm")
        inner = (
            int(raw)
            if raw is not None
            else (fields.whole("mamba_expand", default=2) * hidden_size if present else 1024)
        )
    else:
        inner = fields.whole(inner_rule, default=defaults.get(inner_rule, 2)) * hidden_size
    head_dim = fields.get(head_dim_key)
    if head_dim in (None, "auto"):
        head_dim = inner // heads
    groups = value(groups_key) if groups_key else 0
    d_state = value(state_key)
    return StateLayers(
        kind="mamba2",
        num_layers=count,
        conv_channels=inner + 2 * groups * d_state,
        conv_kernel=value(conv_key),
        state_heads=heads,
        state_head_elems=int(head_dim) * d_state,
        state_dtype=state_dtype,
        inner_dim=inner,
        n_groups=groups,
        group_state=d_state,
        inner_given=fields.model_type != "mamba2" or fields.get("intermediate_size") is not None,
    )
