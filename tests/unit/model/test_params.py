"""Parameter counts from configs against the counts the model cards publish.

Published figures (model cards on Hugging Face, or the papers they cite) are rounded, so
each is checked to within 3% (active counts of MoE models, where publishers differ on
whether embeddings count, to within 8%).
"""

from __future__ import annotations

import pytest

from kvtool.model.params import count_params

from .test_config import bundled_spec

PUBLISHED_TOTAL_B = {
    "llama-3.1-8b": 8.03,
    "llama-3.1-70b": 70.6,
    "llama-3.1-405b": 405.9,
    "llama-3.2-1b": 1.24,
    "llama-3.2-3b": 3.21,
    "llama-4-scout": 109,
    "llama-4-maverick": 400,
    "qwen2.5-7b": 7.61,
    "qwen2.5-72b": 72.7,
    "qwen3-8b": 8.2,
    "qwen3-32b": 32.8,
    "qwen3-235b-a22b": 235,
    "qwen3-next-80b-a3b": 80,
    "deepseek-v2-lite": 15.7,
    "deepseek-v3": 671,
    "deepseek-r1": 671,
    "kimi-k2": 1000,
    "mixtral-8x7b": 46.7,
    "mixtral-8x22b": 141,
    "gemma-2-9b": 9.24,
    "gpt-oss-20b": 21,
    "gpt-oss-120b": 117,
    "phi-3-mini-4k": 3.8,
    "phi-4": 14.7,
    "glm-4.5": 355,
    "glm-4.5-air": 106,
    "falcon-7b": 7,
    "minimax-m2.5": 229,
    "nemotron-h-56b": 56,
}

PUBLISHED_ACTIVE_B = {
    "deepseek-r1": 37,
    "deepseek-v2-lite": 2.4,
    "qwen3-235b-a22b": 22,
    "mixtral-8x7b": 12.9,
    "mixtral-8x22b": 39,
    "gpt-oss-20b": 3.6,
    "gpt-oss-120b": 5.1,
    "llama-4-scout": 17,
    "llama-4-maverick": 17,
    "glm-4.5": 32,
    "glm-4.5-air": 12,
    "kimi-k2": 32,
    "minimax-m2.5": 10,
}


@pytest.mark.parametrize(("name", "billions"), PUBLISHED_TOTAL_B.items())
def test_total_matches_model_card(name: str, billions: float) -> None:
    total = count_params(bundled_spec(name)).total / 1e9
    assert total == pytest.approx(billions, rel=0.03)


@pytest.mark.parametrize(("name", "billions"), PUBLISHED_ACTIVE_B.items())
def test_active_matches_model_card(name: str, billions: float) -> None:
    active = count_params(bundled_spec(name)).active / 1e9
    assert active == pytest.approx(billions, rel=0.08)


def test_dense_models_use_all_but_the_embedding_lookup() -> None:
    params = count_params(bundled_spec("llama-3.1-8b"))
    assert params.total - params.active == 128_256 * 4096


def test_weights_are_in_the_checkpoints_dtype_unless_one_is_named() -> None:
    from kvtool.errors import InputError
    from kvtool.model.params import model_weights, weights_dtype_of

    r1, llama = bundled_spec("deepseek-r1"), bundled_spec("llama-3.1-8b")
    assert weights_dtype_of(r1) == "fp8"  # the checkpoint's quantization_config
    assert weights_dtype_of(llama) == "bf16"  # the model dtype
    assert weights_dtype_of(llama, " FP8 ") == "fp8"
    weights = model_weights(llama, "fp8")
    assert weights.nbytes == weights.params.total == count_params(llama).total
    assert model_weights(llama).nbytes == 2 * weights.nbytes
    with pytest.raises(InputError, match="unknown --weights-dtype 'fp6'"):
        weights_dtype_of(llama, "fp6")


def test_attention_params_are_the_projections_of_every_attention_layer() -> None:
    from kvtool.model.params import attention_params

    r1 = bundled_spec("deepseek-r1")
    # per MLA layer: q_a 7168x1536 + q_b 1536x(128x192) + kv_a 7168x(512+64)
    # + kv_b 512x(128x(128+128)) + o (128x128)x7168 = 187,105,280; 61 layers
    assert attention_params(r1) == 61 * 187_105_280
