"""What the GPU changes in vLLM 0.33.0's KV cache: the kernels it picks there decide block
sizes, prefill-checkpoint pages and which KV dtypes run at all. Pure.

A ``Gpu`` is a compute capability with a name; ``--hardware`` gives it (``gpu_of`` reads the
node profile's accelerator), and without one kvtool assumes an H100/H200 (sm90) and says so.

Attention (``attention_backend``): vLLM takes the first backend in its priority list for the
GPU (``platforms/cuda.py:84``) whose checks pass, and the block size is that backend's
``get_preferred_block_size(16)`` (``v1/attention/backend.py:155``; a sparse-MLA model's indexer
backend joins it, ``platforms/interface.py:723``). What that gives, without
``--attention-backend`` or ``--block-size``:

| model | sm80 (A100) | sm90 (H100, H200) | sm100 (B200, GB200, B300) |
|---|---|---|---|
| attention, bf16 | FLASH_ATTN, 16 | FLASH_ATTN, 16 | FLASHINFER, 16 |
| attention, fp8 | FLASHINFER, 16 | FLASH_ATTN, 16 (e5m2: FLASHINFER) | FLASHINFER, 16 |
| attention, nvfp4 | FLASHINFER (FA2 path), 16 * | FLASHINFER (FA2 path), 16 * | FLASHINFER, 16 |
| sinks (gpt-oss) | TRITON_ATTN, 16 (fp8 refused < sm89) | FLASH_ATTN, 16 | FLASHINFER, 16 |
| mixed heads ** | TRITON_ATTN(_DIFFKV), 16 | FA4 / FLASH_ATTN_DIFFKV, 16 | not checked |
| mixed heads **, fp8 | refused below sm89 (Triton) | Gemma 4: 64; MiMo-V2: 16 | not checked |
| MLA, bf16 | TRITON_MLA, 16 | FLASH_ATTN_MLA, 16 | FLASHINFER_MLA, 32 |
| MLA, fp8 | refused below sm89 (Triton MLA) | FLASHMLA, 64 | FLASHINFER_MLA, 32 |
| sparse MLA (an indexer) | refused: no backend | 64 | 64 |

(*) refused at head_size 64 and with attention sinks. (**) Gemma 4's 256 and 512-dim layers,
MiMo-V2's K of 192 and V of 128 (``_mixed_heads_backend``); fp8 is e4m3 only. An nvfp4 cache
is refused for every MLA model (``config/vllm.py:3421``) but a sparse one's
``nvfp4_ds_mla``, which only sm100 runs (``flashmla_sparse.py:250``).

State layers (``prefill_checkpoint_pages``, ``prefill_checkpoint_alignment``): with prefix
caching on (vLLM's default for hybrid models, "align" mamba cache mode) a request is charged
two state pages, plus one prefill-checkpoint page for the mixers that keep one:

* Mamba2 always (``MambaMixer2``);
* Qwen's Gated DeltaNet only when its prefill runs on FlashInfer
  (``qwen_gdn_linear_attn.py:692``, backend choice ``_resolve_gdn_prefill_backend`` at
  ``:246``: sm90 always; sm100 and sm120 when ``linear_key_head_dim`` is 128, as the wheel's
  CUDA 13 runtime allows). Then the layer also aligns the hybrid block to 64 tokens
  (``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT``, ``gdn_attn.py:34``), which
  ``platforms/interface.py:1090`` folds into the attention block size;
* Kimi-K3's KDA only when its prefill runs on FlashKDA (``models/kimi_k3/nvidia/kda.py:901``;
  ``is_flashkda_supported`` at ``:363``: CUDA capability 9, 10 or 12, head_dim 128, a bf16
  model, a bf16 or fp32 recurrent state, a bounded gate). Kimi-Linear's own low-rank-gate
  layer runs on Triton and keeps none.
"""

from kvtool.errors import InputError
from kvtool.model.spec import AttentionLayers, MlaLayers, ModelSpec, StateLayers
from kvtool.record import Record


class Gpu(Record):
    """The accelerator vLLM runs on: its name and CUDA compute capability."""

    name: str
    capability: tuple[int, int]
    assumed: bool = False
    why: str = ""  # why it is assumed

    @property
    def sm(self) -> str:
        major, minor = self.capability
        return f"sm{major}{minor}"

    def describe(self) -> str:
        """``NVIDIA B200 (sm100)``, or ``an H100/H200 (sm90, assumed: no --hardware)``."""
        if self.assumed:
            return f"an {self.name} ({self.sm}, assumed: {self.why or 'no --hardware'})"
        return f"{self.name} ({self.sm})"


