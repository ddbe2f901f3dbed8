"""The counting core of trace replay: the manager's LRU rules (engine/manager.py), exactly,
for a replay that only counts. Pure.

``Manager.access`` builds a ``Chunk`` per block and a ``Move`` per step so that an engine can
carry the steps out; a replay that only counts needs neither. Here each block is one integer
in ``state``: its last use (the manager's count of uses, which orders LRU) shifted left four
bits, and one bit per tier holding it. Each tier that keeps an order has three queues of
``(use, block, time)`` entries (the time of the use: what the idle rules read, as the
manager's ``last_access``), each in the order of its uses: the blocks used there (``fresh``),
the blocks that came down from above in order (``down``), and a heap of those that came
down out of order (``late``); the tier's least recently used block is the oldest head of
the three. Entries are never searched for: a use appends a new entry, and an entry whose
block has been used since or has left the tier is stale, known by ``state``, and skipped
when it comes to a head (``compact`` drops them once they are three times the live ones and
more).
Eviction and demotion are inlined; the counters are plain integers, in blocks, made bytes at
the end.

``replay.run.replay`` runs this core for LRU replays that only count; S3-FIFO's order is the
engine's own policy object, so those replay through the manager. ``tests/unit/replay/
test_count.py`` holds the core to the manager's replay, field for field, over many
configurations.
"""

from __future__ import annotations

import functools
import heapq
import sys
from array import array
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sized
from typing import Any

from kvtool.engine.records import TIERS, new_counters
from kvtool.replay.tally import ReplayConfig, ReplayResult, Tally, TtftModel
from kvtool.replay.trace import Request

BITS = (1, 2, 4, 8)  # T1..T4 in a block's state
FASTEST = [0] + [next(t for t in range(4) if m & BITS[t]) for m in range(1, 16)]
UNBOUNDED = sys.maxsize
Entry = tuple[int, Any, float]  # (use, block, the clock at that use)


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


COMPACT_SLACK = 65536  # stale queue entries a tier may carry beyond 3x its live ones
COMPACT_EVERY = 64  # requests between looks at that
DENSE_MAX = 1 << 24  # ids below this an array index (8 bytes each: 128 MiB at most)
# ids below this index a list: read 10% faster than an array, whose items are made objects
# on each read (the state of the conversation trace's 182,790 ids: 1.5 MB of pointers and
# their numbers); past it the list becomes an array
LIST_MAX = 1 << 20


def fit_table(table: Any, blocks: tuple[Any, ...], refs: int) -> Any:
    """``table`` (block states, 0 for a block never seen) able to hold ``blocks``: a list,
    then past ``LIST_MAX`` ids an array, indexed by the id and grown to the largest, while
    ids are whole numbers from 0 that are not far sparser than the ``refs`` (block
    references so far); else its states moved into a dictionary (text ids, a negative or a
    huge one), which it stays."""
    if isinstance(table, dict):
        return table
    try:
        low, high = min(blocks), max(blocks)
    except TypeError:  # numbers mixed with text
        high = low = None
    if (
        type(low) is not int
        or type(high) is not int
        or low < 0
        or high >= DENSE_MAX
        or (high > 8 * refs + 65536)
    ):
        moved: defaultdict[Any, int] = defaultdict(int)
        for block, value in enumerate(table):
            if value:
                moved[block] = value
        return moved
    if high >= len(table):
        size = max(high + 1, 2 * len(table))
        if isinstance(table, list) and size <= LIST_MAX:
            table.extend([0] * (size - len(table)))
            return table
        if isinstance(table, list):
            table = array("q", table)
        table.frombytes(bytes(8 * (size - len(table))))
    return table


