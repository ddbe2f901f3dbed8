"""What the tiering manager decides with and hands back (docs/engine.md): the tiers, the
rules (``EngineConfig``: capacities, pressure, idle times, posture, policy, shared TTL, the
reload-vs-recompute crossovers), the ``Move``s it returns, its ``Chunk`` entries, a
``Lookup``'s answer and the event counters. Pure records; ``manager.Manager`` applies them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from kvtool.engine.policy import POLICIES, POSTURES
from kvtool.errors import InputError

TIERS = ("T1", "T2", "T3", "T4")
Key = str  # hex digests from the engine; a trace's block ids (as text) in replay
SHARED_TIERS = ("T3", "T4")  # what another node can read
IDLE_TIERS = ("T2", "T3")  # the tiers chunks leave when idle


@dataclass(frozen=True)
class EngineConfig:
    """Capacities in bytes per tier (None: unbounded, 0: the tier is off) and the rules."""

    capacity_bytes: dict[str, int | None] = field(
        default_factory=lambda: {"T1": None, "T2": None, "T3": None, "T4": None}
    )
    pressure: float = 0.85
    t2_idle_s: float = 300.0
    t3_idle_s: float = 3600.0
    posture: str = "lazy"
    policy: str = "lru"
    shared_ttl_s: float | None = None
    reload_from_tokens: dict[str, int | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse rules the manager would silently misread (``"EAGER"`` meaning lazy)."""
        if self.posture not in POSTURES:
            raise InputError(f"unknown --posture {self.posture!r}", "choose eager or lazy")
        if self.policy not in POLICIES:
            raise InputError(f"unknown --policy {self.policy!r}", "choose " + ", ".join(POLICIES))
        unknown = sorted(set(self.capacity_bytes) - set(TIERS))
        if unknown:
            raise InputError(f"unknown tier {unknown[0]!r}", "tiers are " + ", ".join(TIERS))
        negative = [t for t, c in self.capacity_bytes.items() if c is not None and c < 0]
        if negative:
            raise InputError(f"{negative[0]} capacity must not be negative", "0 turns a tier off")
        if not 0 < self.pressure <= 1:
            raise InputError(f"pressure must be in (0, 1], got {self.pressure:g}")
        for name, idle in (("--t2-idle", self.t2_idle_s), ("--t3-idle", self.t3_idle_s)):
            if not 0 < idle < math.inf:  # NaN fails both comparisons
                raise InputError(
                    f"{name} must be a positive duration, got {idle:g} s",
                    "give e.g. 30s, or 10000w to never demote",
                )
        if self.shared_ttl_s is not None and self.shared_ttl_s <= 0:
            raise InputError("the shared TTL must be positive seconds (None: no TTL)")

    def enabled(self, tier: str) -> bool:
        """A tier with capacity 0 is off."""
        return self.capacity_bytes.get(tier, 0) != 0


class Move(NamedTuple):
    """One thing for a medium to do. ``put``: store the caller's bytes in ``dst``; ``copy``:
    read ``src``, write ``dst``, keep ``src``; ``move``: the same, then delete from ``src``;
    ``drop``: delete from ``src``. ``why`` is the rule that called for it."""

    kind: str
    key: Key
    src: str | None
    dst: str | None
    nbytes: int
    why: str


class Chunk:
    """What the manager knows of one chunk."""

    __slots__ = (
        "expires_at", "key", "last_access", "last_use", "nbytes", "pins", "tiers", "tokens"
    )  # fmt: skip

    def __init__(
        self,
        key: Key,
        nbytes: int,
        tokens: int,
        now: float,
        use: int,
        tiers: set[str] | None = None,
    ) -> None:
        self.key = key
        self.nbytes = nbytes
        self.tokens = tokens
        self.tiers: set[str] = set() if tiers is None else tiers
        self.last_access = now  # the clock's time: what the idle rules read
        self.last_use = use  # the manager's count of uses: what LRU orders by
        self.pins = 0
        self.expires_at: float | None = None


class Lookup(NamedTuple):
    """A lookup's answer: the leading chunks held somewhere (key, fastest tier holding it)
    and the moves that bring them into T1 (empty when recomputing is faster)."""

    hits: list[tuple[Key, str]]
    moves: list[Move]
    recompute: bool


def new_counters() -> dict[str, int]:
    """Every counter at zero: hits, hit tokens and bytes read and written per tier, and the
    events."""
    counters = {
        f"{name}_{tier}": 0
        for tier in TIERS
        for name in ("hits", "hit_tokens", "bytes_read", "bytes_written")
    }
    for name in (
        "lookups", "lookup_chunks", "misses", "inserts", "evictions", "demotions",
        "promotions", "recomputes", "recomputed_tokens", "expired", "corrupt", "faults",
    ):  # fmt: skip
        counters[name] = 0
    return counters
