"""DeepSeek-V4's KV cache as vLLM 0.33.0 allocates it (``vllm/models/deepseek_v4/``). Pure.

Every layer keeps a sliding-window latent (``sparse_swa.py:120``: 584 B a token in
``fp8_ds_mla``, 64-token blocks, window ``sliding_window``). A compressed-sparse layer (CSA,
compress ratio 4) also keeps one compressed latent per 4 tokens, an indexer key per 4 tokens
(``attention.py:911``: ``index_head_dim`` fp8 + a 4 B scale) and two compressor states
(``compressor.py:179``: fp32, window 8, 4-token blocks); a heavily compressed layer (HCA, 128)
one latent per 128 tokens and one state (window 128, 8-token blocks). Latents and indexer
keys use 256-token blocks. Pages are rounded up to 576 B (``kv_cache_interface.py:719``).

The pages differ in size, so vLLM packs them block-outermost
(``v1/core/kv_cache_planning.py:914``, ``_get_packed_kv_cache_groups``): layers of one spec
family, block size and window form a bucket; buckets whose page sizes come in equal counts
are split into groups of the same number of pattern repeats (``_approximate_gcd``, ``:879``);
and one block of *any* group costs the widest group's page bytes (``:574``). A request is
charged, per group, its worst case in blocks (``:1253``): the latents ``cdiv(L, 256)``, a
window ``cdiv(min(W - 1 + in_flight, L), block) + 1``, with ``in_flight`` twice
``--max-num-batched-tokens`` under async scheduling. Every cache is one MQA vector, held whole
on every tensor-parallel rank.

``auto`` and fp8 become ``fp8_ds_mla`` (``attention.py:94``); vLLM refuses any other KV dtype
for the default layer class, and runs DeepSeek-V4 on sm90 and sm100 only
(``sparse_mla.py:96``). ``model/config.py`` reads the config into ``spec.Dsv4Layers``.
Checked against vLLM 0.33.0's own planning functions run on these specs
(``tests/unit/model/test_dsv4.py``): DeepSeek-V4-Flash at 131,072 tokens holds 539,205,120 B
and is admitted at 7,210,114,560 B per GPU.
"""

from __future__ import annotations

from typing import NamedTuple

from kvtool.errors import InputError
from kvtool.model.spec import Dsv4Layers

FP8_DS_MLA = 584  # bytes a token: 448 fp8 NoPE + 64 bf16 RoPE + 8 B of scales
ALIGN = 576  # page alignment of the fp8_ds_mla layout
LATENT_BLOCK = 256  # the V4 sparse-MLA and indexer backends' only block size
SWA_BLOCK = 64  # sparse_swa.py:85
STATE_BLOCK = {4: 4, 128: 8}  # compressor.py:168
KV_DTYPES = ("fp8_e4m3",)  # kvtool's names for what becomes fp8_ds_mla