def count_replay(
    requests: Iterable[Request],
    block_tokens: int,
    config: ReplayConfig,
    *,
    ttft: TtftModel | None = None,
    samples: int = 200,
    progress: Callable[[int, int], None] | None = None,
    total: int | None = None,
) -> ReplayResult:
    """``replay.run.replay``'s result for an LRU replay of ``requests``, counted without the
    manager's objects (the same arguments, less ``carry``); ``requests`` may be read as it
    goes (a file's lines), given their ``total`` (default ``len(requests)``). ValueError for
    another policy."""
    if total is None:
        assert isinstance(requests, Sized), "give the total of requests read as they go"
        total = len(requests)
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

    # block -> last use << 4 | its tiers' bits (0: never seen); a list (then an array) indexed
    # by the id while the ids are whole numbers from 0 (Mooncake's, engine gen's), else a
    # dictionary
    state: Any = []
    fresh: list[deque[Entry]] = [deque() for _ in range(4)]  # used in the tier, in order
    down: list[deque[Entry]] = [deque() for _ in range(4)]  # came down in order
    late: list[list[Entry]] = [[] for _ in range(4)]  # came down out of order: a heap
    down_tail = [0] * 4  # the newest use in ``down``
    held = [0, 0, 0, 0]  # blocks per tier
    read = [0, 0, 0, 0]  # blocks read from / written to each tier
    written = [0, 0, 0, 0]
    evictions = demotions = 0
    due = float("-inf")  # Manager._next_due
    heappush, heappop = heapq.heappush, heapq.heappop

    def head(t: int) -> Entry | None:
        """The least recently used block of tier ``t`` (stale heads are dropped on the way),
        left in place; None when the tier is empty."""
        bit = BITS[t]
        fq, dq, heap = fresh[t], down[t], late[t]
        entry: Entry | None
        if not heap and not (fq and dq):  # one queue (the usual case): no merging
            queue = fq or dq
            while queue:
                entry = queue[0]
                if state[entry[1]] >> 4 == entry[0] and state[entry[1]] & bit:
                    return entry
                queue.popleft()
            return None
        while True:
            entry = least(fq, dq, heap)
            if entry is None or (state[entry[1]] >> 4 == entry[0] and state[entry[1]] & bit):
                return entry
            pop_least(fq, dq, heap)

    def least(fq: deque[Entry], dq: deque[Entry], heap: list[Entry]) -> Entry | None:
        """The least recent head of a tier's three queues (stale or not); None when all
        three are empty."""
        entry = fq[0] if fq else None
        if dq and (entry is None or dq[0][0] < entry[0]):
            entry = dq[0]
        if heap and (entry is None or heap[0][0] < entry[0]):
            entry = heap[0]
        return entry

    def pop_least(fq: deque[Entry], dq: deque[Entry], heap: list[Entry]) -> Entry:
        """Remove and return the least recent head of a tier's three queues (it has one)."""
        entry = least(fq, dq, heap)
        assert entry is not None  # callers know the tier holds a live block
        if fq and fq[0] is entry:
            fq.popleft()
        elif dq and dq[0] is entry:
            dq.popleft()
        else:
            heappop(heap)
        return entry

    def arrive(t: int, blocks: list[Entry]) -> None:
        """``blocks`` (in order of use) came down into tier ``t``: queued and counted."""
        nonlocal due
        if t == 1 or t == 2:  # Manager._add's next idle due time (the oldest's)
            d = blocks[0][2] + idle_of[t]
            if d < due:
                due = d
        held[t] += len(blocks)
        if not ordered[t]:
            return
        queue = down[t]
        if blocks[0][0] > down_tail[t]:  # all in order: the end of ``down``
            queue.extend(blocks)
            down_tail[t] = blocks[-1][0]
            return
        heap = late[t]
        for entry in blocks:
            if entry[0] > down_tail[t]:
                queue.append(entry)
                down_tail[t] = entry[0]
            else:
                heappush(heap, entry)

    def compact(t: int) -> None:
        """Drop tier ``t``'s stale entries (a use leaves one behind in each tier)."""
        bit = BITS[t]
        for queue in (fresh[t], down[t]):
            kept = [e for e in queue if state[e[1]] >> 4 == e[0] and state[e[1]] & bit]
            queue.clear()
            queue.extend(kept)
        heap = late[t]
        heap[:] = [e for e in heap if state[e[1]] >> 4 == e[0] and state[e[1]] & bit]
        heapq.heapify(heap)

    def cascade(t: int) -> None:
        """Manager._make_room(t): the least recently used blocks leave ``t`` for the next
        enabled tier (the last drops them) until ``t`` is within its capacity; then the same
        below."""
        nonlocal evictions
        while t >= 0 and held[t] > cap[t]:
            excess = held[t] - cap[t]
            bit = BITS[t]
            low = lower[t]
            low_bit = BITS[low] if low >= 0 else 0
            moved: list[Entry] = []  # what goes down (not what the tier below holds already)
            pop: Callable[[], Entry]
            if late[t] or (fresh[t] and down[t]):
                pop = functools.partial(pop_least, fresh[t], down[t], late[t])
            else:  # one queue: the oldest first, without a call of ours
                pop = (fresh[t] or down[t]).popleft
            wanted = excess
            while wanted:
                entry = pop()
                b = entry[1]
                value = state[b]
                if value >> 4 != entry[0] or not value & bit:
                    continue  # stale
                wanted -= 1
                value ^= bit
                if value & low_bit or not low_bit:  # held below already, or dropped
                    state[b] = value
                else:
                    state[b] = value | low_bit
                    moved.append(entry)
            evictions += excess
            held[t] -= excess
            if low < 0:  # the last tier: dropped
                return
            if moved:
                arrive(low, moved)
                read[t] += len(moved)
                written[low] += len(moved)
            t = low

    def tick(now: float) -> None:
        """Manager.tick: what has idled long enough goes down, least recently used first;
        it reaches the tier below in batches, each before anything there looks at them."""
        nonlocal demotions, due
        next_due = float("inf")
        for t, idle, low in idle_rules:
            bit, low_bit = BITS[t], BITS[low]
            batch: list[Entry] = []
            room = cap[low] - held[low]
            gone = 0
            fq, dq, heap = fresh[t], down[t], late[t]
            while True:
                # the least recent head; all of a queue was used after its head, so once
                # that is not idle long enough, nothing is (the clock never goes back)
                if heap:
                    entry = least(fq, dq, heap)
                    if entry is None or now - entry[2] < idle:
                        break
                    pop_least(fq, dq, heap)
                else:  # the older head of the two queues, without a call of ours
                    if fq:
                        queue = dq if dq and dq[0][0] < fq[0][0] else fq
                    elif dq:
                        queue = dq
                    else:
                        break
                    if now - queue[0][2] < idle:
                        break
                    entry = queue.popleft()
                b = entry[1]
                value = state[b]
                if value >> 4 != entry[0] or not value & bit:
                    continue  # stale
                gone += 1
                value ^= bit
                if value & low_bit:  # a copy below: no write
                    state[b] = value
                    continue
                state[b] = value | low_bit
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
            waiting = head(t)
            if waiting is not None:
                next_due = min(next_due, waiting[2] + idle)
        due = next_due  # (what arrived below is due by then at the earliest: recomputed)

    def land(t: int, low: int, batch: list[Entry]) -> None:
        """``batch`` went down from ``t`` to ``low``: queued and counted there."""
        arrive(low, batch)
        read[t] += len(batch)
        written[low] += len(batch)

    tally = Tally(config, block_tokens, total, ttft=ttft, samples=samples, scale=unit)
    account = tally.request
    plain = ttft is None and config.hit_granularity == 1  # the sums need no more than counts
    sums = [0] * 9  # Tally.add_sums's order
    tier_tokens = [0, 0, 0, 0]
    peak = [0, 0, 0, 0]
    every = tally.every
    first = 0
    lookups = lookup_chunks = misses = inserts = promotions = recomputes = recomputed = 0
    hits = [0, 0, 0, 0]  # the manager's hit counters, in blocks
    dense = True  # ``state`` is an array
    use = 0
    fresh1, fresh3 = fresh[0], fresh[2]
    order1, order3 = ordered[0], ordered[2]
    below = [t for t in (1, 2, 3) if ordered[t]]  # the tiers below T1 whose order a use moves
    below_bits = sum(BITS[t] for t in below)
    new_bits = 5 if eager else 1
    idle3 = idle_of[2]
    for index, request in enumerate(requests):
        if progress is not None and not index & 1023:
            progress(index, total)
        now = request.t_s
        if now >= due:
            tick(now)
        blocks = request.blocks
        count = len(blocks)
        if dense and count:
            state = fit_table(state, blocks, lookup_chunks + count)
            dense = not isinstance(state, dict)
        # the prefix held somewhere (Manager._prefix), and the prefix ever seen
        hit_tiers: list[int] = []
        for b in blocks:
            m = state[b] & 15
            if not m:
                break
            hit_tiers.append(FASTEST[m])
        found = len(hit_tiers)
        reused = found
        if found < count and state[blocks[found]]:
            for b in blocks[found:]:
                if not state[b]:
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
            first = hit_tiers[0]
            if hit_tiers.count(first) == credited:  # all from one tier (the usual case)
                hits[first] += credited
            else:
                for t in range(4):
                    hits[t] += hit_tiers.count(t)
        # every block used or inserted, the last first (Manager.access): one use each
        into_t1 = 0
        for position in range(count - 1, -1, -1):
            b = blocks[position]
            use += 1
            m = state[b] & 15
            if not m:  # new, or held nowhere any more
                state[b] = use << 4 | new_bits
                inserts += 1
                into_t1 += 1
                if order1:
                    fresh1.append((use, b, now))
                if eager:
                    held[2] += 1
                    read[0] += 1
                    written[2] += 1
                    if order3:
                        fresh3.append((use, b, now))
                    if now + idle3 < due:
                        due = now + idle3
                continue
            entry = (use, b, now)
            if m & 1:
                state[b] = use << 4 | m
                if order1:
                    fresh1.append(entry)
                if m & below_bits:  # copies below T1 are used too
                    for t in below:
                        if m & BITS[t]:
                            fresh[t].append(entry)
                continue
            if position < credited:  # a hit below T1 comes up (Manager._promote)
                source = hit_tiers[position]
                promotions += 1
                read[source] += 1
                if source == 1:  # moved out of T2 (T1 and T2 are one node's memory)
                    held[1] -= 1
                    m &= ~2
            else:  # held below but not reused: recomputed into T1
                inserts += 1
            if m & below_bits:
                for t in below:
                    if m & BITS[t]:
                        fresh[t].append(entry)
            state[b] = use << 4 | m | 1
            into_t1 += 1
            if order1:
                fresh1.append(entry)
        held[0] += into_t1
        written[0] += into_t1
        for t in range(4):  # Manager.settle
            if held[t] > cap[t]:
                cascade(t)
        if not index % COMPACT_EVERY:
            for t in range(4):
                if len(fresh[t]) + len(down[t]) + len(late[t]) > 4 * held[t] + COMPACT_SLACK:
                    compact(t)
        if plain:  # Tally.request's sums, inline (hits whole blocks, no TTFT)
            n = request.input_tokens
            tokens = credited * block_tokens
            if tokens > n:
                tokens = n
            seen = reused * block_tokens
            sums[0] += seen if seen < n else n  # tokens reused with unbounded capacity
            if credited:
                if hit_tiers.count(first) == credited:
                    tier_tokens[first] += credited * block_tokens
                else:
                    for t in range(4):
                        tier_tokens[t] += hit_tiers.count(t) * block_tokens
                if credited >= count:  # the last block served counts its own tokens
                    tier_tokens[hit_tiers[count - 1]] += n - count * block_tokens
            full = n // block_tokens
            sums[1] += n
            sums[2] += request.output_tokens
            sums[3] += count
            sums[4] += full
            sums[5] += tokens
            sums[6] += credited
            sums[7] += credited if credited < full else full
            sums[8] += 1
            if held[0] > peak[0] or held[1] > peak[1] or held[2] > peak[2] or held[3] > peak[3]:
                peak[:] = map(max, peak, held)
            if every and index % every == 0:
                tally.occupancy.append((now, {TIERS[t]: held[t] * unit for t in range(4)}))
        else:
            account(index, request, hit_tiers, reused, held)
    if plain:
        tally.add_sums(sums, hits, tier_tokens, peak)
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
