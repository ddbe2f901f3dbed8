"""The tiering manager: where every chunk lives, and which moves the rules call for. Pure.

Like vLLM's ``v1/kv_offload`` manager, it decides and never touches bytes: each call returns
``Move``s that the caller performs with its mediums (``engine.Engine``) or only counts (trace
replay), and the index already reflects them; a move that fails is handed back to ``revert``.
The clock is a function passed in (real time for smoke, the trace's time for replay).

The rules (docs/engine.md), each a field of ``EngineConfig``:

* **pressure**: when T1 holds more than ``pressure`` of its capacity, chunks leave T1 (the
  policy picks, pinned chunks stay) for the next enabled tier down: T2, else T3, else T4;
  a full T2, T3 or T4 passes chunks down the same way; the last tier drops them.
* **idle**: a chunk untouched for ``t2_idle_s`` leaves T2 for T3; for ``t3_idle_s``, T3 for T4.
  A chunk the lower tier already holds is simply dropped from the upper one (no write).
* **posture**: ``eager`` copies a chunk to T3 as soon as it is inserted (prefill ends);
  ``lazy`` writes T3 only when pressure or idleness pushes it there.
* **hits**: a lookup finds the longest run of a sequence's leading chunks held in any tier;
  each is promoted into T1 from the fastest tier holding it (moved out of T2, copied from T3
  and T4, which stay shared) — unless the plan's reload-vs-recompute model says recomputing
  that many tokens is faster than reloading them from the slowest tier involved
  (``reload_from_tokens``: the crossover per tier), in which case they count as recomputed.
* **shared prefixes**: chunks inserted as shared expire ``shared_ttl_s`` after they were
  written; an expired chunk is a miss and is dropped everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet

from kvtool.engine.policy import LRU, AgeQueue, Policy, make_policy
from kvtool.engine.records import (
    IDLE_TIERS,
    TIERS,
    Chunk,
    EngineConfig,
    Key,
    Lookup,
    Move,
    new_counters,
)

NOTHING: frozenset[Key] = frozenset()

# ``new(Move, (kind, key, src, dst, nbytes, why))`` builds a Move in half the time its own
# ``__new__`` (a Python function) takes: the hot paths below make one per chunk they move
new = tuple.__new__


class Manager:
    """The index of chunks and the rules; ``Move``s out, nothing moved."""

    def __init__(self, config: EngineConfig, clock: Callable[[], float]) -> None:
        self.config = config
        self.clock = clock
        self.chunks: dict[Key, Chunk] = {}
        self.used = dict.fromkeys(TIERS, 0)
        self.policies: dict[str, Policy] = {t: make_policy(config.policy) for t in TIERS}
        # least recently used first, for the idle rules: only the tiers chunks idle out of;
        # under LRU the tier's eviction order is that same queue (policy.LRU is an AgeQueue)
        self.by_age: dict[str, AgeQueue] = {
            t: policy if isinstance(policy, LRU) else AgeQueue()
            for t, policy in self.policies.items()
            if t in IDLE_TIERS
        }
        self._own_age = {t for t in IDLE_TIERS if not isinstance(self.policies[t], LRU)}
        # the LRU tiers, whose FIFO's front ``_make_room`` pops without the policy's calls
        self._lru = {t: p for t, p in self.policies.items() if isinstance(p, LRU)}
        # T1 is no idle tier: a new chunk's add is its policy's (LRU: the FIFO's end, inline)
        self._t1_add = self.policies["T1"].add
        self._t1_lru = self._lru.get("T1")
        self.counters = new_counters()
        # fixed per run (the config is frozen): looked up on every operation
        self._limits = {t: self._limit_of(t) for t in TIERS}
        self._lower = {
            t: next((u for u in TIERS[TIERS.index(t) + 1 :] if config.enabled(u)), None)
            for t in TIERS
        }
        self._eager = config.posture == "eager" and config.enabled("T3")
        self._idle_rules = [
            (tier, idle, lower)
            for tier, idle, lower in (
                ("T2", config.t2_idle_s, "T3"),
                ("T3", config.t3_idle_s, "T4"),
            )
            if config.enabled(lower)
        ]
        self._next_due = float("-inf")  # when tick next has something to look at
        self._keep: AbstractSet[Key] = NOTHING  # while ``settle`` runs: what T1's evictions pass
        self._uses = 0  # uses so far: each chunk's last one orders LRU (ties never happen)
        self._unavailable: dict[str, float] = {}  # tier -> until when writes pass it over
        self._unreadable: dict[str, float] = {}  # tier -> until when its idle chunks stay
        # the tiers whose idle rule runs (the tier below is on), and after how long
        self._idle_of = {tier: idle for tier, idle, _ in self._idle_rules}
        self._ttl = config.shared_ttl_s
        self._reload = config.reload_from_tokens  # empty: every hit reloads (no crossover)
        self._hits_key = {t: f"hits_{t}" for t in TIERS}
        self._hit_tokens_key = {t: f"hit_tokens_{t}" for t in TIERS}
        self._read_key = {t: f"bytes_read_{t}" for t in TIERS}
        self._written_key = {t: f"bytes_written_{t}" for t in TIERS}

    # --- queries -----------------------------------------------------------------------------

    def limit(self, tier: str) -> float:
        """Bytes a tier may hold before chunks leave it (T1: the pressure line)."""
        return self._limits[tier]

    def _limit_of(self, tier: str) -> float:
        capacity = self.config.capacity_bytes.get(tier, 0)
        if capacity is None:
            return float("inf")
        return capacity * self.config.pressure if tier == "T1" else float(capacity)

    def where(self, key: Key) -> str | None:
        """The fastest tier holding ``key``, or None."""
        chunk = self.chunks.get(key)
        if chunk is None:
            return None
        for tier in TIERS:
            if tier in chunk.tiers:
                return tier
        return None

    # --- sessions ------------------------------------------------------------------------------

    def pin(self, keys: Iterable[Key]) -> None:
        """Chunks in use stay in T1 whatever the pressure."""
        for key in keys:
            if key in self.chunks:
                self.chunks[key].pins += 1

    def unpin(self, keys: Iterable[Key]) -> None:
        for key in keys:
            chunk = self.chunks.get(key)
            if chunk is not None and chunk.pins:
                chunk.pins -= 1

    def _prefix(self, keys: Sequence[Key], now: float) -> tuple[list[Chunk], list[str], list[Move]]:
        """The hit rule, for ``lookup`` and ``access`` alike: the longest run of leading
        ``keys`` held in any tier, each with the fastest tier holding it; an expired shared
        chunk ends the run and is dropped everywhere (the drops are returned)."""
        counters = self.counters
        counters["lookups"] += 1
        counters["lookup_chunks"] += len(keys)
        found: list[Chunk] = []
        tiers_hit: list[str] = []
        drops: list[Move] = []
        chunks = self.chunks
        for key in keys:
            chunk = chunks.get(key)
            if chunk is None:
                break
            if chunk.expires_at is not None and now >= chunk.expires_at:
                drops += self._forget(chunk, why="shared TTL expired")
                counters["expired"] += 1
                break
            tiers = chunk.tiers
            if "T1" in tiers:  # (the fastest)
                tier = "T1"
            elif tiers:
                tier = next(t for t in TIERS if t in tiers)  # the fastest holding it
            else:
                break
            found.append(chunk)
            tiers_hit.append(tier)
        counters["misses"] += len(keys) - len(found)
        return found, tiers_hit, drops

    def _recompute(self, found: list[Chunk], tiers_hit: list[str]) -> bool:
        """The reload-vs-recompute rule: True (and counted) when the plan's crossover for the
        slowest tier involved says recomputing the prefix's tokens is faster than reloading
        them (``reload_from_tokens``; a tier without one always reloads)."""
        slowest = max(tiers_hit, key=TIERS.index)
        tokens = sum(chunk.tokens for chunk in found)
        threshold = self.config.reload_from_tokens.get(slowest, 0)
        if threshold is not None and tokens >= threshold:
            return False
        self.counters["recomputes"] += len(found)
        self.counters["recomputed_tokens"] += tokens
        return True

    def _credit(self, found: list[Chunk], tiers_hit: list[str]) -> None:
        counters = self.counters
        for chunk, tier in zip(found, tiers_hit, strict=True):
            counters[self._hits_key[tier]] += 1
            counters[self._hit_tokens_key[tier]] += chunk.tokens

    def lookup(self, keys: Sequence[Key]) -> Lookup:
        """The longest run of leading ``keys`` held in a tier (``_prefix``), and how to bring
        it to T1 unless recomputing is faster (``_recompute``); ``_credit`` and ``_touch``
        inline, once per hit."""
        now = self.clock()
        found, tiers_hit, drops = self._prefix(keys, now)
        if not found:
            return new(Lookup, ([], drops, False))
        hits = list(zip([chunk.key for chunk in found], tiers_hit, strict=True))
        if self._reload and self._recompute(found, tiers_hit):
            return new(Lookup, (hits, drops, True))
        moves = drops
        lru, own_age = self._lru, self._own_age
        use = self._uses
        tokens = 0
        for chunk, tier in zip(found, tiers_hit, strict=True):
            tokens += chunk.tokens
            use += 1
            chunk.last_access = now
            chunk.last_use = use
            key = chunk.key
            for held in chunk.tiers:  # the newest use in every tier holding it
                queue = lru.get(held)
                if queue is not None and key in (fifo := queue.fifo):  # (LRU's touch, inline)
                    fifo.move_to_end(key)
                    fifo[key] = queue.tail = use
                    continue
                self.policies[held].touch(key, use)
                if held in own_age:
                    self.by_age[held].put(key, use)
            if tier != "T1":
                self._uses = use
                moves.append(self._promote(chunk, tier))
        first = tiers_hit[0]
        if tiers_hit.count(first) == len(tiers_hit):  # all from one tier: credited at once
            self.counters[self._hits_key[first]] += len(found)
            self.counters[self._hit_tokens_key[first]] += tokens
        else:
            self._credit(found, tiers_hit)
        self._uses = use
        if self.used["T1"] > self._limits["T1"]:
            for chunk in found:
                chunk.pins += 1
            self._make_room("T1", moves)
            for chunk in found:
                chunk.pins -= 1
        return new(Lookup, (hits, moves, False))

    def insert(
        self, key: Key, nbytes: int, tokens: int, *, shared: bool = False, settle: bool = True
    ) -> list[Move]:
        """A chunk computed into T1 (its bytes come with the ``put``); eager posture also
        copies it to T3. Then whatever pressure calls for, unless ``settle`` is False: a
        caller inserting a whole request's chunks settles once after the last (``settle``)."""
        now = self.clock()
        counters = self.counters
        counters["inserts"] += 1
        chunks, t1_lru = self.chunks, self._t1_lru
        chunk = chunks.get(key)
        if chunk is None:  # new: its first use, straight into T1 (``_chunk``, ``_add`` inline)
            self._uses = use = self._uses + 1
            chunk = chunks[key] = Chunk(key, nbytes, tokens, now, use, {"T1"})
            self.used["T1"] += nbytes
            if t1_lru is None:
                self._t1_add(key, use)
            else:  # at the newest use, into a queue that holds it nowhere: the end
                t1_lru.fifo[key] = t1_lru.tail = use
            counters["bytes_written_T1"] += nbytes
            moves = [new(Move, ("put", key, None, "T1", nbytes, "computed"))]
        else:
            moves = []
            self._touch(chunk, now)
            if "T1" not in chunk.tiers:
                self._add(chunk, "T1")
                counters["bytes_written_T1"] += nbytes
                moves.append(new(Move, ("put", key, None, "T1", nbytes, "computed")))
        if shared and self._ttl is not None and chunk.expires_at is None:
            chunk.expires_at = now + self._ttl
        if self._eager and "T3" not in chunk.tiers:
            self._add(chunk, "T3")
            counters["bytes_read_T1"] += nbytes
            counters["bytes_written_T3"] += nbytes
            moves.append(Move("copy", key, "T1", "T3", nbytes, "eager write"))
            if settle and self.used["T3"] > self._limits["T3"]:
                self._make_room("T3", moves)
        if settle and self.used["T1"] > self._limits["T1"]:
            chunk.pins += 1  # the chunk just computed stays while room is made
            self._make_room("T1", moves)
            chunk.pins -= 1
        return moves

    def insert_many(
        self, keys: Sequence[Key], nbytes: int, tokens: int, *, shared: bool = False
    ) -> list[Move]:
        """``insert(key, nbytes, tokens, shared=shared, settle=False)`` for each of ``keys`` in
        turn, in one call: a request's computed chunks, after which the caller settles once
        (``settle(keys)``). The common case inline: a chunk new to the index entering an LRU
        T1, lazy posture, no TTL to set; anything else goes through ``insert``."""
        t1 = self._t1_lru
        if t1 is None or self._eager or (shared and self._ttl is not None):
            moves: list[Move] = []
            for key in keys:
                moves += self.insert(key, nbytes, tokens, shared=shared, settle=False)
            return moves
        now = self.clock()
        chunks, fifo = self.chunks, t1.fifo
        moves = []
        append = moves.append
        use = self._uses
        added = 0  # new chunks not yet counted in ``used``, the counters and the FIFO's tail
        for key in keys:
            if key in chunks:  # touched, or recomputed into T1: ``insert``'s own way
                if added:
                    self._count_new(added, nbytes, use)
                    added = 0
                self._uses = use
                moves += self.insert(key, nbytes, tokens, shared=shared, settle=False)
                use = self._uses
                continue
            use += 1
            chunks[key] = Chunk(key, nbytes, tokens, now, use, {"T1"})
            fifo[key] = use  # the newest use, in a queue that holds it nowhere: the end
            added += 1
            append(new(Move, ("put", key, None, "T1", nbytes, "computed")))
        if added:
            self._count_new(added, nbytes, use)
        self._uses = use
        return moves

    def _count_new(self, added: int, nbytes: int, use: int) -> None:
        """``insert_many``'s new chunks, counted at once: T1's bytes, the counters, and the
        newest use at the end of T1's FIFO."""
        total = added * nbytes
        self.used["T1"] += total
        self.counters["inserts"] += added
        self.counters["bytes_written_T1"] += total
        assert self._t1_lru is not None
        self._t1_lru.tail = use
        self._uses = use

    def settle(self, keep: Iterable[Key] = ()) -> list[Move]:
        """Make room in every tier that is over its limit (after ``insert(settle=False)``);
        chunks in ``keep`` (the request just inserted) stay in T1 if anything can go, as if
        pinned: T1's evictions pass over them."""
        used, limits = self.used, self._limits
        moves: list[Move] = []
        try:
            for tier in TIERS:
                if used[tier] > limits[tier]:  # (room made above may have made room here)
                    if not self._keep:
                        self._keep = set(keep)
                    self._make_room(tier, moves)
        finally:
            self._keep = NOTHING
        return moves

    def access(
        self, keys: Sequence[Key], nbytes: int, tokens: int, *, shared: bool = False
    ) -> tuple[list[str], list[Move]]:
        """One request of a trace replay, by the same hit rules as ``lookup`` (``_prefix``,
        ``_recompute``): the tiers of its cached prefix (none when the prefix is recomputed),
        then every block touched or inserted, the last block first, so that a prefix stays
        more recent than its suffixes; blocks hit below T1 come up into it (moved from T2,
        copied from T3 and T4), blocks held below but not reused (past the prefix, or
        recomputed) are recomputed into T1; eviction once the whole request is in. ``shared``
        blocks get the TTL when first inserted. Returns the hit tiers and the moves (``put``s
        carry blocks the caller computes)."""
        now = self.clock()
        counters = self.counters
        chunks = self.chunks
        found, hit_tiers, moves = self._prefix(keys, now)
        if found and self._reload and self._recompute(found, hit_tiers):
            hit_tiers = []
        else:
            self._credit(found, hit_tiers)
        hits = len(hit_tiers)
        ttl = self._ttl if shared else None
        for index in range(len(keys) - 1, -1, -1):
            key = keys[index]
            chunk = chunks.get(key)
            if chunk is None:
                chunk = chunks[key] = self._chunk(key, nbytes, tokens, now)
                if ttl is not None:
                    chunk.expires_at = now + ttl
                counters["inserts"] += 1
                self._add(chunk, "T1")
                counters["bytes_written_T1"] += nbytes
                moves.append(Move("put", key, None, "T1", nbytes, "computed"))
                if self._eager and "T3" not in chunk.tiers:
                    self._add(chunk, "T3")
                    counters["bytes_read_T1"] += nbytes
                    counters["bytes_written_T3"] += nbytes
                    moves.append(Move("copy", key, "T1", "T3", nbytes, "eager write"))
                continue
            self._touch(chunk, now)
            if "T1" in chunk.tiers:
                continue
            if index < hits:
                moves.append(self._promote(chunk, hit_tiers[index]))
            else:  # held below, but not reused: recomputed into T1
                counters["inserts"] += 1
                self._add(chunk, "T1")
                counters["bytes_written_T1"] += nbytes
                moves.append(Move("put", key, None, "T1", nbytes, "recomputed"))
        moves += self.settle()  # the request's own blocks may go too: the least recent ones
        return hit_tiers, moves

    def tick(self) -> list[Move]:
        """Idle demotions due now: T2 -> T3 after ``t2_idle_s``, T3 -> T4 after ``t3_idle_s``.
        While the tier below refuses writes (``mark_unavailable``), chunks go on to the next
        tier down that takes them (T2 -> T4 while T3 is full): a chunk idle long enough to
        leave the node does, whatever one shared tier is doing."""
        now = self.clock()
        if now < self._next_due:
            return []  # nothing can be idle long enough yet (ages only grow later)
        moves: list[Move] = []
        next_due = float("inf")
        for tier, idle, lower in self._idle_rules:
            why = f"idle {idle:g} s"
            if self._unreadable.get(tier, -1.0) > now:  # reads failed: its chunks stay a while
                next_due = min(next_due, self._unreadable[tier])
                continue
            if self._unavailable.get(lower, -1.0) > now:  # it refused writes: the next tier
                below = self._lower_of(lower)  # down that takes them
                if below is None:  # none does: try again when one may
                    next_due = min(next_due, self._reopens(tier, now))
                    continue
                lower, why = below, f"{why}, {lower} refused writes"
            ages = self.by_age[tier]
            while (key := ages.oldest()) is not None:
                chunk = self.chunks[key]
                if now - chunk.last_access < idle:
                    next_due = min(next_due, chunk.last_access + idle)
                    break
                self.counters["demotions"] += 1
                moves.append(self._down(chunk, tier, lower, why=why))
                if self.used[lower] > self._limits[lower]:
                    self._make_room(lower, moves)
        self._next_due = next_due
        return moves

    # --- what happened outside -----------------------------------------------------------------

    def adopt(self, key: Key, nbytes: int, tokens: int, tier: str) -> None:
        """Another node wrote ``key`` to a shared tier: index it there."""
        chunk = self.chunks.get(key)
        if chunk is None:
            chunk = self.chunks[key] = self._chunk(key, nbytes, tokens, self.clock())
        if tier not in chunk.tiers:
            self._add(chunk, tier)

    def drop_local(self) -> None:
        """The node was lost: T1 and T2 are gone; T3 and T4 remain."""
        for chunk in list(self.chunks.values()):
            for tier in ("T1", "T2"):
                if tier in chunk.tiers:
                    self._remove(chunk, tier)
            if not chunk.tiers:
                del self.chunks[chunk.key]

    def corrupt(self, key: Key, tier: str) -> None:
        """A chunk read back from ``tier`` failed its checks: it is no longer there."""
        self.counters["corrupt"] += 1
        chunk = self.chunks.get(key)
        if chunk is not None and tier in chunk.tiers:
            self._remove(chunk, tier)
            if not chunk.tiers:
                del self.chunks[key]

    def revert(self, move: Move, *, fault: bool = True) -> None:
        """``move`` failed at its medium: the index goes back to where the bytes are."""
        self.counters["faults"] += fault
        chunk = self.chunks.get(move.key)
        if move.kind == "drop":  # the drop did not happen: the copy is still at src
            if chunk is None:
                chunk = self.chunks[move.key] = self._chunk(move.key, move.nbytes, 0, self.clock())
            if move.dst is not None and move.dst in chunk.tiers:
                self._remove(chunk, move.dst)  # it leaned on a copy that is not there
            if move.src is not None and move.src not in chunk.tiers:
                self._add(chunk, move.src)
            return
        if chunk is None:
            return
        if move.dst is not None and move.dst in chunk.tiers:
            self._remove(chunk, move.dst)
            self.counters[f"bytes_written_{move.dst}"] -= move.nbytes
            if move.src is not None:
                self.counters[f"bytes_read_{move.src}"] -= move.nbytes
        if move.kind == "move" and move.src is not None and move.src not in chunk.tiers:
            self._add(chunk, move.src)
        if not chunk.tiers:
            del self.chunks[move.key]

    # --- the rules -----------------------------------------------------------------------------

    UNAVAILABLE_S = 30.0  # how long a tier that refused a write is passed over

    def mark_unavailable(self, tier: str, *, reads: bool = False) -> None:
        """``tier`` refused a write (full, read-only, down): chunks leaving the tier above it
        go past it for ``UNAVAILABLE_S`` of the manager's clock; ``reads``: it failed a read
        too, and its own idle chunks stay where they are for that long."""
        until = self.clock() + self.UNAVAILABLE_S
        self._unavailable[tier] = until
        if reads:
            self._unreadable[tier] = until

    def refusing(self) -> bool:
        """Some tier refused an operation within the last ``UNAVAILABLE_S``."""
        if not self._unavailable:
            return False
        now = self.clock()
        return any(until > now for until in self._unavailable.values())

    def readable(self, tier: str) -> bool:
        """``tier`` has not failed a read within the last ``UNAVAILABLE_S``."""
        return self._unreadable.get(tier, -1.0) <= self.clock()

    def available(self, tier: str) -> bool:
        """``tier`` has not refused an operation within the last ``UNAVAILABLE_S``."""
        return self._unavailable.get(tier, -1.0) <= self.clock()

    def _lower_of(self, tier: str) -> str | None:
        """The next enabled tier below ``tier`` that is taking writes now."""
        lower = self._lower[tier]
        if not self._unavailable:
            return lower
        now = self.clock()
        while lower is not None and self._unavailable.get(lower, -1.0) > now:
            lower = self._lower[lower]
        return lower

    def _reopens(self, tier: str, now: float) -> float:
        """When the first enabled tier below ``tier`` that refused writes takes them again."""
        below = TIERS[TIERS.index(tier) + 1 :]
        return min(
            (self._unavailable.get(t, now) for t in below if self.config.enabled(t)),
            default=math.inf,
        )

    def _make_room(self, tier: str, moves: list[Move]) -> None:
        """Chunks leave ``tier`` (policy order, unpinned in T1) until it is under its limit,
        then the same in the tier they went to; their moves are added to ``moves``.

        LRU's common case is inline (``_down`` and ``_forget_tier`` with it): while no key
        came late, the oldest leave from the front of the tier's FIFO, one C call each, until
        the tier is under its limit, the FIFO is empty or (T1) the oldest is pinned or kept;
        ``_evict_by_policy`` goes on from there, so the victims are the policy's."""
        used, chunks, limits = self.used, self.chunks, self._limits
        keep: AbstractSet[Key] | None = self._keep if tier == "T1" else None
        while True:
            held, limit = used[tier], limits[tier]  # (ints against the limit: exact)
            if held <= limit:
                return
            lower = self._lower_of(tier) if self._unavailable else self._lower[tier]
            why = "pressure" if tier == "T1" else "full"
            queue = self._lru.get(tier)
            fifo = None if queue is None else queue.ordered_fifo()
            evicted = 0
            if fifo is not None:
                append = moves.append
                size = len(fifo)
                arrivals: list[tuple[Key, float]] = []  # (key, last use) entering ``lower``
                arrive = arrivals.append
                moved = 0
                pop = fifo.popitem
                make, move_type = new, Move  # (locals: one lookup each, not one per chunk)
                if lower is None and keep is None:  # the last tier, nothing held back: out
                    while held > limit and fifo:
                        key = pop(False)[0]
                        gone = chunks[key]
                        nbytes = gone.nbytes
                        held -= nbytes
                        tiers = gone.tiers
                        tiers.discard(tier)
                        if not tiers:
                            del chunks[key]
                        append(make(move_type, ("drop", key, tier, None, nbytes, why)))
                while held > limit and fifo:
                    item = pop(False)  # the oldest
                    key = item[0]
                    chunk = chunks[key]
                    if keep is not None and (chunk.pins or key in keep):  # back to the front:
                        fifo[key] = item[1]  # the policy's way looks past it
                        fifo.move_to_end(key, last=False)
                        break
                    tiers = chunk.tiers
                    tiers.discard(tier)
                    nbytes = chunk.nbytes
                    held -= nbytes
                    if lower is None:  # the last tier: out
                        if not tiers:
                            del chunks[key]
                        append(make(move_type, ("drop", key, tier, None, nbytes, why)))
                    elif lower in tiers:  # dst names the copy the drop leans on
                        append(make(move_type, ("drop", key, tier, lower, nbytes, why)))
                    else:  # ``_add(chunk, lower)``, the queue's part once for the run
                        tiers.add(lower)
                        moved += nbytes
                        arrive(item)
                        append(make(move_type, ("move", key, tier, lower, nbytes, why)))
                used[tier] = held
                evicted = size - len(fifo)
                if arrivals and lower is not None:
                    self._arrived(tier, lower, arrivals, moved)
            if held > limit:  # S3-FIFO, keys that came late, a pinned or kept chunk
                evicted += self._evict_by_policy(tier, lower, why, moves)
            self.counters["evictions"] += evicted
            if lower is None:
                return
            tier, keep = lower, None  # once this tier is under its limit

    def _arrived(
        self, tier: str, lower: str, arrivals: list[tuple[Key, float]], nbytes: int
    ) -> None:
        """LRU's run of chunks evicted from ``tier`` into ``lower`` (in order of use, already
        marked there): ``_add``'s bytes, queue and idle due time, once for the run."""
        self.used[lower] += nbytes
        self._lru[lower].put_run(arrivals)
        idle = self._idle_of.get(lower)
        if idle is not None:  # the idle rule's next due: the earliest last access
            chunks = self.chunks
            due = min(chunks[key].last_access for key, _ in arrivals) + idle
            if due < self._next_due:
                self._next_due = due
        self.counters[self._read_key[tier]] += nbytes
        self.counters[self._written_key[lower]] += nbytes

    def _evict_by_policy(self, tier: str, lower: str | None, why: str, moves: list[Move]) -> int:
        """Chunks leave ``tier`` in the order its policy's ``evict`` names them, pinned and
        kept chunks passed over in T1, until it is under its limit; how many left."""
        used, limit, chunks = self.used, self._limits[tier], self.chunks
        policy = self.policies[tier]
        keep = self._keep
        can_evict = (
            (lambda k: chunks[k].pins == 0 and k not in keep) if tier == "T1" else (lambda k: True)
        )
        evicted = 0
        while used[tier] > limit:
            victim = policy.evict(can_evict)
            if victim is None:
                break  # everything left is pinned
            evicted += 1
            chunk = chunks[victim]
            if lower is None:
                moves += self._forget_tier(chunk, tier, why)
            else:
                moves.append(self._down(chunk, tier, lower, why=why))
        return evicted

    def _down(self, chunk: Chunk, tier: str, lower: str, *, why: str) -> Move:
        """``chunk`` leaves ``tier`` for ``lower``; a copy already there means no write."""
        self._remove(chunk, tier)
        if lower in chunk.tiers:  # dst names the copy the drop leans on (checked before)
            return Move("drop", chunk.key, tier, lower, chunk.nbytes, why)
        self._add(chunk, lower)
        self.counters[self._read_key[tier]] += chunk.nbytes
        self.counters[self._written_key[lower]] += chunk.nbytes
        return Move("move", chunk.key, tier, lower, chunk.nbytes, why)

    def _promote(self, chunk: Chunk, tier: str) -> Move:
        self.counters["promotions"] += 1
        self.counters[self._read_key[tier]] += chunk.nbytes
        self.counters["bytes_written_T1"] += chunk.nbytes
        self._add(chunk, "T1")
        if tier == "T2":  # T1 and T2 are one node's memory: a chunk lives in one of them
            self._remove(chunk, "T2")
            return Move("move", chunk.key, "T2", "T1", chunk.nbytes, "hit")
        return Move("copy", chunk.key, tier, "T1", chunk.nbytes, "hit")

    def _forget(self, chunk: Chunk, *, why: str) -> list[Move]:
        moves = []
        for tier in sorted(chunk.tiers, key=TIERS.index):
            moves += self._forget_tier(chunk, tier, why)
        return moves

    def _forget_tier(self, chunk: Chunk, tier: str, why: str) -> list[Move]:
        self._remove(chunk, tier)
        if not chunk.tiers:
            del self.chunks[chunk.key]
        return [Move("drop", chunk.key, tier, None, chunk.nbytes, why)]

    def _chunk(self, key: Key, nbytes: int, tokens: int, now: float) -> Chunk:
        """A chunk new to the index: its first use."""
        self._uses += 1
        return Chunk(key, nbytes, tokens, now, self._uses)

    def _touch(self, chunk: Chunk, now: float) -> None:
        """A use: the chunk becomes the most recently used in every tier holding it."""
        self._uses += 1
        chunk.last_access = now
        chunk.last_use = use = self._uses
        for tier in chunk.tiers:
            self.policies[tier].touch(chunk.key, use)
            if tier in self._own_age:
                self.by_age[tier].put(chunk.key, use)

    def _add(self, chunk: Chunk, tier: str) -> None:
        chunk.tiers.add(tier)
        self.used[tier] += chunk.nbytes
        self.policies[tier].add(chunk.key, chunk.last_use)
        if tier in IDLE_TIERS:
            if tier in self._own_age:
                self.by_age[tier].put(chunk.key, chunk.last_use)
            if tier in self._idle_of:
                due = chunk.last_access + self._idle_of[tier]
                if due < self._next_due:
                    self._next_due = due

    def _remove(self, chunk: Chunk, tier: str) -> None:
        chunk.tiers.discard(tier)
        self.used[tier] -= chunk.nbytes
        self.policies[tier].remove(chunk.key)
        if tier in self._own_age:
            self.by_age[tier].remove(chunk.key)
