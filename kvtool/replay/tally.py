"""A replay's records and sums: its configuration, the TTFT model it may carry, what it
reports (``ReplayResult``) and the one ``Tally`` both replay paths count through (the manager's,
``replay.run``, and the counting core's, ``replay.count``), so they cannot differ in what they
report. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from kvtool.engine.records import TIERS, EngineConfig
from kvtool.replay.trace import Request


class ReplayConfig(NamedTuple):
    """Capacities per tier in units (bytes with a model, else tokens; None: unbounded; 0:
    off), each block's size in those units, and the engine's rules (``EngineConfig``'s).

    Where replay deliberately differs from the smoke's engine, it is one of these fields:
    ``pressure`` 1.0 (the capacity given is what a tier holds; plan sizes already stop T1 at
    the 85% line), ``reload_from_tokens`` empty (every cached prefix is reloaded, none
    recomputed: the replay counts what the cache holds) and ``shared_ttl_s`` None (a trace
    does not say which blocks are a shared prefix, so none expire)."""

    capacity: dict[str, int | None]
    block_units: int
    unit: str  # "bytes" or "tokens"
    policy: str = "lru"
    posture: str = "lazy"
    pressure: float = 1.0
    t2_idle_s: float = 300.0
    t3_idle_s: float = 3600.0
    reload_from_tokens: Mapping[str, int | None] = {}
    shared_ttl_s: float | None = None
    # tokens a hit is rounded down to: a hybrid model's engine block (vLLM caches the prefixes
    # of models with state layers only at whole hybrid blocks: vllm#40696, #48401); 1: none
    hit_granularity: int = 1

    def engine_config(self) -> EngineConfig:
        """The manager's rules for this replay (validated: an unknown posture or policy is an
        InputError)."""
        return EngineConfig(
            capacity_bytes=dict(self.capacity),
            pressure=self.pressure,
            t2_idle_s=self.t2_idle_s,
            t3_idle_s=self.t3_idle_s,
            posture=self.posture,
            policy=self.policy,
            shared_ttl_s=self.shared_ttl_s,
            reload_from_tokens=dict(self.reload_from_tokens),
        )


class TtftModel(NamedTuple):
    """Seconds to prefill n tokens from scratch, and to reload a block from each tier."""

    prefill_s: Callable[[int], float]
    reload_block_s: dict[str, float]  # per tier and block, after the first byte (T1: 0)
    latency_s: dict[str, float]  # per tier, once per request that reads from it
    source: str


class TierStats(NamedTuple):
    """One tier's share of a replay."""

    tier: str
    capacity: int | None
    hit_blocks: int
    hit_tokens: int
    token_hit_ratio: float
    read: int
    written: int
    peak: int


