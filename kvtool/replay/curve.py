"""The whole hit-ratio-vs-capacity curve of a T1-only LRU replay, from one pass over the trace.

LRU has the inclusion property (Mattson et al., 1970): a cache of C blocks holds exactly the
C most recently used blocks, so a block is held by every cache larger than its stack distance
(how many distinct blocks were used since it was). The replay's rules keep that true: a
request's blocks are touched last first and eviction waits until the whole request is in, so
after each request T1 holds the top C of the recency stack, as plain LRU does. A request's hit
is its longest leading run of held blocks; for capacity C it ends at the first block whose
distance is C or more, so each leading block adds its tokens to every capacity above the
largest distance so far. A Fenwick tree over access times gives each distance in O(log n).

Exact for what ``replay`` counts with T2, T3 and T4 off, the LRU policy, no TTL and no
recompute rule (``curve_applies``); ``tests/unit/replay/test_curve.py`` holds it to the
manager's own replay point by point. Pure.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from typing import NamedTuple

from kvtool.replay.run import ReplayConfig, ReplayResult, TierStats
from kvtool.replay.trace import Request


def _below(steps: dict[int, int], limit: int) -> int:
    return sum(v for c, v in steps.items() if c <= limit)


class Sums(NamedTuple):
    """A step table as sorted capacities and running sums: what a capacity or below gets,
    by one bisection (a sweep asks for many capacities of one curve)."""

    capacities: list[int]
    running: list[int]

    @classmethod
    def of(cls, steps: dict[int, int]) -> Sums:
        capacities = sorted(steps)
        return cls(capacities, list(itertools.accumulate(steps[c] for c in capacities)))

    def below(self, limit: int) -> int:
        """The sum of the steps at ``limit`` or below."""
        index = bisect.bisect_right(self.capacities, limit)
        return self.running[index - 1] if index else 0


class Curve(NamedTuple):
    """What a T1 of any size hits, as steps by capacity in blocks (a capacity of C blocks
    gets the sum of the steps at C or below): ``steps`` tokens, ``block_steps`` blocks,
    ``full_steps`` full blocks; ``misses_from`` counts the block accesses that find a block
    only in caches larger than the key (a miss, so an insert, below it); and the trace's
    totals. ``distinct_blocks``: beyond that, more capacity adds nothing."""

    steps: dict[int, int]
    total_tokens: int
    distinct_blocks: int
    block_steps: dict[int, int]
    full_steps: dict[int, int]
    misses_from: dict[int, int]
    new_blocks: int
    # requests, output tokens, blocks, full blocks, and the tokens an unbounded cache reuses
    # (not rounded to a hybrid block)
    totals: tuple[int, int, int, int, int]

    def sums(self) -> tuple[Sums, Sums, Sums, Sums]:
        """The four step tables summed once (tokens, blocks, full blocks, misses), for
        ``result`` at many sizes."""
        tables = (self.steps, self.block_steps, self.full_steps, self.misses_from)
        steps, blocks, full, misses = (Sums.of(table) for table in tables)
        return steps, blocks, full, misses

    def result(
        self,
        config: ReplayConfig,
        block_tokens: int,
        *,
        sums: tuple[Sums, Sums, Sums, Sums] | None = None,
    ) -> ReplayResult:
        """The replay of ``config`` (T1 alone, ``curve_applies``) as ``replay`` reports it:
        the same ratios, T1's hit blocks and tokens, bytes written and peak. ``counters`` is
        empty and there is no occupancy or TTFT: the pass does not count them. ``sums``
        (``Curve.sums``) answers many sizes without summing the tables each time."""
        capacity = config.capacity.get("T1")
        blocks = self.distinct_blocks if capacity is None else capacity // config.block_units
        requests, output, total_blocks, total_full, reused = self.totals
        steps, block_steps, full_steps, misses = sums or self.sums()
        tokens = steps.below(blocks)
        hit_blocks = block_steps.below(blocks)
        all_misses = misses.running[-1] if misses.running else 0
        inserts = self.new_blocks + all_misses - misses.below(blocks)
        n = self.total_tokens
        tier = TierStats(
            tier="T1",
            capacity=capacity,
            hit_blocks=hit_blocks,
            hit_tokens=tokens,
            token_hit_ratio=tokens / n if n else 0.0,
            read=0,  # T1 alone: nothing leaves it for a lower tier
            written=inserts * config.block_units,
            peak=min(blocks, self.distinct_blocks) * config.block_units,
        )
        return ReplayResult(
            requests=requests,
            mean_input_tokens=n / requests if requests else 0.0,
            mean_output_tokens=output / requests if requests else 0.0,
            block_tokens=block_tokens,
            unit=config.unit,
            token_hit_ratio=tokens / n if n else 0.0,
            block_hit_ratio=hit_blocks / total_blocks if total_blocks else 0.0,
            full_block_hit_ratio=full_steps.below(blocks) / total_full if total_full else 0.0,
            reuse_ratio_unbounded=reused / n if n else 0.0,
            tiers=[tier],
            counters={},
            ttft=None,
            occupancy=[],
        )

    def token_hit_ratio(self, blocks: int | None) -> float:
        """The token hit ratio of a T1 of ``blocks`` blocks (None: unbounded)."""
        if not self.total_tokens:
            return 0.0
        limit = self.distinct_blocks if blocks is None else blocks
        return _below(self.steps, limit) / self.total_tokens

    def points(self, count: int = 16) -> list[tuple[int, float]]:
        """About ``count`` capacities from one block to every distinct block, spaced evenly
        on a log scale, each with its token hit ratio."""
        top = max(self.distinct_blocks, 1)
        sizes = sorted({max(1, round(top ** (i / (count - 1)))) for i in range(count)})
        ordered = sorted(self.steps.items())
        out, hit, cursor = [], 0, 0
        for size in sizes:
            while cursor < len(ordered) and ordered[cursor][0] <= size:
                hit += ordered[cursor][1]
                cursor += 1
            out.append((size, hit / self.total_tokens if self.total_tokens else 0.0))
        return out


def curve_applies(config: ReplayConfig) -> str | None:
    """None when ``lru_curve`` is exact for replays with ``config``'s rules at any T1 size;
    else why not (a tier below T1 on, another policy, a TTL, a recompute rule)."""
    if config.capacity.get("T1", 0) == 0:
        return "T1 off"
    below = [t for t in ("T2", "T3", "T4") if config.capacity.get(t, 0) != 0]
    if below:
        return f"{', '.join(below)} on (the one-pass curve is for T1 alone)"
    if config.policy != "lru":
        return f"policy {config.policy} (the one-pass curve is LRU's)"
    if config.shared_ttl_s is not None:
        return "a TTL"
    if any(v not in (None, 0) for v in config.reload_from_tokens.values()):
        return "a recompute rule"
    return None


def lru_curve(requests: Sequence[Request], block_tokens: int, *, granularity: int = 1) -> Curve:
    """The T1-only LRU hit curve of ``requests`` (``block_tokens`` per block; hits rounded
    down to ``granularity`` tokens, as ``ReplayConfig.hit_granularity``)."""
    accesses = sum(len(r.blocks) for r in requests)
    # Fenwick tree of the accesses that are no longer a block's latest (the block was used
    # again): of the accesses after ``time``, those still latest are the distinct blocks
    # used since, and every access is one position, so only the superseded need a tree
    tree = [0] * (accesses + 1)
    last: dict[str, int] = {}
    steps: dict[int, int] = {}
    block_steps: dict[int, int] = {}
    full_steps: dict[int, int] = {}
    misses_from: dict[int, int] = {}
    now = superseded = total = new = output = total_blocks = total_full = reused_tokens = 0

    def distance(time: int) -> int:
        """How many blocks were used since ``time`` (0: none, the most recent)."""
        before, i = 0, time  # superseded accesses at or before ``time``
        while i > 0:
            before += tree[i]
            i -= i & -i
        return now - time - (superseded - before)

    for request in requests:
        blocks, n = request.blocks, request.input_tokens
        count = len(blocks)
        full = n // block_tokens
        total += n
        output += request.output_tokens
        total_blocks += count
        total_full += full
        # each block seen before: the capacity that still holds it (1 + its stack distance)
        needs: dict[object, int] = {}
        for block in set(blocks):  # held at the start, or inserted by the request
            time = last.get(block)
            if time is None:
                new += 1
            else:
                need = needs[block] = distance(time) + 1
                misses_from[need] = misses_from.get(need, 0) + 1
        reach = 0  # the capacity the prefix so far needs: 1 + its largest stack distance
        served = served_blocks = served_full = reused = 0
        for j, block in enumerate(blocks):
            held = needs.get(block)
            if held is None:
                break  # never seen: the prefix ends here for every capacity
            reused = j + 1
            if held > reach:
                reach = held
            tokens = min((j + 1) * block_tokens, n)
            whole = j + 1
            if granularity > 1 and tokens % granularity:
                tokens -= tokens % granularity
                whole = tokens // block_tokens
            if tokens > served:
                steps[reach] = steps.get(reach, 0) + tokens - served
                served = tokens
            if whole > served_blocks:
                block_steps[reach] = block_steps.get(reach, 0) + whole - served_blocks
                served_blocks = whole
            if min(whole, full) > served_full:
                full_steps[reach] = full_steps.get(reach, 0) + min(whole, full) - served_full
                served_full = min(whole, full)
        reused_tokens += min(reused * block_tokens, n)
        for block in reversed(blocks):  # the last first: the prefix ends most recent
            time = last.get(block)
            if time is not None:  # that access is no longer the block's latest
                i = time
                while i <= accesses:
                    tree[i] += 1
                    i += i & -i
                superseded += 1
            now += 1
            last[block] = now
    return Curve(
        steps, total, len(last), block_steps, full_steps, misses_from, new,
        (len(requests), output, total_blocks, total_full, reused_tokens),
    )  # fmt: skip


__all__ = ["Curve", "curve_applies", "lru_curve"]
