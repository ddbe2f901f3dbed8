"""Striping a chunk file: the OSTs it really spans, and a layout that spreads it without
stripes it cannot fill (plan/striping.py, shared by doctor and check; issue 49)."""

from __future__ import annotations

import pytest

from kvtool.plan.striping import (
    STRIPE_UNIT,
    effective_osts,
    judge_stripes,
    setstripe,
    spans,
    spreading_layout,
)

MIB = 2**20
LLAMA_405B_FILE = 256 * 516_096 // 144  # tp 8 x pp 18: 917,504 B (896 KiB)
LLAMA_70B_FILE = 256 * 327_680 // 8  # tp 8: 10 MiB


@pytest.mark.parametrize(
    ("size", "count", "stripe", "osts", "effective"),
    [
        (LLAMA_70B_FILE, -1, MIB, 6, 6),  # every OST, 6 of them
        (LLAMA_70B_FILE, -1, MIB, 40, 10),  # every OST, but 10 MiB fills 10 stripes
        (LLAMA_70B_FILE, 16, MIB, None, 10),
        (LLAMA_70B_FILE, 4, MIB, 40, 4),
        (LLAMA_405B_FILE, -1, MIB, 40, 1),  # -c -1 is a no-op for an 896 KiB file
        (LLAMA_405B_FILE, 8, 128 * 2**10, 40, 7),  # 896 / 128 = 7
    ],
)  # fmt: skip
def test_effective_osts_is_the_smallest_of_count_fill_and_osts(
    size: int, count: int, stripe: int, osts: int | None, effective: int
) -> None:
    assert effective_osts(size, stripe_count=count, stripe_size=stripe, osts=osts) == effective


def test_the_spreading_layout_never_asks_for_more_stripes_than_the_file_fills() -> None:
    assert spreading_layout(LLAMA_70B_FILE, 8) == (8, MIB)
    assert spreading_layout(LLAMA_405B_FILE, 8) == (8, 64 * 2**10)  # 112 KiB -> 64 KiB
    assert spreading_layout(LLAMA_405B_FILE, 6) == (6, 128 * 2**10)  # 149 KiB -> 128 KiB
    assert spreading_layout(100_000, 8) == (2, STRIPE_UNIT)  # 2 stripes of 64 KiB at most
    for size in (1, 65_536, 65_537, 917_504, 3 * MIB + 1, 10 * MIB, 81 * MIB):
        for target in range(1, 70):
            count, stripe = spreading_layout(size, target)
            assert stripe % STRIPE_UNIT == 0
            assert 1 <= count <= min(target, spans(size, stripe)), (size, target)


def test_setstripe_writes_the_size_lfs_takes() -> None:
    assert setstripe(6, 128 * 2**10, "/fsx/kv") == "lfs setstripe -c 6 -S 128K /fsx/kv"
    assert setstripe(8, MIB, "/fsx/kv") == "lfs setstripe -c 8 -S 1M /fsx/kv"


def test_each_rule_is_named_where_it_applies() -> None:
    one = judge_stripes(LLAMA_70B_FILE, stripe_count=1, stripe_size=MIB, osts=None, nodes=1,
                        fan_in=True, path="/fsx/kv")  # fmt: skip
    assert one.status == "PASS"
    assert "one node here: nothing fans in" in one.rules
    shared = judge_stripes(LLAMA_405B_FILE, stripe_count=1, stripe_size=MIB, osts=40, nodes=8,
                           fan_in=True, path="/fsx/kv")  # fmt: skip
    assert (shared.status, shared.effective) == ("WARN", 1)
    assert shared.fix.startswith("lfs setstripe -c 8 -S 64K /fsx/kv")
    assert "applies here: every node may read the same chunk" in shared.rules
    tiny = judge_stripes(100_000, stripe_count=1, stripe_size=MIB, osts=40, nodes=8,
                         fan_in=True, path="/fsx/kv")  # fmt: skip
    assert tiny.fix.startswith("lfs setstripe -c 2 -S 64K")
    assert "no layout reaches 8" in tiny.message
