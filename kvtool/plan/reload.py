"""Reload a session's KV from a tier, or recompute it: which is faster, and from what context on.

Pure. The model, with every assumption a parameter (docs/planning.md explains each):

* **Reload** from a tier takes ``latency + bytes / per-session bandwidth``. A node's link to
  the tier is shared by ``concurrent_loads`` sessions coming back at once:
  T2 = host DRAM over the node's host-to-accelerator links (min of DRAM and links);
  T3 = FSx for Lustre, min(the per-client ceiling of the chosen path (ENA 100 / EFA 700 /
  EFA+GDS 1,200 Gbps), the node's NIC, the node's share of the file system's throughput);
  T4 = S3, min(the node's ENA, S3's 100 Gb/s single-instance figure).
* **Recompute** is a prefill: ``2 x active parameters x tokens`` plus attention, which grows
  with context squared (``heads x (qk_dim + v_dim) x tokens^2`` per full layer; windowed layers
  are bounded by their window; DeepSeek sparse attention by its top-k plus the indexer's own
  quadratic term), run at ``mfu`` of the node's peak. Decode is bound by memory bandwidth, so a
  prefill gets the node's compute; the reload, by contrast, shares the link with the other
  restores in flight.

With both linear in tokens at short contexts, reload wins wherever its per-token cost is below
recompute's; the quadratic attention term makes recompute lose at long contexts whatever the
link. ``crossover_tokens`` finds where reload starts to win.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvtool.model.spec import AttentionLayers, IndexerLayers, MlaLayers, ModelSpec
from kvtool.profiles.schema import NodeProfile, StorageProfile

T2_LATENCY_S = 5e-6  # the brief: single-digit microseconds for host DRAM
S3_INSTANCE_CEILING_GBPS = 100.0  # AWS S3 performance guidelines: up to 100 Gb/s per instance
DEFAULT_MFU = 0.4
DEFAULT_CONCURRENT_LOADS = 16
DEFAULT_CHUNK_TOKENS = 256  # LMCache's default chunk_size: one file / object per chunk


@dataclass(frozen=True)
class TierPath:
    """How fast one node reads a tier back: first-byte latency and bytes per second."""

    tier: str
    description: str
    latency_s: float
    node_bytes_per_s: float


@dataclass(frozen=True)
class ReloadAssumptions:
    """Everything the reload-vs-recompute model assumes, shown to the user as it is."""

    mfu: float = DEFAULT_MFU
    concurrent_loads: int = DEFAULT_CONCURRENT_LOADS
    t3_path: str = "efa"  # "ena", "efa" or "efa_gds"
    use_fp8_compute: bool = False


def _gbps(gigabits: float) -> float:
    return gigabits * 1e9 / 8


def tier_paths(
    node: NodeProfile,
    t3: StorageProfile,
    t4: StorageProfile,
    *,
    t3_path: str,
    fsx_bytes_per_s_per_node: float | None,
) -> list[TierPath]:
    """The read paths from T2, T3 and T4 into one node's accelerators."""
    paths: list[TierPath] = []
    if node.host_memory_gib and node.host_to_chip_gbytes_per_s:
        links = node.chips * node.host_to_chip_gbytes_per_s * 1e9
        dram = node.host_memory_gbytes_per_s * 1e9 or links
        paths.append(
            TierPath(
                "T2",
                f"host DRAM -> {node.chips} accelerators, min(links {links / 1e9:,.0f},"
                f" DRAM {dram / 1e9:,.0f}) GB/s",
                T2_LATENCY_S,
                min(links, dram),
            )
        )
    ceilings = {
        "ena": min(t3.client_ena_gbps, node.ena_gbps),
        "efa": min(t3.client_efa_gbps, node.efa_gbps),
        "efa_gds": min(t3.client_efa_gds_gbps, node.efa_gbps) if node.gds else 0.0,
    }
    # Fall back to the best path the node and the file system both offer (no GDS on Trainium,
    # no EFA on PERSISTENT_1 or SCRATCH file systems).
    path = next(p for p in (t3_path, "efa", "ena") if ceilings[p] > 0 or p == "ena")
    ceiling_gbps = ceilings[path]
    t3_bw = _gbps(ceiling_gbps)
    why = f"{path.upper().replace('_', '+')} client ceiling {ceiling_gbps:,.0f} Gbps"
    if fsx_bytes_per_s_per_node is not None and fsx_bytes_per_s_per_node < t3_bw:
        t3_bw = fsx_bytes_per_s_per_node
        why = f"this node's share of the file system's throughput ({t3_bw / 1e9:,.1f} GB/s)"
    paths.append(TierPath("T3", f"{t3.name}: {why}", t3.latency_us * 1e-6, t3_bw))
    t4_gbps = min(node.ena_gbps, S3_INSTANCE_CEILING_GBPS)
    paths.append(
        TierPath(
            "T4",
            f"{t4.name}: min(ENA, S3 per-instance) {t4_gbps:,.0f} Gbps",
            t4.latency_us * 1e-6,
            _gbps(t4_gbps),
        )
    )
    return paths


