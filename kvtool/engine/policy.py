"""Eviction policies: which resident chunk of a tier leaves first. They only decide; the
manager moves nothing until a policy has named a victim, and mediums move the bytes. Pure.

A policy sees keys added (with the chunk's last use), touched (used again) and removed, and
``evict(can_evict)`` names and forgets the next victim that ``can_evict`` allows (chunks in use
are pinned and skipped). A use is the manager's count of uses so far: it only grows, and no
two uses share one, so "least recently used" has no ties. Registered by name in ``POLICIES``:

* ``lru``: least recently used first, by the chunk's last use, in every tier: a chunk that
  arrives in T3 from T2 (idle, or pushed out) keeps the last use it had and leaves before a
  chunk a request used since, however long ago that one arrived. One ``AgeQueue`` is both
  the eviction order and the idle order of its tier (the clock only moves forward, so the
  least recently used is also the one idle longest).
* ``s3fifo``: S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP
  2023): new keys enter a small FIFO (10% of entries); those touched again move to the main
  FIFO, the rest leave early and are remembered in a ghost FIFO, so a key that returns soon goes
  straight to main. Main re-queues a key while its 2-bit frequency is above zero. One-hit
  wonders (a session's unique suffix) leave before reused prefixes.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Protocol


class Policy(Protocol):
    """What the manager asks of an eviction policy."""

    name: str

    def add(self, key: str, last_use: int) -> None:
        """``key`` became resident in the tier; ``last_use`` was its latest use."""
        ...

    def touch(self, key: str, use: int) -> None:
        """``key`` was read or written again: ``use``, the newest use."""
        ...

    def remove(self, key: str) -> None:
        """``key`` left the tier for another reason (moved, expired, corrupt)."""
        ...

    def evict(self, can_evict: Callable[[str], bool]) -> str | None:
        """Name the next victim ``can_evict`` allows and forget it; None when none may go."""
        ...

    def __len__(self) -> int: ...


class AgeQueue:
    """A tier's chunks by last use, least recent first, whatever order they arrived in: a
    chunk demoted into T3 keeps its old last use and must leave before one that arrived
    earlier but was used since. Arrivals in order (the common case: a use, a fresh insert) go
    to the end of a FIFO in O(1); only a late one (used before the FIFO's newest) goes to a
    heap, whose stale entries are skipped and, when they outnumber the live ones, dropped.

    ``fifo`` (key -> last use, in order of use) and ``tail`` (its newest use) are open to the
    manager's hot paths, one C call per chunk instead of a method's frame, on two terms: a key
    may be put at the end (moved there if the FIFO holds it, written if the queue holds it
    nowhere) at a use no older than ``tail``, ``tail`` then set to it; and the front may be
    popped while ``ordered_fifo`` hands the FIFO out (nothing came late). Everything else
    goes through the methods."""

    __slots__ = ("_late", "_seq", "_when", "fifo", "tail")

    def __init__(self) -> None:
        self.fifo: OrderedDict[str, float] = OrderedDict()  # oldest first
        self._late: list[tuple[float, int, str]] = []
        self._when: dict[str, int] = {}  # key -> the heap entry's number, when it is late
        self.tail = float("-inf")
        self._seq = 0

    def put(self, key: str, last_use: float) -> None:
        """``key`` is in the tier, last used at ``last_use`` (again: the newest use wins)."""
        fifo = self.fifo
        if last_use >= self.tail or not fifo:  # (an empty FIFO is in order whatever comes)
            if key in fifo:
                fifo.move_to_end(key)
            else:
                self._when.pop(key, None)
            fifo[key] = last_use
            self.tail = last_use
            return
        fifo.pop(key, None)
        self._seq += 1
        self._when[key] = self._seq
        heapq.heappush(self._late, (last_use, self._seq, key))
        if len(self._late) > 2 * len(self._when) + 64:
            when = self._when
            self._late = [entry for entry in self._late if when.get(entry[2]) == entry[1]]
            heapq.heapify(self._late)

    def put_run(self, items: list[tuple[str, float]]) -> None:
        """``put`` each (key, last use) of keys new to the tier, given in order of use (a run
        popped from the front of the tier above's FIFO): one C call when the first is no
        older than the FIFO's newest, the rest then being newer still."""
        fifo = self.fifo
        if not items:
            return
        if items[0][1] >= self.tail or not fifo:
            fifo.update(items)  # (new keys: none is in the FIFO or among the late)
            self.tail = items[-1][1]
            return
        for key, last_use in items:
            self.put(key, last_use)

    def remove(self, key: str) -> None:
        fifo = self.fifo
        last_use = fifo.pop(key, None)
        if last_use is None:
            self._when.pop(key, None)
        elif last_use == self.tail:  # the newest left: the FIFO takes arrivals from the next
            self.tail = next(reversed(fifo.values()), float("-inf"))

    def ordered_fifo(self) -> OrderedDict[str, float] | None:
        """The FIFO (key -> last use, oldest first) when it alone holds the order (no key came
        late), else None: a caller evicting a run of the oldest may pop them from its front
        itself (``popitem(last=False)``), one C call each. Popping the front never removes the
        newest but the last, and a FIFO left empty takes any arrival."""
        return None if self._when else self.fifo

    def oldest(self) -> str | None:
        """The key used longest ago, or None when the tier is empty."""
        late, when = self._late, self._when
        while late and when.get(late[0][2]) != late[0][1]:
            heapq.heappop(late)
        first = next(iter(self.fifo.items()), None)
        if late and (first is None or late[0][0] < first[1]):
            return late[0][2]
        return None if first is None else first[0]

    def in_order(self) -> Iterator[str]:
        """Every key, oldest first (a snapshot: the queue may change while it is walked)."""
        when = self._when
        late = sorted(entry for entry in self._late if when.get(entry[2]) == entry[1])
        fifo = list(self.fifo.items())
        i = j = 0
        while i < len(late) or j < len(fifo):
            if j == len(fifo) or (i < len(late) and late[i][0] < fifo[j][1]):
                yield late[i][2]
                i += 1
            else:
                yield fifo[j][0]
                j += 1

    def __contains__(self, key: object) -> bool:
        return key in self.fifo or key in self._when

    def __len__(self) -> int:
        return len(self.fifo) + len(self._when)


class LRU(AgeQueue):
    """Least recently used first: the tier's ``AgeQueue``."""

    __slots__ = ()
    name = "lru"

    add = AgeQueue.put  # (one call less per chunk a tier receives)

    def touch(self, key: str, use: int) -> None:
        fifo = self.fifo
        if use < self.tail:  # (not from the manager, whose every use is its newest)
            if key in self:
                self.put(key, use)
            return
        if key in fifo:  # ``put``'s way for the newest use, inline: one call per hit
            fifo.move_to_end(key)
        elif self._when.pop(key, None) is None:
            return  # not in this tier
        fifo[key] = self.tail = use

    def evict(self, can_evict: Callable[[str], bool]) -> str | None:
        fifo = self.fifo
        if not self._when and fifo:  # nothing came late: the FIFO's first, unless pinned
            self._late.clear()  # (stale entries only)
            first = next(iter(fifo))
            if can_evict(first):
                self.remove(first)
                return first
        key = self.oldest()
        if key is not None and not can_evict(key):  # pinned in front: look further back
            key = next((k for k in self.in_order() if can_evict(k)), None)
        if key is not None:
            self.remove(key)
        return key


class S3FIFO:
    """S3-FIFO: a small probationary FIFO, a main FIFO with 2-bit frequencies, a ghost FIFO."""

    name = "s3fifo"
    SMALL_SHARE = 0.1
    MAX_FREQ = 3

    def __init__(self) -> None:
        self._small: OrderedDict[str, None] = OrderedDict()
        self._main: OrderedDict[str, None] = OrderedDict()
        self._ghost: OrderedDict[str, None] = OrderedDict()
        self._freq: dict[str, int] = {}

    def add(self, key: str, last_use: int = 0) -> None:  # the order ignores uses
        if key in self._freq:
            self.touch(key)
            return
        self._freq[key] = 0
        if key in self._ghost:
            del self._ghost[key]
            self._main[key] = None
        else:
            self._small[key] = None

    def touch(self, key: str, use: int = 0) -> None:
        if key in self._freq:
            self._freq[key] = min(self._freq[key] + 1, self.MAX_FREQ)

    def remove(self, key: str) -> None:
        if self._freq.pop(key, None) is not None:
            self._small.pop(key, None)
            self._main.pop(key, None)

    def evict(self, can_evict: Callable[[str], bool]) -> str | None:
        # every key is looked at a bounded number of times: pinned keys are re-queued (and a
        # queue whose every key is pinned is passed over), and frequencies only fall
        budget = (len(self._small) + len(self._main)) * (self.MAX_FREQ + 2) + 1
        # distinct pinned keys per queue: counting pops instead closed a queue whose unpinned
        # keys were still behind pinned ones (T1 then stayed over its capacity)
        pinned_small: set[str] = set()
        pinned_main: set[str] = set()
        while budget > 0 and self._freq:
            budget -= 1
            total = len(self._small) + len(self._main)
            small_open = self._small and len(pinned_small) < len(self._small)
            main_open = self._main and len(pinned_main) < len(self._main)
            if not small_open and not main_open:
                return None
            if small_open and (len(self._small) >= self.SMALL_SHARE * total or not main_open):
                key, _ = self._small.popitem(last=False)
                if not can_evict(key):
                    self._small[key] = None
                    pinned_small.add(key)
                elif self._freq[key] > 1:
                    self._freq[key] = 0
                    self._main[key] = None
                else:
                    del self._freq[key]
                    self._remember(key)
                    return key
            else:
                key, _ = self._main.popitem(last=False)
                if not can_evict(key):
                    self._main[key] = None
                    pinned_main.add(key)
                elif self._freq[key] > 0:
                    self._freq[key] -= 1
                    self._main[key] = None
                else:
                    del self._freq[key]
                    return key
        return None

    def _remember(self, key: str) -> None:
        self._ghost[key] = None
        while len(self._ghost) > max(len(self._main) + len(self._small), 1):
            self._ghost.popitem(last=False)

    def __len__(self) -> int:
        return len(self._freq)


POLICIES: dict[str, Callable[[], Policy]] = {"lru": LRU, "s3fifo": S3FIFO}
# when a chunk is written to T3 (the manager's other choice; named here, beside the policies,
# so the command line can list both without loading the manager)
POSTURES = ("eager", "lazy")


def make_policy(name: str) -> Policy:
    """A fresh policy by registered name; KeyError names the choices."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise KeyError(f"unknown policy {name!r}: choose {', '.join(POLICIES)}") from None
