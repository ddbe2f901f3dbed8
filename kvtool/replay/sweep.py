"""What-if sweeps: one replay per combination of tier sizes, spread over the cores.

The trace is read once; worker processes are forked after it is in memory, so each replay
starts at once and the parent only collects the summaries. A process that runs other threads
(a library caller, a test runner) spawns its workers instead and sends each the trace: a fork
copies locks other threads hold, and a worker that needs one waits for ever. ``processes=1``
runs in this process (for tests and single-core machines).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from kvtool.replay.run import ReplayConfig, ReplayResult, replay
from kvtool.replay.trace import Trace

_TRACE: Trace | None = None  # set in the parent before forking; read by the workers


class SweepPoint(NamedTuple):
    """One configuration and what its replay found."""

    capacity: dict[str, int | None]
    result: ReplayResult


def grid(sizes: Mapping[str, Sequence[int | None]], base: ReplayConfig) -> list[ReplayConfig]:
    """Every combination of the listed sizes (tiers not listed keep ``base``'s)."""
    tiers = list(sizes)
    configs = []
    for combo in itertools.product(*(sizes[t] for t in tiers)):
        capacity = dict(base.capacity)
        capacity.update(zip(tiers, combo, strict=True))
        configs.append(base._replace(capacity=capacity))
    return configs


def _receive(trace: Trace) -> None:
    """A spawned worker's start: the trace the parent sent."""
    global _TRACE
    _TRACE = trace


def _one(config: ReplayConfig) -> ReplayResult:
    assert _TRACE is not None
    result = replay(_TRACE.requests, _TRACE.block_tokens, config, samples=0)
    return result._replace(occupancy=[])


def run_sweep(
    trace: Trace, configs: Sequence[ReplayConfig], *, processes: int | None = None
) -> list[SweepPoint]:
    """Replay ``trace`` once per config on up to ``processes`` cores (default: all)."""
    global _TRACE
    _TRACE = trace
    workers = min(processes or os.cpu_count() or 1, len(configs))
    try:
        if workers <= 1:
            results = [_one(c) for c in configs]
        else:
            if threading.active_count() == 1:  # nothing else runs: the workers share the trace
                with multiprocessing.get_context("fork").Pool(workers) as pool:
                    results = pool.map(_one, configs, chunksize=1)
            else:
                spawn = multiprocessing.get_context("spawn")
                with spawn.Pool(workers, initializer=_receive, initargs=(trace,)) as pool:
                    results = pool.map(_one, configs, chunksize=1)
    finally:
        _TRACE = None
    return [SweepPoint(c.capacity, r) for c, r in zip(configs, results, strict=True)]


def sweep_json(points: Sequence[SweepPoint]) -> list[dict[str, Any]]:
    """One object per configuration: its sizes and the ratios."""
    return [
        {
            "capacity": p.capacity,
            "token_hit_ratio": p.result.token_hit_ratio,
            "block_hit_ratio": p.result.block_hit_ratio,
            "full_block_hit_ratio": p.result.full_block_hit_ratio,
            "tiers": [
                {"tier": t.tier, "token_hit_ratio": t.token_hit_ratio, "peak": t.peak}
                for t in p.result.tiers
            ],
        }
        for p in points
    ]
