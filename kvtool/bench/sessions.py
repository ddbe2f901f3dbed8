"""``kvtool capacity``'s pure core: the returning-session workload, the search for the most
sessions a T3 restores within a latency target, and the verdict beside the plan. Pure.

A session holds ``ctx_tokens`` of context in T3 as chunk files of ``chunk_tokens`` (an
offloading connector's chunk: LMCache's 256). A **restore** reads every chunk of it, several at
once (``restore_parallel``), as the engines do when a user comes back; its time is to the last
byte. A **turn** writes the new tokens' KV as new chunk files (an eager posture writes as the
conversation grows) and drops the oldest, so a session's context stays the same size. Between
turns the user thinks: from a trace's follow-up turns (``turns_from_requests``), or not at all
(a closed loop: every session restores again at once, the hardest case).

The search (``search``) doubles the sessions until the chosen percentile of restore times
misses the target, then bisects between the last level that held and the first that missed,
until they are within ``resolution`` of each other; the largest level that held is the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

PERCENTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}
DEFAULT_TURN_TOKENS = 512  # a user's message and the answer to it, when no trace says


class Turn(NamedTuple):
    """One follow-up turn: the new tokens its KV adds, and the user's pause before it (s)."""

    tokens: int
    think_s: float


def turns_from_requests(requests: Iterable[Any]) -> list[Turn]:
    """The follow-up turns of a trace: a request whose block ids start with an earlier
    request's (all of them, or all but its last, which was partly filled and is hashed again
    once it fills, as in Mooncake's traces) is that conversation's next turn; the new tokens
    are the difference in prompt length, the pause the difference in arrival. ``requests``
    carry ``t_s``, ``input_tokens`` and ``blocks`` (``replay.trace.Request``). Block ids name a
    whole prefix (Mooncake's hash ids do), so the earlier request is found by the id at the
    end of its prefix."""
    ends: dict[tuple[int, Any], tuple[float, int]] = {}  # (position, id) -> (t, tokens)
    turns = []
    for r in sorted(requests, key=lambda r: r.t_s):
        blocks = tuple(r.blocks)
        previous = None
        for position in range(len(blocks) - 1, -1, -1):  # the longest earlier prefix
            previous = ends.get((position, blocks[position]))
            if previous is not None:
                break
        if previous is not None and r.input_tokens > previous[1]:
            turns.append(Turn(r.input_tokens - previous[1], max(0.0, r.t_s - previous[0])))
        if blocks:
            ends[(len(blocks) - 1, blocks[-1])] = (r.t_s, r.input_tokens)
        if len(blocks) >= 3:  # (two blocks: the first may be a system prompt many share)
            ends[(len(blocks) - 2, blocks[-2])] = (r.t_s, r.input_tokens)
    return turns


