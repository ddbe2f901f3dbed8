"""Eviction policies: which resident chunk of a tier leaves first. They only decide; the
manager moves nothing until a policy has named a victim, and mediums move the bytes. Pure.

A policy sees keys added, touched and removed, and ``evict(can_evict)`` names and forgets the
next victim that ``can_evict`` allows (chunks in use are pinned and skipped). Registered by
name in ``POLICIES``:

* ``lru``: least recently used first.
* ``s3fifo``: S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP
  2023): new keys enter a small FIFO (10% of entries); those touched again move to the main
  FIFO, the rest leave early and are remembered in a ghost FIFO, so a key that returns soon goes
  straight to main. Main re-queues a key while its 2-bit frequency is above zero. One-hit
  wonders (a session's unique suffix) leave before reused prefixes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol


class Policy(Protocol):
    """What the manager asks of an eviction policy."""

    name: str

    def add(self, key: str) -> None:
        """``key`` became resident in the tier."""
        ...

    def touch(self, key: str) -> None:
        """``key`` was read or written again."""
        ...

    def remove(self, key: str) -> None:
        """``key`` left the tier for another reason (moved, expired, corrupt)."""
        ...

    def evict(self, can_evict: Callable[[str], bool]) -> str | None:
        """Name the next victim ``can_evict`` allows and forget it; None when none may go."""
        ...

    def __len__(self) -> int: ...


class LRU:
    """Least recently used first."""

    name = "lru"

    def __init__(self) -> None:
        self._order: OrderedDict[str, None] = OrderedDict()

    def add(self, key: str) -> None:
        if key in self._order:
            self._order.move_to_end(key)
        else:
            self._order[key] = None

    def touch(self, key: str) -> None:
        if key in self._order:
            self._order.move_to_end(key)

    def remove(self, key: str) -> None:
        self._order.pop(key, None)

    def evict(self, can_evict: Callable[[str], bool]) -> str | None:
        for key in self._order:
            if can_evict(key):
                del self._order[key]
                return key
        return None

    def __len__(self) -> int:
        return len(self._order)


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

    def add(self, key: str) -> None:
        if key in self._freq:
            self.touch(key)
            return
        self._freq[key] = 0
        if key in self._ghost:
            del self._ghost[key]
            self._main[key] = None
        else:
            self._small[key] = None

    def touch(self, key: str) -> None:
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
