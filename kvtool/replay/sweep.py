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


def _worker_start(trace: Trace | None = None) -> None:
    """A worker's start: the default signal handling (the parent's clean-up handlers would
    turn the pool's SIGTERM at the end into a traceback), and the trace the parent sent
    when the worker was spawned rather than forked."""
    import signal

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    if trace is not None:
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
            sent = () if alone else (trace,)
            with context.Pool(workers, initializer=_worker_start, initargs=sent) as pool:
                results = []
                for result in pool.imap(_one, configs, chunksize=1):  # in order
                    results.append(result)
                    tell(len(results), len(configs))
                pool.close()  # the workers finish and exit before the pool is torn down
                pool.join()
    finally:
        _TRACE = None
    return [SweepPoint(c.capacity, r) for c, r in zip(configs, results, strict=True)]


class SweepOutcome(NamedTuple):
    """A sweep's points, the whole T1 curve when there is one, and how both were made."""

    points: list[SweepPoint]
    curve: Curve | None
    how: str


def sweep(
    trace: Trace,
    configs: Sequence[ReplayConfig],
    *,
    processes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepOutcome:
    """The sweep of ``configs``. When one LRU stack-distance pass is exact for all of them
    (T1 alone: ``replay.curve.curve_applies``), the points and the whole curve come from that
    pass; otherwise each point is a replay (``run_sweep``) and the note says why."""
    from kvtool.replay.curve import curve_applies, lru_curve

    why = next((r for c in configs if (r := curve_applies(c)) is not None), None)
    if why is not None or not configs:
        points = run_sweep(trace, configs, processes=processes, progress=progress)
        how = f"each point a replay; no whole-curve pass: {why or 'no configurations'}"
        return SweepOutcome(points, None, how)
    curve = lru_curve(trace.requests, trace.block_tokens, granularity=configs[0].hit_granularity)
    sums = curve.sums()
    points = [SweepPoint(c.capacity, curve.result(c, trace.block_tokens, sums=sums))
              for c in configs]  # fmt: skip
    if progress is not None:
        progress(len(configs), len(configs))
    how = (
        "the points and the curve: one LRU stack-distance pass over the trace (exact: the same"
        " ratios as a replay per point; docs/replay.md says how that is tested)"
    )
    return SweepOutcome(points, curve, how)


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