ASSUMED_GPU = Gpu("H100/H200", (9, 0), assumed=True)

# accelerator names (node profiles, nvidia-smi) -> compute capability; longer names first
_CAPABILITIES = (
    ("gb300", (10, 3)),
    ("b300", (10, 3)),
    ("gb200", (10, 0)),
    ("b200", (10, 0)),
    ("h200", (9, 0)),
    ("h100", (9, 0)),
    ("h20", (9, 0)),
    ("l40s", (8, 9)),
    ("l4", (8, 9)),
    ("a10g", (8, 6)),
    ("a100", (8, 0)),
)


def gpu_of(accelerator: str) -> Gpu | None:
    """The ``Gpu`` an accelerator name denotes, or None when it is not an NVIDIA GPU kvtool
    knows (Trainium runs vLLM through its Neuron plugin, not these kernels)."""
    lower = accelerator.lower()
    for tag, capability in _CAPABILITIES:
        if tag in lower:
            return Gpu(accelerator, capability)
    return None


def _gdn_on_flashinfer(group: StateLayers, gpu: Gpu) -> bool:
    major = gpu.capability[0]
    if gpu.capability == (9, 0):
        return True
    return major in (10, 12) and group.key_head_dim == 128


def _on_flashkda(group: StateLayers, gpu: Gpu) -> bool:
    return group.flashkda and gpu.capability[0] in (9, 10, 12)


def prefill_checkpoint_pages(group: StateLayers, gpu: Gpu) -> int:
    """Prefill-checkpoint pages vLLM charges a request for ``group`` with prefix caching on."""
    if group.kind == "mamba2":
        return 1
    if group.kind == "gated_deltanet":
        return int(_gdn_on_flashinfer(group, gpu))
    if group.kind == "kda":
        return int(_on_flashkda(group, gpu))
    return 0


def prefill_checkpoint_alignment(group: StateLayers, gpu: Gpu) -> int:
    """Tokens the hybrid block size must be a multiple of for ``group``'s checkpoints (1: no
    constraint). Only Gated DeltaNet on FlashInfer folds one in; KDA's 16 stays in its spec."""
    if group.kind == "gated_deltanet" and _gdn_on_flashinfer(group, gpu):
        return 64
    return 1


def state_backend_note(group: StateLayers, gpu: Gpu) -> str:
    """One line on which prefill kernel vLLM picks for ``group`` on ``gpu``, or ''."""
    if group.kind == "gated_deltanet":
        if _gdn_on_flashinfer(group, gpu):
            return (
                f"Gated DeltaNet prefill on FlashInfer on {gpu.describe()}: a prefill-checkpoint"
                " state page per request, hybrid block aligned to 64 tokens"
            )
        return f"Gated DeltaNet prefill on Triton on {gpu.describe()}: no prefill-checkpoint page"
    if group.kind == "kda" and group.flashkda:
        if _on_flashkda(group, gpu):
            return (
                f"KDA prefill on FlashKDA on {gpu.describe()}: a prefill-checkpoint state page"
                " per request"
            )
        return f"KDA prefill on Triton on {gpu.describe()}: no prefill-checkpoint page"
    return ""


class Backend(Record):
    """The attention backend vLLM picks and the block size it sets (tokens)."""

    name: str
    block_size: int
    why: str  # the vLLM file that decides it


_FLASHINFER_FP4 = "flashinfer.py:654"


def _refuse(spec: ModelSpec, fmt_name: str, gpu: Gpu, why: str, hint: str) -> InputError:
    return InputError(
        f"vLLM 0.33.0 does not keep {spec.name}'s KV cache in {fmt_name} on"
        f" {gpu.describe()}: {why}",
        hint,
    )


