"""The real-engine tier's tiny models: built here with transformers (random weights, saved as
safetensors) and one BPE tokenizer trained with ``tokenizers``, so that vLLM loads real
checkpoints and ``vllm serve`` tokenizes real text. Runs in the test environment (transformers,
tokenizers, torch are there); nothing here imports vLLM.

Each model is as small as the family allows on vLLM's CPU backend: 256 hidden, 4 query heads,
2 KV heads (Qwen3's head_dim 128 is not hidden / heads), 4 to 6 layers; DeepSeek's MLA keeps
kv_lora_rank 512 + qk_rope 64 = 576, the one latent the CPU MLA kernel takes
(``v1/attention/backends/mla/cpu_mla.py:61-64``), and one more with 256 + 64 that it refuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VOCAB = 512
_LLAMA = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 4,
    "max_position_embeddings": 32768,
}
_MLA = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "first_k_dense_replace": 2,  # every layer dense: no MoE kernel on the CPU path
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 64,
    "v_head_dim": 64,
    "max_position_embeddings": 32768,
    "rope_scaling": None,
}

# name -> (transformers config class, its fields, dtype)
MODELS: dict[str, tuple[str, dict[str, Any], str]] = {
    "llama": ("LlamaConfig", _LLAMA, "bfloat16"),
    "llama-fp32": ("LlamaConfig", _LLAMA, "float32"),
    "llama-mha": ("LlamaConfig", {**_LLAMA, "num_key_value_heads": 4}, "bfloat16"),
    "llama-head48": ("LlamaConfig", {**_LLAMA, "hidden_size": 192, "head_dim": 48}, "bfloat16"),
    "qwen3": ("Qwen3Config", {**_LLAMA, "head_dim": 128}, "bfloat16"),
    "mistral-swa": ("MistralConfig", {**_LLAMA, "sliding_window": 1024}, "bfloat16"),
    "gemma2": ("Gemma2Config", {**_LLAMA, "sliding_window": 512}, "bfloat16"),
    "gemma3": (
        "Gemma3TextConfig",
        {**_LLAMA, "num_hidden_layers": 6, "sliding_window": 512},
        "bfloat16",
    ),
    "deepseek-v2": ("DeepseekV2Config", {**_MLA, "q_lora_rank": None}, "bfloat16"),
    "deepseek-v3": ("DeepseekV3Config", {**_MLA, "q_lora_rank": 128}, "bfloat16"),
    "deepseek-v2-r256": (
        "DeepseekV2Config",
        {**_MLA, "q_lora_rank": None, "kv_lora_rank": 256},
        "bfloat16",
    ),
}

_CORPUS = [
    "the cache holds keys and values for every token the model has read",
    "a shared prefix is read once and hit by every request that follows it",
    "blocks of tokens move from device memory to host memory and to files",
    "sliding windows keep only the last tokens of each layer in the pool",
]


def tokenizer(folder: Path) -> None:
    """A byte-level BPE of ``VOCAB`` tokens trained on a few sentences, saved as a fast
    tokenizer (tokenizer.json and its config) into ``folder``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(_CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>",
    )  # fmt: skip
    fast.save_pretrained(str(folder))


def build(name: str, root: Path) -> Path:
    """``MODELS[name]`` built with random weights and the tokenizer, in ``root/name`` (once:
    a folder already holding its config is reused)."""
    import torch
    import transformers

    folder = root / name
    if (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file():
        return folder
    kind, fields, dtype = MODELS[name]
    config = getattr(transformers, kind)(
        vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=3, **fields
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    saved = json.loads((folder / "config.json").read_text())
    saved["torch_dtype"] = dtype  # (transformers 5 writes "dtype"; vLLM reads either)
    (folder / "config.json").write_text(json.dumps(saved, indent=1))
    tokenizer(folder)
    return folder


def build_all(root: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Every model (or ``names``) under ``root``."""
    return {name: build(name, root) for name in (names or list(MODELS))}


if __name__ == "__main__":
    import sys

    for built in build_all(Path(sys.argv[1])).values():
        print(built)