class Workload(NamedTuple):
    """What each session does. ``turns`` empty: a closed loop (no pause, ``DEFAULT_TURN_TOKENS``
    a turn)."""

    ctx_tokens: int
    chunk_tokens: int
    chunk_bytes: int  # one chunk file, as the engine writes it
    restore_parallel: int = 8
    turns: tuple[Turn, ...] = ()
    files_per_chunk: int = 1  # tensor-parallel ranks: each writes its share of a chunk

    @property
    def chunks(self) -> int:
        """Chunk files a restore reads (every rank's)."""
        return -(-self.ctx_tokens // self.chunk_tokens) * self.files_per_chunk

    @property
    def session_bytes(self) -> int:
        return self.chunks * self.chunk_bytes

    def turn(self, index: int) -> Turn:
        """The ``index``-th turn of the workload (cycling through the trace's turns)."""
        if not self.turns:
            return Turn(DEFAULT_TURN_TOKENS, 0.0)
        return self.turns[index % len(self.turns)]

    def turn_chunks(self, turn: Turn) -> int:
        """Chunk files a turn writes (at least one chunk: its tokens land in one), every
        rank's."""
        return max(1, -(-turn.tokens // self.chunk_tokens)) * self.files_per_chunk


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values``, interpolated between the two nearest ranks (as
    numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


class Level(NamedTuple):
    """One concurrency level's measurements."""

    sessions: int
    restores: int
    restore_p50_s: float | None
    restore_p95_s: float | None
    restore_p99_s: float | None
    bytes_per_s: float  # read by restores, over the level
    files_per_s: float  # chunk files read by restores, over the level
    write_bytes_per_s: float  # written by turns
    seconds: float
    fleet_bytes_per_s: float | None = None  # what the other nodes (--hosts) read meanwhile

    def at(self, name: str) -> float | None:
        return {"p50": self.restore_p50_s, "p95": self.restore_p95_s,
                "p99": self.restore_p99_s}[name]  # fmt: skip


def level_of(
    sessions: int, restore_s: Sequence[float], *, bytes_read: int, files_read: int,
    bytes_written: int, seconds: float,
) -> Level:  # fmt: skip
    """A ``Level`` from what one level's sessions did."""
    span = max(seconds, 1e-9)
    return Level(
        sessions=sessions,
        restores=len(restore_s),
        restore_p50_s=percentile(restore_s, 0.50),
        restore_p95_s=percentile(restore_s, 0.95),
        restore_p99_s=percentile(restore_s, 0.99),
        bytes_per_s=bytes_read / span,
        files_per_s=files_read / span,
        write_bytes_per_s=bytes_written / span,
        seconds=seconds,
    )


class Search(NamedTuple):
    """Every level measured (in the order run), the most sessions that held, and why the
    search stopped."""

    levels: tuple[Level, ...]
    max_sessions: int | None  # None: levels were fixed and none held (or none ran)
    stopped: str


def holds(level: Level, slo_s: float, at: str) -> bool:
    """Whether a level's ``at`` percentile of restore times is within ``slo_s``."""
    value = level.at(at)
    return value is not None and value <= slo_s


def search(
    measure: Callable[[int], Level], *, slo_s: float, at: str = "p95", start: int = 1,
    limit: int = 4096, resolution: float = 0.125,
) -> Search:  # fmt: skip
    """The most sessions whose ``at`` restore time stays within ``slo_s``: doubling from
    ``start`` up to ``limit`` (the most the folder has room for), then bisecting until the
    level that held and the one that missed are within ``resolution`` (a fraction) of each
    other, or one apart."""
    levels: list[Level] = []

    def run(n: int) -> bool:
        level = measure(n)
        levels.append(level)
        return holds(level, slo_s, at)

    good: int | None = None
    bad: int | None = None
    n = max(1, start)
    while True:
        if run(n):
            good = n
            if n >= limit:
                return Search(tuple(levels), good, f"held at {n:,} sessions, the most the"
                              " folder has room for")  # fmt: skip
            n = min(n * 2, limit)
        else:
            bad = n
            break
    low, high = good or 0, bad  # (the first level missed: look below it)
    while high - low > max(1, int(low * resolution)):
        mid = (low + high) // 2
        if mid <= 0:
            break
        if run(mid):
            low = mid
        else:
            high = mid
    if low == 0:
        return Search(tuple(levels), 0, f"even 1 session missed the target ({at})")
    return Search(tuple(levels), low, f"held at {low:,} sessions, missed at {high:,}")


def fixed(measure: Callable[[int], Level], counts: Sequence[int], *, slo_s: float,
          at: str = "p95") -> Search:  # fmt: skip
    """Each of ``counts`` measured as given (``--sessions 8,16,32``); the most that held."""
    levels = tuple(measure(n) for n in counts)
    held = [lv.sessions for lv in levels if holds(lv, slo_s, at)]
    return Search(levels, max(held) if held else None, "the levels given")


class PlanSide(NamedTuple):
    """What the plan assumed for T3 at this context: how many sessions a node restores at
    once, and how long the reload-vs-recompute table says they take."""

    concurrent_restores: int
    restore_s: float
    source: str  # "kvtool plan llama-3.1-8b --hardware p5en --ctx 32k" etc.


def verdict(
    found: Search,
    *,
    slo_s: float,
    at: str,
    plan: PlanSide | None,
    closed: bool = True,
    fleet: int = 0,
) -> str:
    """One line: the most sessions that held, beside what the plan needs. ``closed``: the
    sessions restored back to back (N sessions are N restores at once); else with a trace's
    pauses."""
    ms = f"{slo_s * 1e3:,.0f} ms"
    what = "concurrent restores" if closed else "sessions (with the trace's pauses), restoring"
    where = f" per node, {fleet} more node(s) loading T3 alike" if fleet else ""
    if found.max_sessions is None or found.max_sessions == 0:
        got = f"no level restored within {ms} at {at}"
        if plan is None:
            return f"T3 misses the target: {got}"
        return f"T3 does not hold the plan: {got}; the plan needs {plan.concurrent_restores}"
    got = f"{found.max_sessions:,} {what} within {ms} at {at}{where}"
    if plan is None:
        return f"T3 holds {got}"
    if found.max_sessions >= plan.concurrent_restores:
        return f"T3 holds the plan: {got}; the plan needs {plan.concurrent_restores}"
    return f"T3 does not hold the plan: {got}; the plan needs {plan.concurrent_restores}"


def level_near(found: Search, sessions: int) -> Level | None:
    """The level measured nearest to ``sessions`` at or above it (else the largest)."""
    above = [lv for lv in found.levels if lv.sessions >= sessions]
    if above:
        return min(above, key=lambda lv: lv.sessions)
    return max(found.levels, key=lambda lv: lv.sessions, default=None)