def attention_backend(spec: ModelSpec, fmt_name: str, gpu: Gpu) -> Backend:
    """The backend vLLM 0.33.0 picks for ``spec``'s attention layers with a ``fmt_name`` KV
    cache on ``gpu``, and the block size it sets (see the module's table); InputError for a
    combination vLLM refuses there."""
    major = gpu.capability[0]
    fp8 = fmt_name.startswith("fp8") and fmt_name != "fp8_per_token_head"
    nvfp4 = fmt_name.startswith("nvfp4")
    mla = next((g for g in spec.groups if isinstance(g, MlaLayers)), None)
    if mla is not None:
        return _mla_backend(spec, mla, fmt_name, gpu, fp8=fp8, nvfp4=nvfp4)
    attention = [g for g in spec.groups if isinstance(g, AttentionLayers)]
    heads = [g.head_dim for g in attention]
    if len({(g.head_dim, g.v_head_dim) for g in attention}) > 1 or any(
        g.head_dim != g.v_head_dim for g in attention
    ):
        return _mixed_heads_backend(spec, fmt_name, gpu)
    if fmt_name == "fp32":  # (vllm serve --dtype float32)
        return Backend(
            "TRITON_ATTN", 16,
            "flash_attn.py:289, flashinfer.py:572 take fp16 and bf16 only; triton_attn.py:321",
        )  # fmt: skip
    if major >= 10:
        return Backend("FLASHINFER", 16, "platforms/cuda.py:160: first on sm100")
    if nvfp4:
        if 64 in heads or spec.attention_sinks:
            what = "attention sinks" if spec.attention_sinks else "head_size 64"
            raise _refuse(
                spec, fmt_name, gpu,
                f"FlashInfer's FA2 NVFP4 path refuses {what} ({_FLASHINFER_FP4}) and no other"
                " backend stores NVFP4",
                "use --kv-dtype fp8, or a Blackwell GPU (--hardware p6-b200)",
            )  # fmt: skip
        return Backend("FLASHINFER (FA2 NVFP4 path)", 16, _FLASHINFER_FP4)
    if fmt_name.endswith("per_token_head") or fmt_name in ("int8", "int4"):
        return Backend(
            "TRITON_ATTN (choice not checked)", 16, "triton_attn.py:340: 16-token kernels"
        )
    if spec.attention_sinks and major == 8:
        if fp8 and gpu.capability < (8, 9):
            raise _refuse(
                spec, fmt_name, gpu,
                "with attention sinks only TRITON_ATTN serves it there, and its FP8 needs"
                " sm89+ (triton_attn.py:514)",
                "use --kv-dtype auto, or an H100/H200 or newer GPU",
            )  # fmt: skip
        return Backend("TRITON_ATTN", 16, "flash_attn.py:474: no sinks below sm90")
    if fp8 and (major == 8 or fmt_name == "fp8_e5m2"):
        return Backend("FLASHINFER", 16, "fa_utils.py:306: FlashAttention's FP8 needs FA3")
    return Backend("FLASH_ATTN", 16, "platforms/cuda.py:176")


