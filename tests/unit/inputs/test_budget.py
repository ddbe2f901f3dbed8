"""inputs/budget.py: ``--kv-cache-memory-bytes`` as vLLM takes it (bytes a rank)."""

from __future__ import annotations

import pytest

from kvtool.errors import InputError
from kvtool.inputs.budget import budget_notes, parse_budget, pools
from kvtool.inputs.shape import resolve_shape


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100000000", 100_000_000), ("100,000,000", 100_000_000), ("20GiB", 20 * 2**30)],
)
def test_a_budget_is_bytes_or_a_size(text: str, expected: int) -> None:
    assert parse_budget(text, resolve_shape("llama-3.1-8b")) == expected


def test_no_budget_is_none_and_other_engines_have_none() -> None:
    assert parse_budget(None, resolve_shape("llama-3.1-8b")) is None
    with pytest.raises(InputError, match="--engine sglang has none"):
        parse_budget("1GiB", resolve_shape("llama-3.1-8b", engine="sglang"))


def test_a_context_vllm_refuses_is_said_with_the_longest_that_fits() -> None:
    shape = resolve_shape("llama-3.1-8b")
    found = pools(shape, [4_000, 128_000], 10**9, None)
    (note,) = budget_notes(found, shape)
    assert note.startswith("128,000 tokens: vLLM refuses to start with 1,000,000,000 B")
    assert "the longest --max-model-len that fits is 7,600" in note