class ReplayResult(NamedTuple):
    """What a replay found."""

    requests: int
    mean_input_tokens: float
    mean_output_tokens: float
    block_tokens: int
    unit: str
    token_hit_ratio: float
    block_hit_ratio: float
    full_block_hit_ratio: float
    reuse_ratio_unbounded: float
    tiers: list[TierStats]
    counters: dict[str, int]
    ttft: dict[str, Any] | None
    occupancy: list[tuple[float, dict[str, int]]]

    def to_json(self) -> dict[str, Any]:
        data = self._asdict()
        data["tiers"] = [t._asdict() for t in self.tiers]
        data["occupancy"] = [{"t_s": t, **used} for t, used in self.occupancy]
        return data


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 and the mean (nearest-rank percentiles)."""
    if not values:
        return {}
    ordered = sorted(values)
    n = len(ordered)

    def rank(q: float) -> float:
        return ordered[min(n - 1, max(0, int(-(-q * n // 100)) - 1))]

    return {"p50": rank(50), "p90": rank(90), "p99": rank(99), "mean": sum(ordered) / n}


INDEX = {tier: index for index, tier in enumerate(TIERS)}


class Tally:
    """A replay's sums, request by request: the ratios' numerators and denominators, per-tier
    hits, peaks, occupancy samples and the TTFT estimates. Both replay paths (the manager's
    and ``replay.count``'s) count through it, so they cannot differ in what they report."""

    def __init__(
        self,
        config: ReplayConfig,
        block_tokens: int,
        total: int,
        *,
        ttft: TtftModel | None,
        samples: int,
        scale: int = 1,
    ) -> None:
        """``total`` requests to come; ``scale``: the replay's units per unit of the
        occupancies given (the counting core gives blocks: the block's units)."""
        self.config = config
        self.scale = scale
        self.block_tokens = block_tokens
        self.requests = 0
        self.ttft = ttft
        self.every = max(1, total // samples) if samples > 0 else 0
        self.granularity = config.hit_granularity
        self.total_input = self.total_output = self.total_blocks = self.total_full = 0
        self.hit_tokens = self.hit_blocks = self.hit_full = self.unbounded_tokens = 0
        self.tier_blocks = [0, 0, 0, 0]
        self.tier_tokens = [0, 0, 0, 0]
        self.peak = [0, 0, 0, 0]
        self.occupancy: list[tuple[float, dict[str, int]]] = []
        self.with_cache: list[float] = []
        self.without: list[float] = []
        self.saved = 0.0

    def request(
        self, index: int, request: Request, hit_tiers: list[int], reused: int, used: list[int]
    ) -> None:
        """Request number ``index`` was served ``hit_tiers`` (the tier of each leading block
        served from the cache: 0 for T1 ... 3 for T4); its first ``reused`` blocks had been
        seen before; ``used`` is each tier's occupancy after it, in ``scale`` units."""
        block_tokens = self.block_tokens
        n = request.input_tokens
        count = len(request.blocks)
        self.requests += 1
        self.unbounded_tokens += min(reused * block_tokens, n)
        hits = len(hit_tiers)
        tokens = min(hits * block_tokens, n)
        granularity = self.granularity
        tier_tokens = self.tier_tokens
        if granularity > 1 and tokens % granularity:
            tokens -= tokens % granularity  # served only up to the last whole engine block
            hits = tokens // block_tokens  # the whole trace blocks still served
            for position in range(hits, len(hit_tiers)):  # the part of a block served
                start = position * block_tokens
                if start < tokens:
                    tier_tokens[hit_tiers[position]] += tokens - start
            hit_tiers = hit_tiers[:hits]
        if hits:
            tier_blocks = self.tier_blocks
            first = hit_tiers[0]
            for tier in (first,) if hit_tiers.count(first) == hits else set(hit_tiers):
                k = hit_tiers.count(tier)
                tier_blocks[tier] += k
                tier_tokens[tier] += k * block_tokens
            if hits >= count:  # the last block served counts its own tokens
                tier_tokens[hit_tiers[count - 1]] += n - count * block_tokens
        self.total_input += n
        self.total_output += request.output_tokens
        self.total_blocks += count
        full = n // block_tokens
        self.total_full += full
        self.hit_tokens += tokens
        self.hit_blocks += hits
        self.hit_full += min(hits, full)
        peak = self.peak
        if used[0] > peak[0] or used[1] > peak[1] or used[2] > peak[2] or used[3] > peak[3]:
            self.peak = list(map(max, peak, used))
        if self.every and index % self.every == 0:
            scale = self.scale
            self.occupancy.append(
                (request.t_s, {t: u * scale for t, u in zip(TIERS, used, strict=True)})
            )
        ttft = self.ttft
        if ttft is not None:
            cold = ttft.prefill_s(n)
            reload = 0.0
            for tier in sorted(set(hit_tiers)):
                name = TIERS[tier]
                k = hit_tiers.count(tier)
                reload += ttft.latency_s[name] + k * ttft.reload_block_s[name]
            warm = min(cold, reload + max(0.0, cold - ttft.prefill_s(tokens)))
            self.with_cache.append(warm)
            self.without.append(cold)
            self.saved += cold - warm

    def add_sums(
        self, sums: list[int], tier_blocks: list[int], tier_tokens: list[int], peak: list[int]
    ) -> None:
        """Sums a caller kept itself, request by request as ``request`` keeps them (the
        counting core, for hits in whole blocks without TTFT): tokens reused with unbounded
        capacity, input, output, blocks, full blocks, hit tokens, hit blocks, hit full blocks,
        requests; per tier the hit blocks and tokens, and the peaks (in ``scale`` units)."""
        (unbounded, total_input, total_output, total_blocks, total_full, hit_tokens,
         hit_blocks, hit_full, requests) = sums  # fmt: skip
        self.unbounded_tokens += unbounded
        self.total_input += total_input
        self.total_output += total_output
        self.total_blocks += total_blocks
        self.total_full += total_full
        self.hit_tokens += hit_tokens
        self.hit_blocks += hit_blocks
        self.hit_full += hit_full
        self.requests += requests
        self.tier_blocks = [a + b for a, b in zip(self.tier_blocks, tier_blocks, strict=True)]
        self.tier_tokens = [a + b for a, b in zip(self.tier_tokens, tier_tokens, strict=True)]
        self.peak = list(map(max, self.peak, peak))

    def result(self, counters: dict[str, int]) -> ReplayResult:
        """The replay's result, with the engine's ``counters``."""
        return summarise(
            self.config,
            requests=self.requests,
            block_tokens=self.block_tokens,
            totals=(self.total_input, self.total_output, self.total_blocks, self.total_full),
            hits=(self.hit_tokens, self.hit_blocks, self.hit_full, self.unbounded_tokens),
            tier_blocks=dict(zip(TIERS, self.tier_blocks, strict=True)),
            tier_tokens=dict(zip(TIERS, self.tier_tokens, strict=True)),
            peak={tier: used * self.scale for tier, used in zip(TIERS, self.peak, strict=True)},
            counters=counters,
            ttft=self.ttft,
            ttft_samples=(self.with_cache, self.without, self.saved),
            occupancy=self.occupancy,
        )


def summarise(
    config: ReplayConfig,
    *,
    requests: int,
    block_tokens: int,
    totals: tuple[int, int, int, int],
    hits: tuple[int, int, int, int],
    tier_blocks: Mapping[str, int],
    tier_tokens: Mapping[str, int],
    peak: Mapping[str, int],
    counters: dict[str, int],
    ttft: TtftModel | None,
    ttft_samples: tuple[list[float], list[float], float],
    occupancy: list[tuple[float, dict[str, int]]],
) -> ReplayResult:
    """A replay's result from its sums: ``totals`` (input tokens, output tokens, blocks, full
    blocks), ``hits`` (tokens, blocks, full blocks, tokens reused with unbounded capacity),
    the per-tier sums, the counters, and the TTFT samples (with the cache, without, seconds
    saved)."""
    total_input, total_output, total_blocks, total_full = totals
    hit_tokens, hit_blocks, hit_full, unbounded_tokens = hits
    tiers = [
        TierStats(
            tier=tier,
            capacity=config.capacity.get(tier, 0),
            hit_blocks=tier_blocks[tier],
            hit_tokens=tier_tokens[tier],
            token_hit_ratio=tier_tokens[tier] / total_input if total_input else 0.0,
            read=counters[f"bytes_read_{tier}"],
            written=counters[f"bytes_written_{tier}"],
            peak=peak[tier],
        )
        for tier in TIERS
        if config.capacity.get(tier, 0) != 0  # a tier not given is off, as the manager has it
    ]
    requests_count = requests
    summary = None
    if ttft is not None:
        with_cache, without, saved = ttft_samples
        summary = {
            "with_cache_s": percentiles(with_cache),
            "without_cache_s": percentiles(without),
            "prefill_seconds_saved": saved,
            "source": ttft.source,
        }
    return ReplayResult(
        requests=requests_count,
        mean_input_tokens=total_input / requests_count if requests_count else 0.0,
        mean_output_tokens=total_output / requests_count if requests_count else 0.0,
        block_tokens=block_tokens,
        unit=config.unit,
        token_hit_ratio=hit_tokens / total_input if total_input else 0.0,
        block_hit_ratio=hit_blocks / total_blocks if total_blocks else 0.0,
        full_block_hit_ratio=hit_full / total_full if total_full else 0.0,
        reuse_ratio_unbounded=unbounded_tokens / total_input if total_input else 0.0,
        tiers=tiers,
        counters=counters,
        ttft=summary,
        occupancy=occupancy,
    )