def _mixed_heads_backend(spec: ModelSpec, fmt_name: str, gpu: Gpu) -> Backend:
    """Layers of different head sizes (Gemma 4: 256 sliding, 512 full) or K and V of different
    sizes (MiMo-V2: 192 and 128), as vLLM 0.33.0 picks their kernels on sm80 and sm90.

    Gemma 4 (``models/config.py:301-370``): with FA4 available (the wheel ships
    ``vllm_flash_attn/cute``; sm90 and sm100 only, ``flash_attn_interface.py:72-86``) FA4 for
    every layer, but with an fp8 cache on sm90 per-layer FA3 (256) and FA4 (512); without FA4,
    TRITON_ATTN. MiMo-V2 (``models/mimo_v2.py:320-341``): FLASH_ATTN_DIFFKV where FA3 or FA4
    runs (its sink-bearing layers upgrade to FA4 on sm90, ``fa_utils.py:150-158``), else
    TRITON_ATTN_DIFFKV. In bf16 all take multiples of 16 tokens. With fp8 (e4m3): FlashAttention
    on sm90 keeps 16 but for FA4's 512-dim layers, whose SM90 FP8 kernel pages 64 tokens and
    sets the model's block (``flash_attn.py:300-327, 372-374``: the model's head size is its
    largest, ``config/model_arch.py:95-133``); Triton's FP8 needs sm89+ (``triton_attn.py:514``).
    e5m2 is not FlashAttention's (``fa_utils.py:293``) nor the DIFFKV Triton backend's; what vLLM
    picks for it, and anything on Blackwell, kvtool has not checked."""
    major = gpu.capability[0]
    diffkv = any(g.head_dim != g.v_head_dim for g in spec.groups if isinstance(g, AttentionLayers))
    if major >= 10:
        raise InputError(
            f"kvtool has not checked vLLM 0.33.0's block sizes for {spec.name}'s mixed head"
            f" sizes on {gpu.describe()} (FA4's head_dim-256 kernels take 128-token pages there)",
            "size it for an H100/H200 (no --hardware, or p5en)",
        )
    triton = major < 9  # no FA3/FA4 below sm90: Triton
    kernels = ("TRITON_ATTN_DIFFKV" if diffkv else "TRITON_ATTN") if triton else (
        "FLASH_ATTN_DIFFKV (FA3/FA4)" if diffkv else "FLASH_ATTN (FA4, or FA3/FA4 per layer)"
    )  # fmt: skip
    why = "models/mimo_v2.py:320" if diffkv else "models/config.py:301"
    if fmt_name in ("bf16", "fp16", "fp32"):
        return Backend(kernels, 16, f"{why}: multiples of 16")
    if fmt_name != "fp8_e4m3":
        raise InputError(
            f"kvtool has not checked which attention backend vLLM 0.33.0 picks for {spec.name}'s"
            f" mixed head sizes with a {fmt_name} KV cache (FlashAttention and the DIFFKV Triton"
            " backend take fp8_e4m3 only: fa_utils.py:293, triton_attn_diffkv.py:72)",
            "use --kv-dtype fp8 or auto",
        )
    if triton and gpu.capability < (8, 9):
        raise _refuse(
            spec, fmt_name, gpu,
            f"its mixed head sizes run on {kernels} there, whose FP8 needs sm89+"
            " (triton_attn.py:514)",
            "use --kv-dtype auto, or an H100/H200 or newer GPU",
        )  # fmt: skip
    heads = {g.head_dim for g in spec.groups if isinstance(g, AttentionLayers)}
    if not triton and not diffkv and 512 in heads:
        return Backend(
            "FLASH_ATTN (FA3 for the smaller heads, FA4 for head_dim 512)", 64,
            "flash_attn.py:318-325: FA4's SM90 FP8 kernel pages 64 tokens",
        )  # fmt: skip
    return Backend(kernels, 16, f"{why}: multiples of 16")


def _mla_backend(
    spec: ModelSpec, mla: MlaLayers, fmt_name: str, gpu: Gpu, *, fp8: bool, nvfp4: bool
) -> Backend:
    major = gpu.capability[0]
    if spec.has_indexer:
        if major < 9:
            raise _refuse(
                spec, fmt_name, gpu,
                "every sparse-MLA backend needs sm90 or sm100 (flashmla_sparse.py:203)",
                "use an H100/H200 or newer GPU",
            )  # fmt: skip
        if nvfp4 and major != 10:
            raise _refuse(
                spec, fmt_name, gpu,
                "nvfp4_ds_mla runs on sm100 only (flashmla_sparse.py:250)",
                "use --kv-dtype fp8, or a Blackwell GPU (--hardware p6-b200)",
            )  # fmt: skip
        return Backend("a sparse-MLA backend", 64, "mla/indexer.py:286: the indexer's 64")
    if nvfp4:
        raise _refuse(
            spec, fmt_name, gpu,
            "vLLM has no NVFP4 cache for MLA (config/vllm.py:3421)",
            "use --kv-dtype fp8 or auto",
        )  # fmt: skip
    if major >= 10:
        if mla.qk_nope_head_dim in (64, 128, 192) and fmt_name != "fp8_e5m2":
            return Backend("FLASHINFER_MLA", 32, "mla/flashinfer_mla.py:204: kernels 32, 64")
        return Backend("CUTLASS_MLA (choice not checked)", 128, "mla/cutlass_mla.py:49")
    if major == 9:
        if fmt_name == "fp8_e5m2":
            return Backend("TRITON_MLA (choice not checked)", 16, "mla/flashmla.py:47: no e5m2")
        if fp8:
            return Backend("FLASHMLA", 64, "mla/flashmla.py:57: kernel 64")
        return Backend("FLASH_ATTN_MLA", 16, "mla/flashattn_mla.py:49: multiples of 16")
    if fp8 and gpu.capability < (8, 9):
        raise _refuse(
            spec, fmt_name, gpu,
            "only TRITON_MLA serves MLA there, and its FP8 needs sm89+ (mla/triton_mla.py:203)",
            "use --kv-dtype auto, or an H100/H200 or newer GPU",
        )  # fmt: skip
    return Backend("TRITON_MLA", 16, "mla/triton_mla.py:114")
