"""The counting core of trace replay: the manager's LRU rules (engine/manager.py), exactly,
for a replay that only counts. Pure.

``Manager.access`` builds a ``Chunk`` per block and a ``Move`` per step so that an engine can
carry the steps out; a replay that only counts needs neither. Here a block is its trace id, its
tiers one bit each in ``where`` and its last use in ``last``; each tier is one age queue (the
structure of ``engine.policy.AgeQueue``: a FIFO of in-order arrivals and a heap of late ones)
serving as both its LRU eviction order and its idle-age order; eviction and demotion are
inlined and the counters are plain integers, in blocks, made bytes at the end.

The order is the manager's: a tier's blocks by last use, ties by when they were put in the
tier. (An ``AgeQueue``'s FIFO only takes a time at or after its newest, so of two entries
with one time the FIFO's was put first: the queue's order is exactly (last use, put order),
whatever the FIFO and heap hold.) Hence one shortcut: a block promoted from T2 is touched
there and removed at once by the manager; here it is only removed, which leaves every other
block's place unchanged.

``replay.run.replay`` runs this core for LRU replays that only count; S3-FIFO's order is the
engine's own policy object, so those replay through the manager. ``tests/unit/replay/
test_count.py`` holds the core to the manager's replay, field for field, over many
configurations.
"""

from __future__ import annotations

import heapq
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from kvtool.engine.manager import TIERS, new_counters
from kvtool.replay.run import ReplayConfig, ReplayResult, Tally, TtftModel
from kvtool.replay.trace import Request

BITS = (1, 2, 4, 8)  # T1..T4 in ``where``
FASTEST = [0] + [next(t for t in range(4) if m & BITS[t]) for m in range(1, 16)]
UNBOUNDED = sys.maxsize
ABSENT = object()


