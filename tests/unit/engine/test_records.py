"""The manager's records: the rules refuse what they would misread, a tier at 0 is off, a
Move is a plain tuple (the hot paths build it with tuple.__new__), and every counter starts
at zero."""

from __future__ import annotations

import math

import pytest

from kvtool.engine.records import TIERS, EngineConfig, Move, new_counters
from kvtool.errors import InputError


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"posture": "EAGER"}, "unknown --posture 'EAGER'"),
        ({"policy": "fifo"}, "unknown --policy 'fifo'"),
        ({"pressure": 0.0}, "pressure"),
        ({"pressure": 1.5}, "pressure"),
        ({"t2_idle_s": 0.0}, "idle"),
        ({"t3_idle_s": math.nan}, "idle"),
        ({"t3_idle_s": math.inf}, "idle"),
        ({"capacity_bytes": {"T5": 1}}, "unknown tier 'T5'"),
        ({"capacity_bytes": {"T1": -1}}, "must not be negative"),
        ({"shared_ttl_s": 0.0}, "shared TTL"),
    ],
)
def test_the_config_refuses_rules_it_would_misread(bad: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        EngineConfig(**bad)  # type: ignore[arg-type]


def test_a_tier_at_zero_is_off_and_unbounded_is_on() -> None:
    config = EngineConfig(capacity_bytes={"T1": 10, "T2": 0, "T3": None, "T4": None})
    assert [config.enabled(t) for t in TIERS] == [True, False, True, True]


def test_a_move_built_as_the_hot_paths_build_it_is_a_move() -> None:
    fields = ("copy", "k", "T3", "T1", 4096, "hit")
    made = tuple.__new__(Move, fields)
    assert made == Move(*fields)
    assert (made.kind, made.dst, made.why) == ("copy", "T1", "hit")


def test_every_counter_starts_at_zero() -> None:
    counters = new_counters()
    assert set(counters.values()) == {0}
    assert {"hits_T1", "bytes_written_T4", "lookups", "recomputes", "faults"} <= set(counters)
