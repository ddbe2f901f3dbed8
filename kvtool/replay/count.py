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
    # a tier that never evicts (unbounded) nor idles out has no use for an order: its blocks
    # are only its bits and its count (an unbounded T4: nothing there is ever looked up in order)
    ordered = [cap[t] < UNBOUNDED or any(rule[0] == t for rule in idle_rules) for t in range(4)]

    where: dict[Any, int] = {}  # block -> its tiers' bits (0: held nowhere); every block seen
    # per tier, its age queue: a FIFO of block -> last use (times never fall along it), and a
    # heap of the late arrivals (time, number, block) with each live entry's number in ``when``
    fifo: list[OrderedDict[Any, float]] = [OrderedDict() for _ in range(4)]
    late: list[list[tuple[float, int, Any]]] = [[] for _ in range(4)]
    when: list[dict[Any, int]] = [{} for _ in range(4)]
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
        queue[b] = now
        tail[t] = now

    def arrive(t: int, blocks: list[tuple[Any, float]]) -> None:
        """AgeQueue.put of ``blocks`` (block, last use), new to tier ``t``, in order (they
        left the tier above oldest first, so their times never fall)."""
        nonlocal seq, due
        if t == 1 or t == 2:  # Manager._add's next idle due time (the oldest's)
            d = blocks[0][1] + idle_of[t]
            if d < due:
                due = d
        if not ordered[t]:
            return
        queue = fifo[t]
        if blocks[0][1] >= tail[t]:  # all in time order: the FIFO's end
            queue.update(blocks)
        else:
            heap, ages = late[t], when[t]
            for b, time in blocks:
                if time >= tail[t]:
                    queue[b] = time
                    tail[t] = time
                    continue
                seq += 1
                ages[b] = seq
                heappush(heap, (time, seq, b))
            if len(heap) > 2 * len(ages) + 64:  # drop the stale entries
                heap[:] = [entry for entry in heap if ages.get(entry[2]) == entry[1]]
                heapq.heapify(heap)
        last_time = blocks[-1][1]
        if last_time > tail[t]:
            tail[t] = last_time

    def oldest(t: int) -> tuple[Any, float] | None:
        """AgeQueue.oldest of tier ``t``, with its time (None: the tier is empty)."""
        heap, ages = late[t], when[t]
        while heap and ages.get(heap[0][2]) != heap[0][1]:
            heappop(heap)
        queue = fifo[t]
        if queue:
            first = next(iter(queue.items()))
            if heap and heap[0][0] < first[1]:
                return heap[0][2], heap[0][0]
            return first
        return (heap[0][2], heap[0][0]) if heap else None

    def leave(b: Any, t: int) -> None:
        """AgeQueue.remove."""
        if fifo[t].pop(b, ABSENT) is ABSENT:
            del when[t][b]

    def cascade(t: int) -> None:
        """Manager._make_room(t): the oldest blocks leave ``t`` for the next enabled tier
        (the last drops them) until ``t`` is within its capacity; then the same below."""
        nonlocal evictions
        while t >= 0 and held[t] > cap[t]:
            low = lower[t]
            bit = BITS[t]
            excess = held[t] - cap[t]
            queue, heap, ages = fifo[t], late[t], when[t]
            while heap and ages.get(heap[0][2]) != heap[0][1]:
                heappop(heap)
            if not heap:  # the FIFO alone, oldest first
                pop = queue.popitem
                out = [pop(False) for _ in range(excess)]
            else:
                out = []
                for _ in range(excess):
                    entry = oldest(t)
                    assert entry is not None  # held[t] counts what the queue holds
                    leave(entry[0], t)
                    out.append(entry)
            evictions += excess
            held[t] -= excess
            if low < 0:  # the last tier: dropped
                for b, _ in out:
                    where[b] &= ~bit
                return
            low_bit = BITS[low]
            moved = []
            for entry in out:
                b = entry[0]
                m = where[b] & ~bit
                if m & low_bit:  # the tier below holds it: dropped
                    where[b] = m
                else:
                    where[b] = m | low_bit
                    moved.append(entry)
            if moved:
                land(t, low, moved)
            t = low

    def tick(now: float) -> None:
        """Manager.tick: what has idled long enough goes down, oldest first. The blocks that
        go down reach the tier below in batches, each before anything there looks at them
        (the tier's eviction when it is full)."""
        nonlocal demotions, due
        next_due = float("inf")
        for t, idle, low in idle_rules:
            bit, low_bit = BITS[t], BITS[low]
            queue, heap, ages = fifo[t], late[t], when[t]
            pop = queue.popitem
            batch: list[tuple[Any, float]] = []
            room = cap[low] - held[low]
            gone = 0
            while True:
                while heap and ages.get(heap[0][2]) != heap[0][1]:
                    heappop(heap)
                if heap:
                    entry = oldest(t)
                    assert entry is not None
                    if now - entry[1] < idle:
                        next_due = min(next_due, entry[1] + idle)
                        break
                    leave(entry[0], t)
                elif queue:
                    entry = pop(False)
                    if now - entry[1] < idle:  # not yet: it goes back in front
                        queue[entry[0]] = entry[1]
                        queue.move_to_end(entry[0], last=False)
                        next_due = min(next_due, entry[1] + idle)
                        break
                else:
                    break
                gone += 1
                b = entry[0]
                m = where[b] & ~bit
                if m & low_bit:  # a copy below: no write
                    where[b] = m
                    continue
                where[b] = m | low_bit
                batch.append(entry)
                if len(batch) > room:  # the tier below is over: it makes room now
                    held[t] -= gone
                    demotions += gone
                    gone = 0
                    land(t, low, batch)
                    batch = []
                    cascade(low)
                    room = cap[low] - held[low]
            held[t] -= gone
            demotions += gone
            if batch:
                land(t, low, batch)
        due = next_due  # (what arrived below is due by then at the earliest: recomputed)

    def land(t: int, low: int, batch: list[tuple[Any, float]]) -> None:
        """``batch`` went down from ``t`` to ``low``: queued and counted there."""
        arrive(low, batch)
        held[low] += len(batch)
        read[t] += len(batch)
        written[low] += len(batch)

    tally = Tally(config, block_tokens, requests, ttft=ttft, samples=samples, scale=unit)
    account = tally.request
    lookups = lookup_chunks = misses = inserts = promotions = recomputes = recomputed = 0
    hits = [0, 0, 0, 0]  # the manager's hit counters, in blocks
    total = len(requests)
    fifo1, fifo2, fifo3 = fifo[0], fifo[1], fifo[2]
    when2 = when[1]
    touch1 = fifo1.move_to_end
    get = where.get
    idle3 = idle_of[2]
    order1, order2, order3 = ordered[0], ordered[1], ordered[2]
    below = [t for t in (1, 2, 3) if ordered[t]]  # the tiers below T1 whose order a use moves
    below_bits = sum(BITS[t] for t in below)
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
        if found < count and blocks[found] in where:
            for b in blocks[found:]:
                if b not in where:
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
            if not m:  # new, or held nowhere any more
                inserts += 1
                into_t1 += 1
                if order1:
                    fifo1[b] = now  # now is the newest time: the FIFO's end
                if eager:
                    where[b] = 5
                    if order3:
                        fifo3[b] = now
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
                if order1:
                    touch1(b)
                    fifo1[b] = now
                if m & below_bits:  # copies below T1 are used too
                    for t in below:
                        if m & BITS[t]:
                            touch(b, t, now)
                continue
            if position < credited:  # a hit below T1 comes up (Manager._promote)
                source = hit_tiers[position]
                promotions += 1
                read[source] += 1
                if source == 1:  # moved out of T2 (T1 and T2 are one node's memory)
                    if order2 and fifo2.pop(b, ABSENT) is ABSENT:
                        del when2[b]
                    held[1] -= 1
                    m &= ~2
            else:  # held below but not reused: recomputed into T1
                inserts += 1
            if m & below_bits:
                for t in below:
                    if m & BITS[t]:
                        touch(b, t, now)
            where[b] = m | 1
            into_t1 += 1
            if order1:
                fifo1[b] = now
        held[0] += into_t1
        written[0] += into_t1
        for t in range(4):  # Manager.settle
            if held[t] > cap[t]:
                cascade(t)
        account(index, request, hit_tiers, reused, held)
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