def prefill_flops(spec: ModelSpec, active_params: int, tokens: int) -> float:
    """FLOPs to prefill ``tokens`` tokens from scratch (causal attention).

    Worked number: Llama 3.1 70B (69.5 B active without the embedding lookup, 80 layers x 64
    heads x (128 + 128)) at 100,000 tokens: 2 x 69.5e9 x 1e5 + 80 x 64 x 256 x 1e10
    = 1.39e16 + 1.31e16 = 2.70e16 FLOPs.
    """
    n = float(tokens)
    linear = 2.0 * active_params * n
    heads = spec.num_attention_heads
    attention = 0.0
    topk = None
    for group in spec.groups:
        if isinstance(group, IndexerLayers):
            # The indexer scores every earlier token (quadratic); attention then reads top-k.
            attention += group.num_layers * group.num_heads * group.index_head_dim * n * n
            topk = 2048
    for group in spec.groups:
        if isinstance(group, AttentionLayers):
            dims = group.head_dim + group.v_head_dim
            attention += group.num_layers * heads * dims * _pairs(n, group.window) * 2
        elif isinstance(group, MlaLayers):
            dims = group.qk_nope_head_dim + group.qk_rope_head_dim + group.v_head_dim
            attention += group.num_layers * group.num_heads * dims * _pairs(n, topk) * 2
    return linear + attention


def _pairs(n: float, window: int | None) -> float:
    """Query-key pairs in causal attention over n tokens, each query seeing at most ``window``."""
    if window is None or n <= window:
        return n * n / 2
    return window * window / 2 + (n - window) * window


@dataclass(frozen=True)
class BreakEven:
    """Reload and recompute times for one session at one context, per tier."""

    ctx_tokens: int
    session_bytes: int
    recompute_s: float
    reload_s: dict[str, float]


def recompute_seconds(
    spec: ModelSpec, active_params: int, node: NodeProfile, tokens: int, a: ReloadAssumptions
) -> float:
    """Prefill time on one node at ``mfu`` of its dense peak (FP8 peak when computing in FP8)."""
    per_chip = (
        node.fp8_tflops_per_chip
        if a.use_fp8_compute and node.fp8_tflops_per_chip
        else (node.bf16_tflops_per_chip)
    )
    return prefill_flops(spec, active_params, tokens) / (a.mfu * node.chips * per_chip * 1e12)


def reload_seconds(path: TierPath, session_bytes: int, a: ReloadAssumptions) -> float:
    """Latency plus transfer at the node's bandwidth divided among the concurrent loads."""
    return path.latency_s + session_bytes * a.concurrent_loads / path.node_bytes_per_s


def break_even(
    spec: ModelSpec,
    active_params: int,
    node: NodeProfile,
    paths: list[TierPath],
    bytes_at: Callable[[int], int],
    contexts: list[int],
    a: ReloadAssumptions,
) -> list[BreakEven]:
    """Reload vs recompute at each context in ``contexts``."""
    rows = []
    for tokens in contexts:
        size = bytes_at(tokens)
        rows.append(
            BreakEven(
                ctx_tokens=tokens,
                session_bytes=size,
                recompute_s=recompute_seconds(spec, active_params, node, tokens, a),
                reload_s={p.tier: reload_seconds(p, size, a) for p in paths},
            )
        )
    return rows


def crossover_tokens(
    spec: ModelSpec,
    active_params: int,
    node: NodeProfile,
    path: TierPath,
    bytes_at: Callable[[int], int],
    a: ReloadAssumptions,
    *,
    max_tokens: int = 10_000_000,
) -> int | None:
    """The smallest context from which reloading from ``path`` beats recomputing, and keeps
    beating it up to ``max_tokens``; 1 if it always wins, None if it never does."""

    def reload_wins(tokens: int) -> bool:
        reload = reload_seconds(path, bytes_at(tokens), a)
        return reload < recompute_seconds(spec, active_params, node, tokens, a)

    grid = [1]
    while grid[-1] < max_tokens:
        grid.append(min(max_tokens, grid[-1] * 2))
    wins = [reload_wins(t) for t in grid]
    if not wins[-1]:
        return None
    last_loss = max((i for i, w in enumerate(wins) if not w), default=None)
    if last_loss is None:
        return 1
    low, high = grid[last_loss], grid[last_loss + 1]  # loses at low, wins at high
    while high - low > 1:
        mid = (low + high) // 2
        if reload_wins(mid):
            high = mid
        else:
            low = mid
    return high


def fan_in_per_s(session_bytes: int, link_bytes_per_s: float) -> float:
    """Cache-hit sessions per second one node can pull at ``link_bytes_per_s``."""
    return link_bytes_per_s / session_bytes
