"""Trace replay: a trace's requests through the tiering engine's manager on the trace's own
clock, counting instead of moving bytes. Pure (docs/replay.md states the semantics).

Per request: the manager's clock is set to the arrival time and due idle demotions happen; the
longest leading run of the request's blocks held in any tier is its hit (the tier of each hit
block is the fastest holding it); then every block is touched or inserted, the last first, and
eviction runs once the whole request is in (``Manager.access``). The infinite-capacity reuse
ratio is counted in the same pass. With a TTFT model (``TtftModel``, from the plan's
reload-vs-recompute model), each request's time to first token is estimated both with the cache
and without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from kvtool.engine.manager import Manager
from kvtool.engine.records import TIERS, Move
from kvtool.replay.tally import (
    INDEX,
    ReplayConfig,
    ReplayResult,
    Tally,
    TierStats,
    TtftModel,
    percentiles,
    summarise,
)
from kvtool.replay.trace import Request

__all__ = [
    "INDEX", "Carry", "ReplayConfig", "ReplayResult", "Requests", "Tally", "TierStats",
    "TtftModel", "manager_replay", "percentiles", "replay", "summarise",
]  # fmt: skip


class Requests(Protocol):
    """What a replay walks: requests in order, and how many (a list, or a trace file read
    as it goes: ``replay.trace.TraceFile``)."""

    def __iter__(self) -> Iterator[Request]: ...

    def __len__(self) -> int: ...


Carry = Callable[[list[Move], list[str], tuple[str, ...]], None]


def replay(
    requests: Requests,
    block_tokens: int,
    config: ReplayConfig,
    *,
    ttft: TtftModel | None = None,
    samples: int = 200,
    carry: Carry | None = None,
    manager_out: list[Manager] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay ``requests`` (a list, or anything sized that can be read once in order: a
    trace file read as it goes, ``inputs.trace.stream_trace``); ``samples`` points of tier
    occupancy over time are kept; ``progress(done, total)`` is called every 1,024 requests
    and at the end.

    ``carry`` receives each request's moves (with its hit tiers and blocks) to perform them
    with real mediums (``replay.real``); without it the moves are only counted: for LRU by
    the counting core (``replay.count``: the same result, without the manager's objects).
    The manager used is appended to ``manager_out`` when given."""
    if carry is None and manager_out is None and config.policy == "lru":
        from kvtool.replay.count import count_replay

        return count_replay(requests, block_tokens, config, ttft=ttft, samples=samples,
                            progress=progress, total=len(requests))  # fmt: skip
    return manager_replay(
        requests if isinstance(requests, Sequence) else list(requests),
        block_tokens,
        config,
        ttft=ttft,
        samples=samples,
        carry=carry,
        manager_out=manager_out,
        progress=progress,
    )


def manager_replay(
    requests: Sequence[Request],
    block_tokens: int,
    config: ReplayConfig,
    *,
    ttft: TtftModel | None = None,
    samples: int = 200,
    carry: Carry | None = None,
    manager_out: list[Manager] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """``replay`` through the engine's ``Manager``, a ``Move`` per step: what ``--real``
    carries out, and the reference the counting core is tested against."""
    clock = [0.0]
    manager = Manager(config.engine_config(), lambda: clock[0])
    if manager_out is not None:
        manager_out.append(manager)
    seen: set[str] = set()
    unit = config.block_units
    tally = Tally(config, block_tokens, len(requests), ttft=ttft, samples=samples)
    total = len(requests)
    used = manager.used
    for index, request in enumerate(requests):
        if progress is not None and not index & 1023:
            progress(index, total)
        clock[0] = request.t_s
        due = manager.tick()
        if carry is not None and due:  # --real carries out the idle demotions too
            carry(due, [], ())
        blocks = request.blocks
        reused = 0
        for block in blocks:
            if block not in seen:
                break
            reused += 1
        seen.update(blocks)
        hit_tiers, moves = manager.access(blocks, unit, block_tokens)
        if carry is not None:
            carry(moves, hit_tiers, blocks)
        tally.request(index, request, [INDEX[t] for t in hit_tiers], reused,
                      [used[t] for t in TIERS])  # fmt: skip
    if progress is not None:
        progress(total, total)
    return tally.result(dict(manager.counters))