def blocks_within(limit: float, unit: int) -> int:
    """The most blocks of ``unit`` a tier holds before it is over ``limit`` (the manager's
    test is ``used > limit``, in the same floating point)."""
    if limit == float("inf") or unit <= 0:
        return UNBOUNDED
    n = max(0, int(limit // unit))
    while (n + 1) * unit <= limit:
        n += 1
    while n > 0 and n * unit > limit:
        n -= 1
    return n


def count_replay(
    requests: Sequence[Request],
    block_tokens: int,
    config: ReplayConfig,
    *,
    ttft: TtftModel | None = None,
    samples: int = 200,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """``replay.run.replay``'s result for an LRU replay of ``requests``, counted without the
    manager's objects (the same arguments, less ``carry``). ValueError for another policy."""
    rules = config.engine_config()  # validated: an unknown posture or policy is an InputError
    if rules.policy != "lru":
        raise ValueError(f"the counting core is LRU's, not {rules.policy}'s")
    unit = config.block_units
    cap = []
    for tier in TIERS:
        capacity = rules.capacity_bytes.get(tier, 0)
        if capacity is None:
            cap.append(UNBOUNDED)
        else:
            limit = capacity * rules.pressure if tier == "T1" else float(capacity)
            cap.append(blocks_within(limit, unit))
    enabled = [rules.enabled(tier) for tier in TIERS]
    lower = [next((u for u in range(t + 1, 4) if enabled[u]), -1) for t in range(4)]
    eager = rules.posture == "eager" and enabled[2]
    idle_of = (0.0, rules.t2_idle_s, rules.t3_idle_s, 0.0)
    idle_rules = [(t, idle_of[t], low) for t, low in ((1, 2), (2, 3)) if enabled[low]]
    reload_from = rules.reload_from_tokens

    where: dict[Any, int] = {}  # block -> its tiers' bits (0: held nowhere)
    last: dict[Any, float] = {}  # block -> last use; every block ever seen (the reuse ratio)
    fifo: list[OrderedDict[Any, None]] = [OrderedDict() for _ in range(4)]
    late: list[list[tuple[float, int, Any]]] = [[] for _ in range(4)]
    when: list[dict[Any, int]] = [{} for _ in range(4)]  # block -> its live heap entry
    tail = [float("-inf")] * 4  # the newest time in each FIFO
    held = [0, 0, 0, 0]  # blocks per tier
    read = [0, 0, 0, 0]  # blocks read from / written to each tier
    written = [0, 0, 0, 0]
    evictions = demotions = seq = 0
    due = float("-inf")  # Manager._next_due
    heappush, heappop = heapq.heappush, heapq.heappop

    def touch(b: Any, t: int, now: float) -> None:
        """AgeQueue.put of a block tier ``t`` holds, used at ``now`` (the newest time)."""
        queue = fifo[t]
        try:
            queue.move_to_end(b)
        except KeyError:
            del when[t][b]
            queue[b] = None
        tail[t] = now

    def cascade(t: int) -> None:
        """Manager._make_room(t): the oldest blocks leave ``t`` for the next enabled tier
        (the last drops them) until ``t`` is within its capacity; then the same below."""
        nonlocal evictions, due, seq
        while t >= 0 and held[t] > cap[t]:
            low = lower[t]
            bit = BITS[t]
            low_bit = BITS[low] if low >= 0 else 0
            limit = cap[t]
            queue, heap, ages = fifo[t], late[t], when[t]
            if low >= 0:
                low_queue, low_heap, low_ages, low_tail = fifo[low], late[low], when[low], tail[low]
                low_idle = idle_of[low] if low in (1, 2) else None
            n = held[t]
            moved = 0
            while n > limit:
                # the oldest leaves (AgeQueue.oldest, then remove)
                while heap and ages.get(heap[0][2]) != heap[0][1]:
                    heappop(heap)
                if heap and (not queue or heap[0][0] < last[next(iter(queue))]):
                    b = heappop(heap)[2]
                    del ages[b]
                elif queue:
                    b = queue.popitem(False)[0]
                else:
                    break
                evictions += 1
                n -= 1
                m = where[b] & ~bit
                if m & low_bit or low < 0:  # the tier below holds it, or there is none
                    where[b] = m
                    continue
                where[b] = m | low_bit
                moved += 1
                time = last[b]
                if time >= low_tail:  # it arrives below (AgeQueue.put)
                    low_queue[b] = None
                    low_tail = time
                else:
                    seq += 1
                    low_ages[b] = seq
                    heappush(low_heap, (time, seq, b))
                    if len(low_heap) > 2 * len(low_ages) + 64:
                        compact(low)
                if low_idle is not None and time + low_idle < due:
                    due = time + low_idle
            held[t] = n
            if low >= 0:
                tail[low] = low_tail
                held[low] += moved
                read[t] += moved
                written[low] += moved
            t = low

    def compact(t: int) -> None:
        """Drop the stale entries of ``t``'s heap (they outnumber the live ones)."""
        heap, ages = late[t], when[t]
        heap[:] = [entry for entry in heap if ages.get(entry[2]) == entry[1]]
        heapq.heapify(heap)

    def tick(now: float) -> None:
        """Manager.tick: what has idled long enough goes down, oldest first."""
        nonlocal demotions, due, seq
        next_due = float("inf")
        for t, idle, low in idle_rules:
            bit, low_bit = BITS[t], BITS[low]
            queue, heap, ages = fifo[t], late[t], when[t]
            low_queue, low_heap, low_ages = fifo[low], late[low], when[low]
            while True:
                # the oldest (AgeQueue.oldest)
                while heap and ages.get(heap[0][2]) != heap[0][1]:
                    heappop(heap)
                if queue:
                    b = next(iter(queue))
                    time = last[b]
                    from_heap = bool(heap) and heap[0][0] < time
                    if from_heap:
                        time, _, b = heap[0]
                elif heap:
                    time, _, b = heap[0]
                    from_heap = True
                else:
                    break
                if now - time < idle:
                    next_due = min(next_due, time + idle)
                    break
                if from_heap:
                    heappop(heap)
                    del ages[b]
                else:
                    del queue[b]
                demotions += 1
                held[t] -= 1
                m = where[b] & ~bit
                if m & low_bit:  # a copy below: no write
                    where[b] = m
                    continue
                where[b] = m | low_bit
                held[low] += 1
                read[t] += 1
                written[low] += 1
                if time >= tail[low]:  # it arrives below; its idle due time comes below
                    low_queue[b] = None
                    tail[low] = time
                else:
                    seq += 1
                    low_ages[b] = seq
                    heappush(low_heap, (time, seq, b))
                    if len(low_heap) > 2 * len(low_ages) + 64:
                        compact(low)
                if held[low] > cap[low]:
                    cascade(low)
        due = next_due

    tally = Tally(config, block_tokens, requests, ttft=ttft, samples=samples)
    account = tally.request
    lookups = lookup_chunks = misses = inserts = promotions = recomputes = recomputed = 0
    hits = [0, 0, 0, 0]  # the manager's hit counters, in blocks
    total = len(requests)
    fifo1, fifo2, fifo3 = fifo[0], fifo[1], fifo[2]
    when2 = when[1]
    touch1 = fifo1.move_to_end
    get = where.get
    idle3 = idle_of[2]
    for index, request in enumerate(requests):
        if progress is not None and not index & 1023:
            progress(index, total)
        now = request.t_s
        if now >= due:
            tick(now)
        blocks = request.blocks
        count = len(blocks)
        # the prefix held somewhere (Manager._prefix), and the prefix ever seen
        hit_tiers: list[int] = []
        for b in blocks:
            m = get(b)
            if not m:
                break
            hit_tiers.append(FASTEST[m])
        found = len(hit_tiers)
        reused = found
        if found < count and blocks[found] in last:
            for b in blocks[found:]:
                if b not in last:
                    break
                reused += 1
        lookups += 1
        lookup_chunks += count
        misses += count - found
        if found and reload_from:  # Manager._recompute
            threshold = reload_from.get(TIERS[max(hit_tiers)], 0)
            if threshold is None or found * block_tokens < threshold:
                recomputes += found
                recomputed += found * block_tokens
                hit_tiers = []
        credited = len(hit_tiers)
        if credited:
            for t in range(4):
                hits[t] += hit_tiers.count(t)
        # every block touched or inserted, the last first (Manager.access)
        into_t1 = 0
        for position in range(count - 1, -1, -1):
            b = blocks[position]
            m = get(b, 0)
            last[b] = now
            if not m:  # new, or held nowhere any more
                inserts += 1
                into_t1 += 1
                fifo1[b] = None  # now is the newest time: the FIFO's end
                if eager:
                    where[b] = 5
                    fifo3[b] = None
                    tail[2] = now
                    held[2] += 1
                    read[0] += 1
                    written[2] += 1
                    if now + idle3 < due:
                        due = now + idle3
                else:
                    where[b] = 1
                continue
            if m & 1:
                touch1(b)
                if m != 1:  # copies below T1 are used too
                    for t in (1, 2, 3):
                        if m & BITS[t]:
                            touch(b, t, now)
                continue
            if position < credited:  # a hit below T1 comes up (Manager._promote)
                source = hit_tiers[position]
                promotions += 1
                read[source] += 1
                if source == 1:  # moved out of T2 (T1 and T2 are one node's memory)
                    if fifo2.pop(b, ABSENT) is ABSENT:
                        del when2[b]
                    held[1] -= 1
                    m &= ~2
            else:  # held below but not reused: recomputed into T1
                inserts += 1
            for t in (1, 2, 3):
                if m & BITS[t]:
                    touch(b, t, now)
            where[b] = m | 1
            into_t1 += 1
            fifo1[b] = None
        held[0] += into_t1
        written[0] += into_t1
        for t in range(4):  # Manager.settle
            if held[t] > cap[t]:
                cascade(t)
        account(index, request, hit_tiers, reused, [h * unit for h in held])
    if progress is not None:
        progress(total, total)
    counters = new_counters()
    for t, tier in enumerate(TIERS):
        counters[f"hits_{tier}"] = hits[t]
        counters[f"hit_tokens_{tier}"] = hits[t] * block_tokens
        counters[f"bytes_read_{tier}"] = read[t] * unit
        counters[f"bytes_written_{tier}"] = written[t] * unit
    counters.update(
        lookups=lookups,
        lookup_chunks=lookup_chunks,
        misses=misses,
        inserts=inserts,
        evictions=evictions,
        demotions=demotions,
        promotions=promotions,
        recomputes=recomputes,
        recomputed_tokens=recomputed,
    )
    return tally.result(counters)
