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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kvtool.replay.run import ReplayConfig, ReplayResult, replay

if TYPE_CHECKING:
    from kvtool.replay.curve import Curve
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
    trace: Trace,
    configs: Sequence[ReplayConfig],
    *,
    processes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[SweepPoint]:
    """Replay ``trace`` once per config on up to ``processes`` cores (default: all);
    ``progress(done, total)`` after each point."""
    global _TRACE
    _TRACE = trace
    workers = min(processes or os.cpu_count() or 1, len(configs))
    try:
        tell = progress or (lambda done, total: None)
        tell(0, len(configs))
        if workers <= 1:
            results = []
            for config in configs:
                results.append(_one(config))
                tell(len(results), len(configs))
        else:
            alone = threading.active_count() == 1  # nothing else runs: workers share the trace
            context: Any = multiprocessing.get_context("fork" if alone else "spawn")
            start: dict[str, Any] = {} if alone else {"initializer": _receive, "initargs": (trace,)}
            with context.Pool(workers, **start) as pool:
                results = []
                for result in pool.imap(_one, configs, chunksize=1):  # in order
                    results.append(result)
                    tell(len(results), len(configs))
    finally:
        _TRACE = None
    return [SweepPoint(c.capacity, r) for c, r in zip(configs, results, strict=True)]


def sweep_curve(trace: Trace, configs: Sequence[ReplayConfig]) -> tuple[Curve | None, str]:
    """The whole T1 curve in one stack-distance pass (``replay.curve``) when it is exact for
    every configuration of the sweep, with a note saying how it was made; else None and why
    not."""
    from kvtool.replay.curve import curve_applies, lru_curve

    why = next((r for c in configs if (r := curve_applies(c)) is not None), None)
    if why is not None or not configs:
        return None, f"no whole-curve pass: {why or 'no configurations'}; the points only"
    curve = lru_curve(trace.requests, trace.block_tokens, granularity=configs[0].hit_granularity)
    return curve, (
        "the curve: every T1 size from one LRU stack-distance pass (exact: the same ratios as a"
        " replay per size); the points: one replay each"
    )


def curve_json(curve: Curve, block_units: int, count: int = 16) -> list[dict[str, Any]]:
    """``points`` of the curve as ``{"T1": capacity in the replay's units, "token_hit_ratio"}``."""
    return [{"T1": blocks * block_units, "token_hit_ratio": ratio}
            for blocks, ratio in curve.points(count)]  # fmt: skip


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
