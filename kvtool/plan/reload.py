"""Reload a session's KV from a tier, or recompute it: which is faster, and from what context on.

Pure. Both sides are priced on equal terms: when ``concurrent_loads`` (N) sessions need their KV
back at once on a node, the alternative is N prefills, and those share the node's compute just
as the restores share its links. Every assumption is a parameter (docs/planning.md explains
each and works the numbers by hand):

* **Reload** of N sessions of L tokens from a tier takes ``overhead + latency + lookup +
  reads`` (``plan/requests.py``): a fixed connector overhead, one first-byte latency, the
  engine's lookup (one chunk after another, one session at a time per engine instance, or
  its requests at the store's rate if that is slower), then the reads: the longest of the
  transfer (N x bytes(L) / bandwidth), the requests in flight (one file or object per chunk
  **per worker**, each its first-byte latency and its size over one connection, spread over
  the I/O threads or S3 connections) and the reads' requests at the rate the store serves
  (S3's GET/HEAD per prefix, shared by the nodes). The bandwidth is the node's path to
  the tier: T2 = host DRAM over the host-to-accelerator links; T3 = min(the FSx per-client
  ceiling of the path x the EC2 instances in the node, the node's NIC, the node's share of the
  file system's throughput); T4 = S3 at the node's ENA bandwidth (AWS's "100 Gb/s" is an
  example NIC, not a limit).
* **Recompute** of N sessions is N prefills sharing the node:
  ``max(N x (linear(L) / linear peak + attention(L) / attention peak) / mfu, one weight
  pass)``, each part at the peak of the format it runs in: the linear layers (2 x (active
  parameters - LM head) x L + 2 x LM head, logits for the last position only) at FP8 when
  the weights are 8-bit or narrower and the chip has FP8, the attention (which grows with L
  squared; windowed layers are bounded by their window; DeepSeek sparse attention by its
  top-k plus the indexer's own quadratic term) at BF16 unless the engine runs FP8 attention
  (``fp8_attention``). A forward pass cannot be faster than reading the weights once from
  HBM.

At long contexts both sides scale with N, so their ratio does not depend on it; at short
contexts the fixed and per-chunk costs decide. ``crossover_tokens`` finds the context from
which reload wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from kvtool.errors import InputError
from kvtool.model.params import ParamCount
from kvtool.model.spec import AttentionLayers, IndexerLayers, MlaLayers, ModelSpec
from kvtool.plan.requests import (
    LMCACHE_S3,
    KeyScheme,
    Requests,
    RestoreTerms,
    lookup_limit_chunks,
    restore_terms,
)
from kvtool.profiles.hardware import NodeProfile, StorageProfile

T2_LATENCY_S = 5e-6  # the AWS article: single-digit microseconds for host DRAM (estimate)
DEFAULT_MFU = 0.4
DEFAULT_CONCURRENT_LOADS = 16
DEFAULT_CHUNK_TOKENS = 256  # LMCache's default chunk_size: one file / object per chunk
DEFAULT_IO_THREADS = 32  # the AWS article's FSx checklist: 32 or more I/O threads per node
# LMCache's S3 connector: s3_num_io_threads defaults to 64 (s3_adapter.py:32, 0.5.6), per
# engine process; taken as the requests one EC2 instance keeps in flight
DEFAULT_S3_CONNECTIONS = 64
DEFAULT_OVERHEAD_S = 1e-3  # estimate: connector lookup (hashing the prefix, one lookup round)
DSA_TOPK = 2048  # DeepSeek-V3.2's index_topk
DEFAULT_T3_RELOAD_FROM_TOKENS = 50_000  # the article: above 50K tokens T3 beats recompute


@dataclass(frozen=True)
class TierPath:
    """How one node reads a tier back: latency to first byte, bandwidth, and the per-chunk
    operation cost with the concurrency that spreads it."""

    tier: str
    description: str
    latency_s: float
    node_bytes_per_s: float
    op_s: float = 0.0
    io_threads: int = 1
    bytes_divisor: int = 1  # the tier stores 1/N of what HBM holds (an MLA latent saved once)
    bandwidth_source: str = "spec"  # "measured" when kvtool bench's figure replaced the spec
    requests: Requests = field(default_factory=Requests)  # files/objects a chunk, requests

    def lookup_limit_tokens(self, chunk_tokens: int) -> int | None:
        """The longest context whose lookup the engine waits for (LMCache's
        ``lookup_timeout_ms`` over a chunk's HEAD: 3 s / 100 ms x 256 = 7,680 tokens); past
        it the engine recomputes. None where no timeout holds the lookup."""
        chunks = lookup_limit_chunks(self.requests)
        return None if chunks is None else chunks * chunk_tokens


@dataclass(frozen=True)
class ReloadAssumptions:
    """Everything the reload-vs-recompute model assumes, shown to the user as it is.

    ``use_fp8_compute`` None means FP8 linear layers when the weights are 8-bit or narrower
    and the chip has FP8 (the planner decides); ``fp8_attention`` runs the attention at the
    chip's FP8 peak too (an engine's FP8 attention kernel), else it runs at BF16.
    """

    mfu: float = DEFAULT_MFU
    concurrent_loads: int = DEFAULT_CONCURRENT_LOADS
    use_fp8_compute: bool | None = None
    fp8_attention: bool = False
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    io_threads: int = DEFAULT_IO_THREADS  # per EC2 instance
    s3_connections: int = DEFAULT_S3_CONNECTIONS  # per EC2 instance
    s3_lookups: int | None = None  # requests before each GET; None: the key scheme's
    # sessions an engine instance looks up at once; None: LMCache's one (its lookup server)
    s3_lookups_at_once: int | None = None
    s3_prefixes: int | None = None  # partitioned prefixes; None: the key scheme's
    # how long LMCache waits for one session's lookup (lookup_timeout_ms); None: its 3 s
    lookup_timeout_s: float | None = None
    overhead_s: float = DEFAULT_OVERHEAD_S
    # what an FSx that kvtool sizes must reach: T3 reload beating recompute from this many
    # tokens (the AWS article's line), or, when given, restoring within this many seconds
    t3_reload_from_tokens: int = DEFAULT_T3_RELOAD_FROM_TOKENS
    restore_slo_s: float | None = None
    # the AWS article's T4 (plan/release.py): sessions' mean idle time (None: not known, so
    # none is released) and the idle time after which FSx releases a session to S3 (None: 10m)
    mean_idle_s: float | None = None
    release_after_s: float | None = None


def _gbps(gigabits: float) -> float:
    return gigabits * 1e9 / 8


# how a client reaches T3, as typed (``--t3-path``, a plan's ``t3_path``) -> the key used here
T3_PATHS = {
    "ena": "ena",
    "tcp": "ena",
    "efa": "efa",
    "efa-gds": "efa_gds",
    "efa_gds": "efa_gds",
    "gds": "efa_gds",
}


def parse_t3_path(text: str, *, what: str = "--t3-path") -> str:
    """``ena``, ``efa`` or ``efa_gds`` from what the user typed (``tcp``, ``efa-gds``, ``gds``
    accepted); InputError naming ``what`` otherwise."""
    path = T3_PATHS.get(str(text).strip().lower())
    if path is None:
        raise InputError(f"unknown {what} {text!r}", "choose ena, efa or efa-gds")
    return path


def t3_client_gbps(node: NodeProfile, t3: StorageProfile, path: str) -> tuple[str, float]:
    """The client path actually used and its ceiling for the whole node, in Gbps.

    FSx's per-client ceilings apply to each EC2 instance, so an UltraServer of 18 instances
    gets 18 of them, capped by the node's own NIC. Falls back to the best path the node and
    the file system both offer (no GDS on Trainium, no EFA on PERSISTENT_1 or SCRATCH).
    """
    per_instance = {
        "ena": min(t3.client_ena_gbps * node.instances, node.ena_gbps),
        "efa": min(t3.client_efa_gbps * node.instances, node.efa_gbps),
        "efa_gds": min(t3.client_efa_gds_gbps * node.instances, node.efa_gbps) if node.gds else 0.0,
    }
    chosen = next(p for p in (path, "efa", "ena") if per_instance[p] > 0 or p == "ena")
    return chosen, per_instance[chosen]


def tier_paths(
    node: NodeProfile,
    t3: StorageProfile,
    t4: StorageProfile,
    *,
    t3_path: str,
    a: ReloadAssumptions,
    fsx_bytes_per_s_per_node: float | None,
    fsx_why: str = "",
    objects_per_chunk: int = 1,
    nodes: int = 1,
    scheme: KeyScheme = LMCACHE_S3,
    engines: int = 1,
) -> list[TierPath]:
    """The read paths from T2, T3 and T4 into one node's accelerators. A chunk is
    ``objects_per_chunk`` files (T3) or objects (T4): one per worker, or one for an MLA latent
    saved from one rank; ``nodes`` restoring at once share S3's request rate; ``scheme`` is
    how the engine names its S3 objects (its prefixes and lookups); ``engines`` instances on
    the node each look their sessions up (T4)."""
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
    instances = max(node.instances, 1)
    path, ceiling_gbps = t3_client_gbps(node, t3, t3_path)
    t3_bw = _gbps(ceiling_gbps)
    per = f" ({node.instances} instances)" if node.instances > 1 else ""
    why = f"{path.upper().replace('_', '+')} client ceiling {ceiling_gbps:,.0f} Gbps{per}"
    if fsx_bytes_per_s_per_node is not None and fsx_bytes_per_s_per_node < t3_bw:
        t3_bw = fsx_bytes_per_s_per_node
        why = fsx_why or f"this node's share of the file system ({t3_bw / 1e9:,.1f} GB/s)"
    latency = t3.latency_us * 1e-6
    threads = a.io_threads * instances
    each = (
        f"{objects_per_chunk} files a {a.chunk_tokens:,}-token chunk (one per worker)"
        if objects_per_chunk > 1
        else f"a {a.chunk_tokens:,}-token chunk per file"
    )
    paths.append(
        TierPath(
            "T3",
            f"{t3.name}: {why}; {each}, {_per_instance(a.io_threads, instances, 'I/O thread')}",
            latency,
            t3_bw,
            op_s=latency,
            io_threads=threads,
            requests=Requests(
                objects_per_chunk=objects_per_chunk,
                first_byte_s=latency,
                connections=threads,
                noun="file",
                lookup_s_per_chunk=latency,
            ),
        )
    )
    paths.append(s3_path(node, t4, a, objects_per_chunk=objects_per_chunk, nodes=nodes,
                         scheme=scheme, engines=engines))  # fmt: skip
    return paths


def _per_instance(count: int, instances: int, what: str) -> str:
    """``32 I/O threads``, or ``1,152 I/O threads (32 x 36 instances)``."""
    total = count * instances
    noun = what if total == 1 else what + "s"
    return f"{total:,} {noun}" + (f" ({count} x {instances} instances)" if instances > 1 else "")


def s3_path(
    node: NodeProfile,
    t4: StorageProfile,
    a: ReloadAssumptions,
    *,
    objects_per_chunk: int,
    nodes: int,
    scheme: KeyScheme,
    engines: int = 1,
) -> TierPath:
    """The engine reading S3 itself (LMCache's S3 connector, or the stack's own): each object
    a HEAD (the lookups) and a GET of first-byte latency each plus its size over one
    connection; the lookup one session at a time on each of the node's ``engines`` (LMCache's
    lookup server answers one request at a time, lmcache_lookup_client.py:197-276), its HEADs
    one after another; the connections of every instance in flight at once; S3's GET/HEAD
    rate per partitioned prefix (x the key scheme's prefixes) or per directory bucket, shared
    by the ``nodes`` restoring at once, the lookup's HEADs and the GETs alike; the bytes over
    the node's ENA."""
    latency = t4.latency_us * 1e-6
    instances = max(node.instances, 1)
    connections = a.s3_connections * instances
    timeout = scheme.lookup_timeout_s
    if a.lookup_timeout_s is not None:
        if timeout == math.inf:
            raise InputError(
                f"--set lookup_timeout is LMCache's lookup_timeout_ms: {scheme.connector}"
                " has none that kvtool has read",
                "leave --set lookup_timeout out for this engine",
            )
        timeout = a.lookup_timeout_s
    lookups = scheme.lookups if a.s3_lookups is None else a.s3_lookups
    per_engine = 1 if a.s3_lookups_at_once is None else a.s3_lookups_at_once
    at_once = per_engine * max(engines, 1)
    prefixes = scheme.prefixes if a.s3_prefixes is None else a.s3_prefixes
    per_prefix = t4.request_rate_scope == "prefix"
    limit = t4.get_requests_per_s * (prefixes if per_prefix else 1)
    if per_prefix:
        given = " (--set s3_prefixes)" if a.s3_prefixes is not None else f": {scheme.scheme}"
        what = (
            f"{t4.get_requests_per_s:,} GET/HEAD/s per partitioned prefix x"
            f" {prefixes:,} prefix{'es' if prefixes > 1 else ''}{given}"
        )
    else:
        what = f"{t4.get_requests_per_s:,} reads/s per {t4.request_rate_scope or 'bucket'}"
    share = limit / max(nodes, 1)
    if nodes > 1:
        what += f", shared by {nodes} nodes: {share:,.0f}/s a node"
    rate = share if limit else math.inf
    per_connection = t4.per_connection_mbytes_per_s * 1e6
    each = (
        f"{objects_per_chunk} objects a {a.chunk_tokens:,}-token chunk (one per worker)"
        if objects_per_chunk > 1
        else f"one object a {a.chunk_tokens:,}-token chunk"
    )
    heads = f" and {lookups} lookup HEAD{'s' if lookups != 1 else ''}" if lookups else ""
    given = " (--set s3_lookups_at_once)" if a.s3_lookups_at_once is not None else ""
    sessions = f"{per_engine:,} session{'s' if per_engine != 1 else ''}"
    engine = f"on each of {engines} engines" if engines > 1 else "per engine"
    looked = (
        f"; the lookup a chunk after another, {sessions} at a time {engine}{given}"
        if lookups
        else ""
    )
    description = (
        f"{t4.name}, engine-direct ({scheme.connector}): {each}; a GET{heads} per object,"
        f" {latency * 1e3:,.0f} ms to first byte each, then"
        f" {t4.per_connection_mbytes_per_s:,.0f} MB/s a connection{looked};"
        f" {_per_instance(a.s3_connections, instances, 'connection')}; {what}; the node's ENA"
        f" {node.ena_gbps:,.0f} Gbps"
    )
    return TierPath(
        "T4",
        description,
        latency,
        _gbps(node.ena_gbps),
        op_s=latency,
        io_threads=connections,
        requests=Requests(
            objects_per_chunk=objects_per_chunk,
            requests_per_object=1 + lookups,
            first_byte_s=latency,
            per_connection_bytes_per_s=per_connection,
            connections=connections,
            rate_per_s=rate,
            rate_what=what,
            lookup_s_per_chunk=lookups * latency,
            lookup_requests=lookups,
            lookups_at_once=at_once,
            lookup_timeout_s=timeout if lookups else math.inf,
        ),
    )


def prefill_flops(spec: ModelSpec, params: ParamCount, tokens: int) -> float:
    """FLOPs to prefill ``tokens`` tokens from scratch (causal attention, logits for the last
    position only): the sum of ``prefill_flops_parts``.

    Worked number: Llama 3.1 70B (69.5 B active without the embedding lookup, of which 1.05 B
    is the LM head; 80 layers x 64 heads x (128 + 128)) at 100,000 tokens:
    2 x 68.5e9 x 1e5 + 2 x 1.05e9 + 80 x 64 x 256 x 1e10 = 1.37e16 + 1.31e16 = 2.68e16 FLOPs.
    """
    linear, attention = prefill_flops_parts(spec, params, tokens)
    return linear + attention


def prefill_flops_parts(spec: ModelSpec, params: ParamCount, tokens: int) -> tuple[float, float]:
    """A prefill's FLOPs as (linear layers, attention): the parts run in different formats
    (FP8 weights make the linear layers FP8; the attention stays BF16 unless the engine runs
    FP8 attention). Llama 3.1 70B at 100,000 tokens: (1.37e16, 1.31e16)."""
    n = float(tokens)
    linear = 2.0 * (params.active - params.lm_head) * n + 2.0 * params.lm_head
    heads = spec.num_attention_heads
    attention = 0.0
    topk = None
    for group in spec.groups:
        if isinstance(group, IndexerLayers):
            # The indexer scores every earlier token (quadratic); attention then reads top-k.
            attention += group.num_layers * group.num_heads * group.index_head_dim * n * n
            topk = DSA_TOPK
    for group in spec.groups:
        if isinstance(group, AttentionLayers):
            dims = group.head_dim + group.v_head_dim
            attention += group.num_layers * heads * dims * _pairs(n, group.window) * 2
        elif isinstance(group, MlaLayers):
            dims = group.qk_nope_head_dim + group.qk_rope_head_dim + group.v_head_dim
            attention += group.num_layers * group.num_heads * dims * _pairs(n, topk) * 2
    return linear, attention


def _pairs(n: float, window: int | None) -> float:
    """Query-key pairs in causal attention over n tokens, each query seeing at most ``window``."""
    if window is None or n <= window:
        return n * n / 2
    return window * window / 2 + (n - window) * window


@dataclass(frozen=True)
class Compute:
    """What recompute runs on: the node's peak for the linear layers' format and for the
    attention's, and the shortest forward pass (one read of an engine instance's weights
    from its chips' HBM)."""

    peak_flops: float  # the linear layers' peak (FP8 with 8-bit weights, else BF16)
    weight_pass_s: float
    precision: str  # the linear layers' format
    attention_peak_flops: float = 0.0  # 0: the linear layers' peak
    attention_precision: str = ""  # "": the linear layers' format

    @property
    def formats(self) -> str:
        """``linear layers fp8, attention bf16``, or one word when both run alike."""
        attention = self.attention_precision or self.precision
        if attention == self.precision:
            return self.precision
        return f"linear layers {self.precision}, attention {attention}"


def node_compute(
    node: NodeProfile, *, weights_bytes_per_instance: int, tp: int, a: ReloadAssumptions
) -> Compute:
    """Dense peaks per part: the linear layers at FP8 when ``a.use_fp8_compute`` and the chip
    has FP8, the attention at FP8 only with ``a.fp8_attention`` (else BF16); and the weight
    pass."""
    fp8 = bool(a.use_fp8_compute) and node.fp8_tflops_per_chip > 0
    fp8_attention = a.fp8_attention and node.fp8_tflops_per_chip > 0
    per_chip = node.fp8_tflops_per_chip if fp8 else node.bf16_tflops_per_chip
    attention = node.fp8_tflops_per_chip if fp8_attention else node.bf16_tflops_per_chip
    hbm = tp * node.hbm_tbytes_per_s_per_chip * 1e12
    return Compute(
        peak_flops=node.chips * per_chip * 1e12,
        weight_pass_s=weights_bytes_per_instance / hbm if hbm else 0.0,
        precision="fp8" if fp8 else "bf16",
        attention_peak_flops=node.chips * attention * 1e12,
        attention_precision="fp8" if fp8_attention else "bf16",
    )


def prefill_seconds(
    spec: ModelSpec, params: ParamCount, compute: Compute, tokens: int, *, mfu: float,
    share: float = 1.0,
) -> float:  # fmt: skip
    """One prefill of ``tokens`` on ``share`` of the node at ``mfu``: each part at its own
    format's peak (no weight-pass floor)."""
    linear, attention = prefill_flops_parts(spec, params, tokens)
    attention_peak = compute.attention_peak_flops or compute.peak_flops
    return (linear / compute.peak_flops + attention / attention_peak) / (mfu * share)


def recompute_seconds(
    spec: ModelSpec, params: ParamCount, compute: Compute, tokens: int, a: ReloadAssumptions
) -> float:
    """N prefills of ``tokens`` sharing the node at ``mfu`` of each part's peak, never faster
    than a weight pass."""
    one = prefill_seconds(spec, params, compute, tokens, mfu=a.mfu)
    return max(a.concurrent_loads * one, compute.weight_pass_s)


def restore(path: TierPath, session_bytes: int, tokens: int, a: ReloadAssumptions) -> RestoreTerms:
    """N restores of one session each from ``path``, term by term (``plan/requests.py``):
    ``session_bytes`` is the session's size in HBM; the tier holds ``1 / path.bytes_divisor``
    of it."""
    overhead = a.overhead_s if path.tier != "T2" else 0.0
    return restore_terms(
        path.requests,
        sessions=a.concurrent_loads,
        tier_bytes_per_session=session_bytes / path.bytes_divisor,
        tokens=tokens,
        chunk_tokens=a.chunk_tokens,
        bytes_per_s=path.node_bytes_per_s,
        fixed_s=overhead + path.latency_s,
    )


def reload_seconds(path: TierPath, session_bytes: int, tokens: int, a: ReloadAssumptions) -> float:
    """N restores of one session each: overhead + latency + lookup + the longest of the
    bytes, the requests in flight and the request rate (see the module docstring)."""
    return restore(path, session_bytes, tokens, a).total_s


@dataclass(frozen=True)
class BreakEven:
    """Reload and recompute times for N sessions at one context, per tier."""

    ctx_tokens: int
    session_bytes: int
    recompute_s: float
    reload_s: dict[str, float]


def break_even(
    spec: ModelSpec,
    params: ParamCount,
    compute: Compute,
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
                recompute_s=recompute_seconds(spec, params, compute, tokens, a),
                reload_s={p.tier: reload_seconds(p, size, tokens, a) for p in paths},
            )
        )
    return rows


def crossover_tokens(
    spec: ModelSpec,
    params: ParamCount,
    compute: Compute,
    path: TierPath,
    bytes_at: Callable[[int], int],
    a: ReloadAssumptions,
    *,
    max_tokens: int = 10_000_000,
) -> int | None:
    """The smallest context from which reloading from ``path`` beats recomputing, and keeps
    beating it up to ``max_tokens`` or the longest context whose lookup the engine waits for
    (``lookup_limit_tokens``: past it nothing is reloaded); 1 if it always wins, None if it
    never does."""
    limit = path.lookup_limit_tokens(a.chunk_tokens)
    if limit is not None:
        if limit < 1:
            return None
        max_tokens = min(max_tokens, limit)

    def reload_wins(tokens: int) -> bool:
        reload = reload_seconds(path, bytes_at(tokens), tokens, a)
        return reload < recompute_seconds(spec, params, compute, tokens, a)

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