def _up(value: int, step: int) -> int:
    return -(-value // step) * step


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """vLLM's ``_approximate_gcd``: the group size (at least ``lower_bound``) that pads the
    counts least, the larger on a tie."""
    best, best_pad = lower_bound, None
    for d in range(lower_bound, max(max(values), lower_bound) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


class _Bucket(NamedTuple):
    name: str
    block: int
    window: int | None  # None: full attention (the latents)
    pages: dict[int, int]  # page bytes -> layers


def _buckets(layers: Dsv4Layers) -> list[_Bucket]:
    def pages(*pairs: tuple[int, int]) -> dict[int, int]:
        merged: dict[int, int] = {}
        for page, count in pairs:
            merged[page] = merged.get(page, 0) + count
        return merged

    n4, n128 = layers.csa_layers, layers.hca_layers
    latent = LATENT_BLOCK // 4 * FP8_DS_MLA, LATENT_BLOCK // 128 * FP8_DS_MLA
    index = LATENT_BLOCK // 4 * (layers.index_head_dim + 4)
    state4 = STATE_BLOCK[4] * 2 * 2 * layers.head_dim * 4  # kv + score state, coff 2, fp32
    index_state4 = STATE_BLOCK[4] * 2 * 2 * layers.index_head_dim * 4
    state128 = STATE_BLOCK[128] * 2 * 1 * layers.head_dim * 4
    return [
        _Bucket("sliding", SWA_BLOCK, layers.window,
                pages((_up(SWA_BLOCK * FP8_DS_MLA, ALIGN), layers.num_layers))),
        _Bucket("compressed", LATENT_BLOCK, None, pages(
            (_up(latent[0], ALIGN), n4), (_up(latent[1], ALIGN), n128), (_up(index, ALIGN), n4)
        )),
        _Bucket("state_c4", STATE_BLOCK[4], 8, pages(
            (_up(state4, ALIGN), n4), (_up(index_state4, ALIGN), n4)
        )),
        _Bucket("state_c128", STATE_BLOCK[128], 128, pages((_up(state128, ALIGN), n128))),
    ]  # fmt: skip


class Dsv4Group(NamedTuple):
    """One of vLLM's KV cache groups: its bucket, layers and page bytes in a block."""

    bucket: str
    block: int
    window: int | None
    layers: int
    page_bytes: int


def packed_groups(layers: Dsv4Layers) -> list[Dsv4Group]:
    """vLLM's groups for DeepSeek-V4's caches (``_get_packed_kv_cache_groups``)."""
    buckets = _buckets(layers)
    balanced = [len(set(b.pages.values())) == 1 for b in buckets]
    floor = max(
        (max(b.pages.values()) for b, ok in zip(buckets, balanced, strict=True)
         if ok and len(b.pages) > 1),
        default=0,
    )  # fmt: skip
    repeats = approximate_gcd(
        [max(b.pages.values()) for b, ok in zip(buckets, balanced, strict=True) if ok], floor
    )
    groups = []
    for bucket, ok in zip(buckets, balanced, strict=True):
        count = _cdiv(max(bucket.pages.values()), repeats) if ok else 1
        for index in range(count):  # round-robin over the pattern repeats
            share = {page: len(range(index, n, count)) for page, n in bucket.pages.items()}
            groups.append(
                Dsv4Group(
                    bucket=bucket.name,
                    block=bucket.block,
                    window=bucket.window,
                    layers=sum(share.values()),
                    page_bytes=sum(page * n for page, n in share.items()),
                )
            )
    return groups


def _held_blocks(group: Dsv4Group, ctx: int) -> int:
    """Blocks a group holds for a request decoding at up to ``ctx`` tokens: the latents
    ``cdiv(ctx, 256)``; a window the most it keeps with a token in flight
    (``SlidingWindowManager``: blocks wholly before the last ``W - 1`` are freed)."""
    if group.window is None:
        return _cdiv(ctx, group.block)
    bs, w = group.block, group.window
    start = max(1, ctx - w - 2 * bs)
    return max(_cdiv(n + 1, bs) - max(0, (n - w) // bs) for n in range(start, ctx + 1))


def _admitted_blocks(group: Dsv4Group, max_model_len: int, in_flight: int) -> int:
    if group.window is None:
        return _cdiv(max_model_len, group.block)
    return _cdiv(min(group.window - 1 + in_flight, max_model_len), group.block) + 1


class Dsv4Size(NamedTuple):
    """Per-GPU bytes: one block, what a session holds per bucket, and the admission charge."""

    bytes_per_block: int
    held: dict[str, int]  # bucket -> bytes a session holds
    admission: int


def dsv4_size(layers: Dsv4Layers, ctx: int, in_flight: int) -> Dsv4Size:
    groups = packed_groups(layers)
    per_block = max(group.page_bytes for group in groups)
    held: dict[str, int] = {}
    for group in groups:
        held[group.bucket] = held.get(group.bucket, 0) + _held_blocks(group, ctx) * per_block
    admitted = sum(_admitted_blocks(group, ctx, in_flight) for group in groups)
    return Dsv4Size(per_block, held, admitted * per_block)


def check_dsv4(fmt_name: str, gpu_capability: tuple[int, int], gpu: str) -> None:
    """InputError for what vLLM 0.33.0 refuses DeepSeek-V4: a KV dtype other than fp8
    (``attention.py:111``), a GPU other than sm90 or sm100 (``sparse_mla.py:96``)."""
    if fmt_name not in KV_DTYPES:
        raise InputError(
            f"vLLM 0.33.0 keeps DeepSeek-V4's KV cache in fp8_ds_mla only (models/deepseek_v4/"
            f"attention.py:111): --kv-dtype {fmt_name} is refused with its default backend",
            "use --kv-dtype auto or fp8",
        )
    if gpu_capability[0] not in (9, 10):
        raise InputError(
            f"vLLM 0.33.0 runs DeepSeek-V4 on sm90 and sm100 only (models/deepseek_v4/"
            f"sparse_mla.py:96), not on {gpu}",
            "plan it on H100/H200 or Blackwell nodes",
        )
